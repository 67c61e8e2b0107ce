/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* One entry per parser of the review engine, shaped for libFuzzer: a fuzz
 * target is
 *
 *     int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
 *             return review_fuzz_sarif(data, size);
 *     }
 *
 * linked with libagentfab-review and -fsanitize=fuzzer,address,undefined.
 * Each copies the input (NUL-terminated where the parser wants a string),
 * runs the parser and what consumes its result (escaping, serialising), and
 * checks invariants that must hold for any input with abort(): a finding's
 * strings are bounded and one line, a normalised path is never absolute nor
 * climbs, version comparison is antisymmetric. They always return 0. */

int review_fuzz_secret_scan(const uint8_t *data, size_t size);    /* data: a file's added lines */
int review_fuzz_sarif(const uint8_t *data, size_t size);
int review_fuzz_checker_lines(const uint8_t *data, size_t size);
int review_fuzz_manifest(const uint8_t *data, size_t size);       /* first byte: ManifestKind; rest: the text */
int review_fuzz_toml(const uint8_t *data, size_t size);
int review_fuzz_osv_record(const uint8_t *data, size_t size);
int review_fuzz_version(const uint8_t *data, size_t size);        /* two versions separated by '\n' */
int review_fuzz_cvss(const uint8_t *data, size_t size);
int review_fuzz_lcov(const uint8_t *data, size_t size);
int review_fuzz_cobertura(const uint8_t *data, size_t size);
int review_fuzz_repo_settings(const uint8_t *data, size_t size);
int review_fuzz_findings_json(const uint8_t *data, size_t size);
int review_fuzz_path(const uint8_t *data, size_t size);

typedef int (*review_fuzz_t)(const uint8_t *data, size_t size);

/* All of them, by name ("sarif", "lcov", ...), for a driver that runs them
 * over a corpus; NULL-terminated. */
typedef struct ReviewFuzzTarget {
        const char *name;
        review_fuzz_t run;
} ReviewFuzzTarget;

extern const ReviewFuzzTarget review_fuzz_targets[];
