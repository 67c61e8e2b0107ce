/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A minimal TAP producer: meson runs each test binary with protocol 'tap'
 * and counts every check; tools/test.sh counts "ok N" and "not ok N" lines
 * and, among the former, "ok N # SKIP" ones as skips.
 *
 *   CHECK(cond, fmt, ...)             cond must hold
 *   CHECK_INT_EQ(a, b, fmt, ...)      a == b as signed integers (intmax_t)
 *   CHECK_UINT_EQ(a, b, fmt, ...)     a == b as unsigned integers (uintmax_t)
 *   CHECK_STR_EQ(a, b, fmt, ...)      both NULL or both the same string
 *   CHECK_ERRNO(r, -EXXX, fmt, ...)   r is that negative errno (or 0)
 *   SKIP(fmt, ...)                    "ok N # SKIP reason": a check not made
 *
 * Each operand is evaluated once, before the description's arguments (so
 * these may print what the operands set). On failure the comparisons print
 * both sides as TAP diagnostics ("# ..." lines under the "not ok" line),
 * the way systemd's ASSERT_EQ() and friends do. */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

static unsigned tap_n = 0, tap_failed = 0;

/* Opens the result line: "ok N - " or "not ok N - FILE:LINE: ". */
static __attribute__((noinline, unused)) bool tap_result(bool ok, const char *file, int line) {
        tap_n++;
        if (ok)
                printf("ok %u - ", tap_n);
        else {
                tap_failed++;
                printf("not ok %u - %s:%d: ", tap_n, file, line);
        }
        return ok;
}

/* Ends the result line with the description, on that one line: a line
 * break in it (a value printed with "%s") is written as "\n", so that
 * what follows is not taken for TAP lines of its own. Not a macro around
 * printf(): a description may print with "%s" a pointer that is NULL when
 * the check failed, which glibc prints as "(null)" but GCC would warn
 * about. */
static __attribute__((format(printf, 1, 2), noinline, unused)) void tap_desc_(const char *fmt, ...) {
        char *text = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (n < 0) {
                printf("(description not printed: out of memory)\n");
                return;
        }
        for (const char *c = text; *c; c++)
                if (*c == '\n')
                        printf("\\n");
                else if (*c == '\r')
                        printf("\\r");
                else
                        putchar(*c);
        putchar('\n');
        free(text);
}

#define CHECK(cond, ...)                                                        \
        do {                                                                    \
                tap_result(!!(cond), __FILE__, __LINE__);                       \
                tap_desc_(__VA_ARGS__);                                         \
        } while (0)

/* A check that is not made here (no root, no network, ...): TAP's skip,
 * "ok N # SKIP reason", which meson and tools/test.sh count as a skip. */
#define SKIP(...)                                                               \
        do {                                                                    \
                tap_n++;                                                        \
                printf("ok %u # SKIP ", tap_n);                                 \
                printf(__VA_ARGS__);                                            \
                printf("\n");                                                   \
        } while (0)

/* A string as a C literal on one line (a diagnostic must not break the
 * TAP stream with a newline), at most 1024 of its bytes. */
static inline void tap_print_str(const char *s) {
        size_t n = 0;

        if (!s) {
                printf("NULL");
                return;
        }
        putchar('"');
        for (const unsigned char *c = (const unsigned char *) s; *c; c++, n++) {
                if (n >= 1024) {
                        printf("\"... (%zu bytes)", strlen(s));
                        return;
                }
                if (*c == '\n')
                        printf("\\n");
                else if (*c == '\t')
                        printf("\\t");
                else if (*c == '\r')
                        printf("\\r");
                else if (*c == '"' || *c == '\\')
                        printf("\\%c", *c);
                else if (*c < ' ' || *c == 127)
                        printf("\\x%02x", *c);
                else
                        putchar(*c);
        }
        putchar('"');
}

