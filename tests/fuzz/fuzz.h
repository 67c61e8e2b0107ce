/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the libFuzzer targets of tests/fuzz. Each target checks
 * invariants, not only that nothing crashes: a broken invariant aborts, and
 * libFuzzer keeps the input as a crash. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                   \
        do {                                                                    \
                if (!(cond)) {                                                  \
                        fprintf(stderr, "%s:%d: invariant broken: %s: ",        \
                                __FILE__, __LINE__, #cond);                     \
                        fprintf(stderr, __VA_ARGS__);                           \
                        fputc('\n', stderr);                                    \
                        abort();                                                \
                }                                                               \
        } while (0)

/* For the targets' own checks, which walk every byte of what a parser made:
 * without coverage instrumentation (a callback for each comparison of each
 * byte, and features that say nothing about the code under test), and not
 * inlined into an instrumented caller. */
#define FUZZ_UNINSTRUMENTED __attribute__((no_sanitize("coverage"), noinline))

/* The parsers log what they refuse; at millions of inputs a second that
 * would be all the fuzzer does. */
static inline void fuzz_quiet(void) {
        log_set_max_level(LOG_EMERG);
}

/* The input as a stream of structured values, for targets that build their
 * argument (a D-Bus message, a reply split into deltas) from it. Reading past
 * the end yields zeros and empty strings, so every input decodes to
 * something. */
typedef struct FuzzInput {
        const uint8_t *data;
        size_t size, pos;
} FuzzInput;

static inline bool fuzz_eof(const FuzzInput *in) {
        return in->pos >= in->size;
}

static inline uint8_t fuzz_u8(FuzzInput *in) {
        return in->pos < in->size ? in->data[in->pos++] : 0;
}

static inline uint64_t fuzz_u64(FuzzInput *in, unsigned bytes) {
        uint64_t v = 0;
        for (unsigned i = 0; i < bytes; i++)
                v = v << 8 | fuzz_u8(in);
        return v;
}

/* A string up to the next byte 0xff (or the end), as a fresh NUL-terminated
 * copy; embedded NULs stay in *ret_len. Never NULL (abort on OOM). */
static inline char *fuzz_string(FuzzInput *in, size_t *ret_len) {
        const uint8_t *start = in->data + in->pos, *end;
        size_t n, left = in->size - in->pos;

        end = in->pos < in->size ? memchr(start, 0xff, left) : NULL;
        n = end ? (size_t) (end - start) : (in->pos < in->size ? left : 0);
        in->pos += n + (end ? 1 : 0);

        char *s = malloc(n + 1);
        if (!s)
                abort();
        if (n > 0)
                memcpy(s, start, n);
        s[n] = '\0';
        if (ret_len)
                *ret_len = n;
        return s;
}

/* A NUL-terminated copy of the whole input. */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        if (!s)
                abort();
        if (size > 0)
                memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

static inline bool fuzz_streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
