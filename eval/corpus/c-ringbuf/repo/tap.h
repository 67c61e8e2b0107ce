/* A tiny TAP producer for the tests. */
#pragma once
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...) do { \
        tap_n++; \
        if (cond) printf("ok %d - ", tap_n); \
        else { tap_failed++; printf("not ok %d - ", tap_n); } \
        printf(__VA_ARGS__); printf("\n"); \
} while (0)

#define is_int(a, b, name) do { long _a = (a), _b = (b); ok(_a == _b, "%s", name); \
        if (_a != _b) printf("# got %ld, expected %ld\n", _a, _b); } while (0)

#define is_str(a, b, name) do { const char *_a = (a), *_b = (b); \
        int _same = (_a && _b) ? strcmp(_a, _b) == 0 : _a == _b; ok(_same, "%s", name); \
        if (!_same) printf("# got '%s', expected '%s'\n", _a ? _a : "(null)", _b ? _b : "(null)"); } while (0)

static inline int tap_done(void) {
        printf("1..%d\n", tap_n);
        return tap_failed ? 1 : 0;
}
