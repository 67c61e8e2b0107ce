/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "dependencies.h"
#include "finding.h"
#include "version.h"

/* The dependency vulnerability check over a local copy of osv.dev's
 * per-ecosystem export: DIR/<ecosystem>/ *.json, one OSV record per file
 * (DIR/PyPI/GHSA-xxxx.json, DIR/npm/..., DIR/Go/..., DIR/crates.io/...),
 * as unpacked from https://osv-vulnerabilities.storage.googleapis.com/
 * <ecosystem>/all.zip. The administrator refreshes it; nothing here ever
 * downloads anything.
 *
 * A record covers a version when one of its affected[] entries names the
 * package (package.ecosystem exactly, package.name as the ecosystem
 * compares names: PEP 503 for PyPI, exactly elsewhere) and either lists the
 * version in versions[] or has a SEMVER or ECOSYSTEM range whose events
 * (introduced, fixed, last_affected; "limit" is ignored) put it inside, as
 * the OSV schema's evaluation says. GIT ranges are ignored (they name
 * commits). Withdrawn records are skipped.
 *
 * Severity, the highest of:
 *  - database_specific.severity of the record or of the affected entry, or
 *    ecosystem_specific.severity ("LOW", "MODERATE"/"MEDIUM", "HIGH",
 *    "CRITICAL"; GitHub's advisories carry it);
 *  - severity[] entries of type CVSS_V3 or CVSS_V2, whose vector's base
 *    score is computed (CVSS 3.x and 2.0 formulas): >= 9.0 critical,
 *    >= 7.0 high, >= 4.0 moderate, else low. CVSS_V4 vectors are not
 *    scored (their score needs the specification's lookup tables): a
 *    record with nothing else counts as of unknown severity.
 * A covered version of HIGH or CRITICAL severity is an error finding
 * (breaker vulnerable-dependency); other severities, unknown included, are
 * warnings. Limits: versions that do not parse (version.h) are not
 * compared, so a range with one is skipped; records larger than
 * OSV_RECORD_MAX are skipped and counted. */

typedef enum OsvSeverity {
        OSV_SEVERITY_UNKNOWN,
        OSV_SEVERITY_LOW,
        OSV_SEVERITY_MODERATE,
        OSV_SEVERITY_HIGH,
        OSV_SEVERITY_CRITICAL,
        _OSV_SEVERITY_MAX,
} OsvSeverity;

#define OSV_RECORD_MAX (4U * 1024U * 1024U)

const char *osv_severity_to_string(OsvSeverity s);

/* The base score of a CVSS vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"
 * (3.0 and 3.1), or "AV:N/AC:L/Au:N/C:P/I:P/A:P" (2.0, optionally
 * "(...)" or "CVSS:2.0/"). -EOPNOTSUPP for CVSS 4.0, -EINVAL for anything
 * malformed or missing a base metric. */
int cvss_base_score(const char *vector, double *ret);

/* The severity of a record (see above); *ret_score the highest CVSS score
 * found, or -1. */
OsvSeverity osv_record_severity(json_object *record, double *ret_score);

/* 1 when the record covers that version of that package, 0 if not,
 * -EINVAL when the record is not an object. */
int osv_record_affects(json_object *record, Ecosystem e, const char *name, const char *version);

/* The same over one record's text (buffer-based, for the fuzzers too). */
int osv_record_check(const char *text, size_t size, const DependencyChange *changes, size_t n_changes, FindingList *out);

/* The cheap test osv_check() makes before it parses a record: false only
 * when the text certainly names no such package (no "name" key with it as
 * its value, escapes taken as possible matches). A record that
 * osv_record_check() finds covering the package always passes. */
bool osv_text_may_name(Ecosystem e, const char *text, size_t size, const char *name);

typedef struct OsvStats {
        unsigned files_read;
        unsigned records_parsed;        /* of those, the ones naming a package looked for */
        unsigned records_skipped;       /* too large, unreadable or malformed */
} OsvStats;

/* Checks every change's check_version against the database at dir. An
 * ecosystem without a directory there has no advisories. -ENOENT (and a
 * message) when dir itself cannot be opened. */
int osv_check(const char *dir, const DependencyChanges *c, FindingList *out, OsvStats *ret_stats, char **ret_error);