static inline void tap_print_errno(intmax_t v) {
        const char *name = NULL;

        if (v < 0 && v > -4096)
                name = strerrorname_np((int) -v);
        if (name)
                printf("%jd (-%s)", v, name);
        else
                printf("%jd", v);
}

/* Refuses, at compile time, a pointer or a floating-point operand (which
 * would be compared as a cast to an integer): only integers shift. */
#define TAP_INTEGERS_ONLY_(a, b)                                                \
        do {                                                                    \
                (void) sizeof((a) << 0);                                        \
                (void) sizeof((b) << 0);                                        \
        } while (0)

/* Both NULL or both the same string. Not inlined: a description that
 * prints an operand with "%s" must not look to the compiler as if it
 * printed a NULL. */
static __attribute__((noinline, unused)) bool tap_streq_(const char *a, const char *b) {
        return a && b ? strcmp(a, b) == 0 : a == b;
}

#define CHECK_INT_EQ(a, b, ...)                                                 \
        do {                                                                    \
                TAP_INTEGERS_ONLY_(a, b);                                       \
                intmax_t tap_a_ = (intmax_t) (a), tap_b_ = (intmax_t) (b);      \
                bool tap_ok_ = tap_result(tap_a_ == tap_b_, __FILE__, __LINE__); \
                tap_desc_(__VA_ARGS__);                                         \
                if (!tap_ok_) {                                                 \
                        printf("#   %s == %s\n#   left:  %jd\n#   right: %jd\n", \
                               #a, #b, tap_a_, tap_b_);                         \
                }                                                               \
        } while (0)

#define CHECK_UINT_EQ(a, b, ...)                                                \
        do {                                                                    \
                TAP_INTEGERS_ONLY_(a, b);                                       \
                uintmax_t tap_a_ = (uintmax_t) (a), tap_b_ = (uintmax_t) (b);   \
                bool tap_ok_ = tap_result(tap_a_ == tap_b_, __FILE__, __LINE__); \
                tap_desc_(__VA_ARGS__);                                         \
                if (!tap_ok_) {                                                 \
                        printf("#   %s == %s\n#   left:  %ju\n#   right: %ju\n", \
                               #a, #b, tap_a_, tap_b_);                         \
                }                                                               \
        } while (0)

#define CHECK_STR_EQ(a, b, ...)                                                 \
        do {                                                                    \
                const char *tap_a_ = (a), *tap_b_ = (b);                        \
                bool tap_ok_ = tap_streq_(tap_a_, tap_b_);                      \
                tap_result(tap_ok_, __FILE__, __LINE__);                        \
                tap_desc_(__VA_ARGS__);                                         \
                if (!tap_ok_) {                                                 \
                        printf("#   %s == %s\n#   left:  ", #a, #b);            \
                        tap_print_str(tap_a_);                                  \
                        printf("\n#   right: ");                                \
                        tap_print_str(tap_b_);                                  \
                        printf("\n");                                           \
                }                                                               \
        } while (0)

/* r is a function's return: 0, or a negative errno such as -EINVAL. */
#define CHECK_ERRNO(r, expected, ...)                                           \
        do {                                                                    \
                TAP_INTEGERS_ONLY_(r, expected);                                \
                intmax_t tap_a_ = (intmax_t) (r), tap_b_ = (intmax_t) (expected); \
                bool tap_ok_ = tap_result(tap_a_ == tap_b_, __FILE__, __LINE__); \
                tap_desc_(__VA_ARGS__);                                         \
                if (!tap_ok_) {                                                 \
                        printf("#   %s == %s\n#   left:  ", #r, #expected);     \
                        tap_print_errno(tap_a_);                                \
                        printf("\n#   right: ");                                \
                        tap_print_errno(tap_b_);                                \
                        printf("\n");                                           \
                }                                                               \
        } while (0)

static inline int tap_done(void) {
        printf("1..%u\n", tap_n);
        return tap_failed ? 1 : 0;
}
