/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "string-table.h"
#include "version.h"

static const char *const ecosystem_table[_ECOSYSTEM_MAX] = {
        [ECOSYSTEM_NPM] = "npm",
        [ECOSYSTEM_PYPI] = "PyPI",
        [ECOSYSTEM_GO] = "Go",
        [ECOSYSTEM_CRATES_IO] = "crates.io",
};

DEFINE_STRING_TABLE_LOOKUP(ecosystem, Ecosystem);

/* Reads a run of digits; at most 19 of them, so that it fits. */
static int read_number(const char **p, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;
        size_t n = 0;

        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        for (; isdigit((unsigned char) *s); s++, n++) {
                if (n >= 19)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        *p = s;
        *ret = v;
        return 0;
}

static int cmp_u64(uint64_t a, uint64_t b) {
        return a < b ? -1 : a > b ? 1 : 0;
}

/* ---- semver ---- */

#define SEMVER_PARTS 4

typedef struct SemVer {
        uint64_t part[SEMVER_PARTS];
        const char *pre;        /* NULL: a release */
        size_t pre_len;
} SemVer;

static int semver_parse(const char *s, SemVer *ret) {
        SemVer v = {};
        int r;

        if (*s == 'v' || *s == 'V' || *s == '=')
                s++;
        for (size_t i = 0; i < SEMVER_PARTS; i++) {
                r = read_number(&s, &v.part[i]);
                if (r < 0)
                        return r;
                if (*s != '.')
                        break;
                s++;
                if (i == SEMVER_PARTS - 1)
                        return -EINVAL;
        }
        if (*s == '-') {
                const char *e;
                s++;
                e = s + strcspn(s, "+");
                if (e == s)
                        return -EINVAL;
                for (const char *c = s; c < e; c++)
                        if (!isalnum((unsigned char) *c) && *c != '-' && *c != '.')
                                return -EINVAL;
                v.pre = s;
                v.pre_len = (size_t) (e - s);
                s = e;
        }
        if (*s == '+') {
                for (s++; *s; s++)
                        if (!isalnum((unsigned char) *s) && *s != '-' && *s != '.')
                                return -EINVAL;
        }
        if (*s != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

static bool all_digits(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char) s[i]))
                        return false;
        return n > 0;
}

/* Digit strings of any length: by length without leading zeros, then bytes. */
static int cmp_digits(const char *a, size_t an, const char *b, size_t bn) {
        while (an > 1 && *a == '0')
                a++, an--;
        while (bn > 1 && *b == '0')
                b++, bn--;
        if (an != bn)
                return an < bn ? -1 : 1;
        int r = memcmp(a, b, an);
        return r < 0 ? -1 : r > 0;
}

static int semver_cmp_pre(const SemVer *a, const SemVer *b) {
        const char *x, *y, *xe, *ye;

        if (!a->pre || !b->pre)
                return a->pre ? -1 : b->pre ? 1 : 0;
        x = a->pre;
        y = b->pre;
        xe = x + a->pre_len;
        ye = y + b->pre_len;
        for (;;) {
                const char *xd, *yd;
                size_t xn, yn;
                bool xnum, ynum;
                int r;

                if (x >= xe || y >= ye)
                        return x >= xe ? (y >= ye ? 0 : -1) : 1;
                xd = memchr(x, '.', (size_t) (xe - x)) ?: xe;
                yd = memchr(y, '.', (size_t) (ye - y)) ?: ye;
                xn = (size_t) (xd - x);
                yn = (size_t) (yd - y);
                xnum = all_digits(x, xn);
                ynum = all_digits(y, yn);
                if (xnum && ynum)
                        r = cmp_digits(x, xn, y, yn);
                else if (xnum || ynum)
                        r = xnum ? -1 : 1;
                else {
                        r = memcmp(x, y, MIN(xn, yn));
                        r = r != 0 ? (r < 0 ? -1 : 1) : cmp_u64(xn, yn);
                }
                if (r != 0)
                        return r;
                x = xd + 1;
                y = yd + 1;
        }
}

static int semver_compare(const char *a, const char *b, int *ret) {
        SemVer x, y;
        int r;

        r = semver_parse(a, &x);
        if (r < 0)
                return r;
        r = semver_parse(b, &y);
        if (r < 0)
                return r;
        for (size_t i = 0; i < SEMVER_PARTS; i++)
                if (x.part[i] != y.part[i]) {
                        *ret = cmp_u64(x.part[i], y.part[i]);
                        return 0;
                }
        *ret = semver_cmp_pre(&x, &y);
        return 0;
}

/* ---- PEP 440 ---- */

#define PEP440_RELEASE_MAX 16

typedef struct Pep440 {
        uint64_t epoch;
        uint64_t release[PEP440_RELEASE_MAX];
        size_t n_release;
        int pre_phase;          /* -1 none, 0 a, 1 b, 2 rc */
        uint64_t pre;
        bool has_post, has_dev;
        uint64_t post, dev;
} Pep440;

static bool skip_word(const char **p, const char *w) {
        size_t n = strlen(w);
        if (strncasecmp(*p, w, n) != 0)
                return false;
        *p += n;
        return true;
}

static bool is_sep(char c) {
        return c == '.' || c == '-' || c == '_';
}

/* An optional separator, then an optional number (0 when absent). */
static int read_implicit_number(const char **p, uint64_t *ret) {
        const char *s = *p;

        if (is_sep(*s) && isdigit((unsigned char) s[1]))
                s++;
        if (!isdigit((unsigned char) *s)) {
                *ret = 0;
                return 0;
        }
        *p = s;
        return read_number(p, ret);
}

