/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _sentinel_ __attribute__((sentinel))
#define _noreturn_ __attribute__((noreturn))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return streq(a, b);
}

static inline const char *strempty(const char *s) {
        return s ?: "";
}

static inline const char *strna(const char *s) {
        return s ?: "n/a";
}

static inline bool isempty(const char *s) {
        return !s || s[0] == '\0';
}

/* Hand ownership of a pointer over: returns it and leaves NULL behind, so the
 * cleanup attribute of the source does nothing. */
#define TAKE_PTR(p)                             \
        ({                                      \
                __typeof__(p) *_pp_ = &(p);     \
                __typeof__(p) _p_ = *_pp_;      \
                *_pp_ = NULL;                   \
                _p_;                            \
        })

#define TAKE_FD(fd)                             \
        ({                                      \
                int *_pfd_ = &(fd);             \
                int _fd_ = *_pfd_;              \
                *_pfd_ = -EBADF;                \
                _fd_;                           \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)         \
        static inline void func##p(type *p) {           \
                if (*p)                                 \
                        func(*p);                       \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* A NULL-terminated string list literal, for calls that take char **. */
#define STRV_MAKE(...) ((char *[]) { __VA_ARGS__, NULL })

/* Keeps errno intact across a cleanup path. */
#define RET_NERRNO(expr)                        \
        ({                                      \
                __typeof__(expr) _r_ = (expr);  \
                _r_ < 0 ? -errno : _r_;         \
        })

#define UID_INVALID ((uid_t) -1)
#define USEC_PER_SEC ((uint64_t) 1000000ULL)
#define USEC_PER_MSEC ((uint64_t) 1000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

static inline void *mfree_ptr(void *p) {
        free(p);
        return NULL;
}

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

#define _fallthrough_ __attribute__((fallthrough))

/* IN_SET(x, A, B, C): x is one of the listed integer constants. */
#define IN_SET(x, first, ...)                                           \
        ({                                                              \
                const __typeof__(first) _set_[] = { first, __VA_ARGS__ }; \
                __typeof__(first) _x_ = (x);                            \
                bool _found_ = false;                                   \
                for (size_t _i_ = 0; _i_ < ELEMENTSOF(_set_); _i_++)    \
                        if (_set_[_i_] == _x_) {                        \
                                _found_ = true;                         \
                                break;                                  \
                        }                                               \
                _found_;                                                \
        })