static int pep440_parse(const char *s, Pep440 *ret) {
        static const struct {
                const char *word;
                int phase;
        } pre_words[] = {
                /* Longest first: "preview" before "pre", "alpha" before "a". */
                { "preview", 2 }, { "alpha", 0 }, { "beta", 1 }, { "pre", 2 }, { "rc", 2 }, { "a", 0 }, { "b", 1 }, { "c", 2 },
        };
        Pep440 v = { .pre_phase = -1 };
        uint64_t n;
        int r;

        while (*s == ' ')
                s++;
        if (*s == 'v' || *s == 'V')
                s++;
        r = read_number(&s, &n);
        if (r < 0)
                return r;
        if (*s == '!') {
                v.epoch = n;
                s++;
                r = read_number(&s, &n);
                if (r < 0)
                        return r;
        }
        v.release[v.n_release++] = n;
        while (*s == '.' && isdigit((unsigned char) s[1])) {
                s++;
                r = read_number(&s, &n);
                if (r < 0)
                        return r;
                if (v.n_release >= PEP440_RELEASE_MAX)
                        return -EINVAL;
                v.release[v.n_release++] = n;
        }
        /* Trailing zeros do not count: 1.0 == 1.0.0. */
        while (v.n_release > 1 && v.release[v.n_release - 1] == 0)
                v.n_release--;

        /* Pre-release. */
        {
                const char *p = s + (is_sep(*s) ? 1 : 0);
                for (size_t i = 0; i < ELEMENTSOF(pre_words); i++)
                        if (skip_word(&p, pre_words[i].word)) {
                                v.pre_phase = pre_words[i].phase;
                                r = read_implicit_number(&p, &v.pre);
                                if (r < 0)
                                        return r;
                                s = p;
                                break;
                        }
        }
        /* Post-release: "-N", or [sep](post|rev|r)[sep][N]. */
        if (*s == '-' && isdigit((unsigned char) s[1])) {
                s++;
                r = read_number(&s, &v.post);
                if (r < 0)
                        return r;
                v.has_post = true;
        } else {
                const char *p = s + (is_sep(*s) ? 1 : 0);
                if (skip_word(&p, "post") || skip_word(&p, "rev") || skip_word(&p, "r")) {
                        r = read_implicit_number(&p, &v.post);
                        if (r < 0)
                                return r;
                        v.has_post = true;
                        s = p;
                }
        }
        /* Dev release. */
        {
                const char *p = s + (is_sep(*s) ? 1 : 0);
                if (skip_word(&p, "dev")) {
                        r = read_implicit_number(&p, &v.dev);
                        if (r < 0)
                                return r;
                        v.has_dev = true;
                        s = p;
                }
        }
        /* A local version label: [a-z0-9]+ separated by [-_.], ignored. */
        if (*s == '+') {
                if (!isalnum((unsigned char) s[1]))
                        return -EINVAL;
                for (s++; *s; s++)
                        if (!isalnum((unsigned char) *s) && !is_sep(*s))
                                return -EINVAL;
        }
        while (*s == ' ')
                s++;
        if (*s != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

/* PEP 440's order past the release: a dev release of a final version sorts
 * before its pre-releases, pre-releases before the final, then
 * post-releases; within each, a dev release before its non-dev twin. */
static int pep440_cmp(const Pep440 *a, const Pep440 *b) {
        int r;

        r = cmp_u64(a->epoch, b->epoch);
        if (r != 0)
                return r;
        for (size_t i = 0; i < MAX(a->n_release, b->n_release); i++) {
                uint64_t x = i < a->n_release ? a->release[i] : 0, y = i < b->n_release ? b->release[i] : 0;
                r = cmp_u64(x, y);
                if (r != 0)
                        return r;
        }

        /* Pre-release key: (rank, number) with rank 0 dev-only, 1..3 a/b/rc, 4 none. */
        int ar = a->pre_phase >= 0 ? a->pre_phase + 1 : (!a->has_post && a->has_dev ? 0 : 4);
        int br = b->pre_phase >= 0 ? b->pre_phase + 1 : (!b->has_post && b->has_dev ? 0 : 4);
        if (ar != br)
                return ar < br ? -1 : 1;
        if (a->pre_phase >= 0) {
                r = cmp_u64(a->pre, b->pre);
                if (r != 0)
                        return r;
        }
        if (a->has_post != b->has_post)
                return a->has_post ? 1 : -1;
        if (a->has_post) {
                r = cmp_u64(a->post, b->post);
                if (r != 0)
                        return r;
        }
        if (a->has_dev != b->has_dev)
                return a->has_dev ? -1 : 1;
        return a->has_dev ? cmp_u64(a->dev, b->dev) : 0;
}

int version_compare(Ecosystem e, const char *a, const char *b, int *ret) {
        int r;

        if (!a || !b || !ret)
                return -EINVAL;
        switch (e) {
        case ECOSYSTEM_NPM:
        case ECOSYSTEM_GO:
        case ECOSYSTEM_CRATES_IO:
                return semver_compare(a, b, ret);
        case ECOSYSTEM_PYPI: {
                Pep440 x, y;
                r = pep440_parse(a, &x);
                if (r < 0)
                        return r;
                r = pep440_parse(b, &y);
                if (r < 0)
                        return r;
                *ret = pep440_cmp(&x, &y);
                return 0;
        }
        default:
                return -EINVAL;
        }
}

int version_is_valid(Ecosystem e, const char *s) {
        int c;
        return version_compare(e, s, s, &c) >= 0;
}
