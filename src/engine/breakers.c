/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "breakers.h"
#include "macro.h"
#include "string-util.h"

static const char *const breaker_table[_BREAKER_MAX] = {
        [BREAKER_TESTS_FAILING] = "tests-failing",
        [BREAKER_FILES_CHANGED] = "files-changed",
        [BREAKER_LINES_CHANGED] = "lines-changed",
        [BREAKER_PROTECTED_PATH] = "protected-path",
        [BREAKER_TESTS_DELETED] = "tests-deleted",
        [BREAKER_TESTS_REGRESSED] = "tests-regressed",
        [BREAKER_DEPENDENCY_MANIFEST] = "dependency-manifest",
        [BREAKER_NETWORK] = "network",
        [BREAKER_BUDGET] = "budget",
        [BREAKER_MALFORMED_OUTPUT] = "malformed-output",
        [BREAKER_SECRET] = "secret",
        [BREAKER_VULNERABLE_DEPENDENCY] = "vulnerable-dependency",
        [BREAKER_REVIEW] = "review",
        [BREAKER_COVERAGE_DROPPED] = "coverage-dropped",
};

const char *breaker_to_string(Breaker b) {
        if (b < 0 || b >= _BREAKER_MAX)
                return NULL;
        return breaker_table[b];
}

Breaker breaker_from_string(const char *s) {
        if (!s)
                return _BREAKER_INVALID;
        for (Breaker b = 0; b < _BREAKER_MAX; b++)
                if (streq(breaker_table[b], s))
                        return b;
        return _BREAKER_INVALID;
}

/* Paths whose change needs a person's eyes, whatever the tests say. Matched
 * ignoring case ("src/Auth/", "Migrations/"). The lists lean towards false
 * alarms: a tripped breaker costs a look, a missed one may cost a breach.
 *  - authentication and authorization code: directories named auth*,
 *    oauth*, and files such as auth.py, jwt_auth.go, authentication.ts;
 *  - payment and billing code;
 *  - database migrations and schemas (a migration runs once, in production);
 *  - secrets and keys that might sit in a checkout;
 *  - CI configuration: it runs with the repository's credentials;
 *  - lock files: a changed lock file changes the code that runs;
 *  - repository plumbing and the agent's own instructions, so that a model
 *    cannot rewrite the rules it works under. */
static const char *const default_protected_globs[] = {
        "**/auth/**", "**/authn/**", "**/authz/**", "**/authentication/**", "**/authorization/**", "**/oauth*/**",
        "**/auth.*", "**/auth_*", "**/auth-*", "**/*_auth.*", "**/*-auth.*",
        "**/authentication*", "**/authorization*", "**/oauth*", "**/*password*", "**/*credential*",
        "**/payment*/**", "**/payment*", "**/billing/**", "**/billing*", "**/checkout/**", "**/invoic*/**",
        "**/migrations/**", "**/migration/**", "**/db/migrate/**", "**/alembic/**", "**/schema.sql", "**/schema.prisma",
        "**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/secrets/**", "**/.ssh/**", "**/.npmrc", "**/.pypirc",
        ".github/**", ".gitlab-ci.yml", ".gitlab/**", ".ci/**", "**/Jenkinsfile", ".circleci/**", ".travis.yml",
        "azure-pipelines.yml", ".azure-pipelines/**", ".buildkite/**", ".drone.yml", "bitbucket-pipelines.yml",
        ".woodpecker/**", ".woodpecker.yml", "appveyor.yml", ".appveyor.yml", ".teamcity/**", "cloudbuild.yaml",
        "**/*.lock", "**/package-lock.json", "**/npm-shrinkwrap.json", "**/pnpm-lock.yaml", "**/go.sum",
        "**/bun.lockb", "**/packages.lock.json", "**/gradle.lockfile", "**/*.lockfile",
        ".gitmodules", ".gitattributes", "**/CODEOWNERS", "AGENTS.md", ".agentfab.md",
};

/* Files that declare dependencies, by basename in any directory (entries
 * with '/' are matched against the whole path). A change here pulls code
 * nobody reviewed; the lock files above are protected paths instead. Build
 * files that mostly list sources (CMakeLists.txt, meson.build, Makefile) are
 * not here: they change too often for good reasons. */
static const char *const default_manifest_names[] = {
        /* JavaScript, TypeScript */
        "package.json", "bower.json", "deno.json", "deno.jsonc",
        /* Python */
        "requirements*.txt", "constraints*.txt", "**/requirements/*.txt", "pyproject.toml", "setup.py", "setup.cfg",
        "Pipfile", "environment.yml", "environment.yaml",
        /* Go, Rust */
        "go.mod", "go.work", "Cargo.toml",
        /* JVM */
        "pom.xml", "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "libs.versions.toml",
        "build.sbt", "project.clj", "deps.edn",
        /* Ruby, PHP */
        "Gemfile", "*.gemspec", "composer.json",
        /* .NET */
        "*.csproj", "*.fsproj", "*.vbproj", "packages.config", "Directory.Packages.props", "Directory.Build.props",
        "*.nuspec",
        /* Swift, Dart, Elixir, Erlang, Haskell, Julia, C/C++ package managers */
        "Package.swift", "Podfile", "Cartfile", "pubspec.yaml", "mix.exs", "rebar.config", "*.cabal", "stack.yaml",
        "cabal.project", "Project.toml", "vcpkg.json", "conanfile.txt", "conanfile.py", "flake.nix",
};

static int strv_from_table(char ***ret, const char *const *table, size_t n) {
        char **l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                l[i] = strdup(table[i]);
                if (!l[i]) {
                        strv_free(l);
                        return -ENOMEM;
                }
        }
        *ret = l;
        return 0;
}

int breaker_config_init_defaults(BreakerConfig *c) {
        int r;

        assert(c);

        *c = (BreakerConfig) {
                .max_consecutive_test_failures = 5,
                .max_files_changed = 20,
                .max_lines_changed = 1000,
                .max_malformed = 3,
        };
        for (Breaker b = 0; b < _BREAKER_MAX; b++)
                c->enabled[b] = true;

        r = strv_from_table(&c->protected_globs, default_protected_globs, ELEMENTSOF(default_protected_globs));
        if (r < 0)
                return r;
        return strv_from_table(&c->manifest_names, default_manifest_names, ELEMENTSOF(default_manifest_names));
}

void breaker_config_done(BreakerConfig *c) {
        if (!c)
                return;
        strv_free(c->protected_globs);
        strv_free(c->manifest_names);
        c->protected_globs = c->manifest_names = NULL;
}

void breaker_trip_done(BreakerTrip *t) {
        if (!t)
                return;
        t->reason = mfree_ptr(t->reason);
}

_printf_(3, 4)
static int trip(BreakerTrip *ret, Breaker b, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        /* Paths come from the model: no control characters in a reason that
         * goes to the journal and over the bus. */
        for (char *c = m; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        *c = '?';
        utf8_sanitize(m, (size_t) k);
        *ret = (BreakerTrip) { .breaker = b, .reason = m };
        return 1;
}

/* ---- Globs ---- */

static char fold(char c, bool casefold) {
        return casefold && c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

/* Matches the bracket expression at *g against c and moves *g past it.
 * Returns -1 when the expression is not closed (then '[' is literal). */
static int bracket_match(const char **g, char c, bool casefold) {
        const char *p = *g + 1, *first;
        bool negate = false, match = false;

        if (*p == '!' || *p == '^') {
                negate = true;
                p++;
        }
        first = p;

        for (;;) {
                char lo, hi;

                if (*p == '\0')
                        return -1;
                if (*p == ']' && p != first)
                        break;
                if (*p == '\\' && p[1])
                        p++;
                lo = hi = *p++;
                if (p[0] == '-' && p[1] && p[1] != ']') {
                        p++;
                        if (*p == '\\' && p[1])
                                p++;
                        hi = *p++;
                }
                char fc = fold(c, casefold);
                if ((c >= lo && c <= hi) || (fc >= fold(lo, casefold) && fc <= fold(hi, casefold)))
                        match = true;
        }

        *g = p + 1;
        if (c == '/')
                return 0;
        return match != negate;
}

typedef struct GlobContext {
        const char *glob, *path;
        size_t path_len;
        bool casefold;
        uint8_t *failed;        /* one bit per (glob offset, path offset) known not to match */
} GlobContext;

static bool glob_match_inner(GlobContext *c, const char *g, const char *p, unsigned depth);

/* Memoizes failures, so that "*a*a*a*b" against "aaaa...a" stays polynomial:
 * each (glob position, path position) pair is tried once. */
static bool glob_match(GlobContext *c, const char *g, const char *p, unsigned depth) {
        size_t bit = 0;

        if (c->failed) {
                bit = (size_t) (g - c->glob) * (c->path_len + 1) + (size_t) (p - c->path);
                if (c->failed[bit / 8] & (1U << (bit % 8)))
                        return false;
        }
        if (glob_match_inner(c, g, p, depth))
                return true;
        if (c->failed)
                c->failed[bit / 8] |= (uint8_t) (1U << (bit % 8));
        return false;
}

static bool glob_match_inner(GlobContext *c, const char *g, const char *p, unsigned depth) {
        bool casefold = c->casefold;

        /* Recursion happens once per star of the glob; bound it anyway. */
        if (depth > 64)
                return false;

        for (;;) {
                if (*g == '\0')
                        return *p == '\0';

                if (g[0] == '*' && g[1] == '*' && (g == c->glob || g[-1] == '/') && (g[2] == '/' || g[2] == '\0')) {
                        if (g[2] == '\0')
                                return true;
                        /* "**" "/": none or more whole directories. */
                        for (const char *q = p;;) {
                                if (glob_match(c, g + 3, q, depth + 1))
                                        return true;
                                q = strchr(q, '/');
                                if (!q)
                                        return false;
                                q++;
                        }
                }

                if (*g == '*') {
                        while (*g == '*')
                                g++;
                        for (const char *q = p;; q++) {
                                if (glob_match(c, g, q, depth + 1))
                                        return true;
                                if (*q == '\0' || *q == '/')
                                        return false;
                        }
                }

                if (*p == '\0')
                        return false;

                if (*g == '?') {
                        if (*p == '/')
                                return false;
                        g++, p++;
                        continue;
                }

                if (*g == '[') {
                        const char *e = g;
                        int k = bracket_match(&e, *p, casefold);
                        if (k == 0)
                                return false;
                        if (k > 0) {
                                g = e;
                                p++;
                                continue;
                        }
                        /* Not closed: a literal '['. */
                }

                if (*g == '\\' && g[1])
                        g++;
                if (fold(*g, casefold) != fold(*p, casefold))
                        return false;
                g++, p++;
        }
}

bool path_glob_match_full(const char *glob, const char *path, bool casefold) {
        GlobContext c = { .glob = glob, .path = path, .casefold = casefold };
        size_t bits;
        bool m;

        if (!glob || !path)
                return false;

        c.path_len = strlen(path);
        bits = (strlen(glob) + 1) * (c.path_len + 1);
        /* Without memory for the memo the match is still right, only slower. */
        if (bits <= 64U * 1024U * 1024U)
                c.failed = calloc(bits / 8 + 1, 1);

        m = glob_match(&c, glob, path, 0);
        free(c.failed);
        return m;
}

bool path_glob_match(const char *glob, const char *path) {
        return path_glob_match_full(glob, path, false);
}

static const char *basename_of(const char *path) {
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

bool path_is_dependency_manifest(const BreakerConfig *c, const char *path) {
        if (!c || isempty(path))
                return false;

        for (char **g = c->manifest_names; g && *g; g++)
                if (path_glob_match(*g, strchr(*g, '/') ? path : basename_of(path)))
                        return true;
        return false;
}

bool path_is_test_file(const char *path) {
        /* Directories that hold tests (and their data), anywhere. */
        static const char *const dirs[] = {
                "test", "tests", "__tests__", "__test__", "spec", "specs", "testdata", "testsuite", "e2e",
        };
        /* File names of tests outside such directories: Python, Go, JS/TS
         * (jest, vitest, mocha), JVM, .NET, Ruby, PHP, Elixir, C/C++, Perl,
         * Dart, Swift. Case matters: "LatestTest.java" is a test,
         * "latest.py" is not. */
        static const char *const names[] = {
                "test_*.*", "*_test.*", "*_tests.*", "conftest.py", "test-*.*", "*.test.*", "*.spec.*", "*_spec.*",
                "*Test.*", "*Tests.*", "*Spec.*", "*_unittest.*", "*.t",
        };
        const char *p, *base;

        if (isempty(path))
                return false;

        base = basename_of(path);
        /* "t/" at the top is Perl's convention; elsewhere too short to tell. */
        if (strneq(path, "t/", 2))
                return true;

        p = path;
        while (p < base) {
                size_t l = strcspn(p, "/");
                for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                        if (strlen(dirs[i]) == l && strncasecmp(p, dirs[i], l) == 0)
                                return true;
                p += l + 1;
        }

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (path_glob_match(names[i], base))
                        return true;
        return false;
}

/* ---- Changes ---- */

static const char *change_verb(char status) {
        switch (status) {
        case 'A':
                return "added";
        case 'D':
                return "deleted";
        case 'R':
                return "renamed";
        default:
                return "changed";
        }
}

static const char *protected_match(const BreakerConfig *c, const char *path) {
        if (!path)
                return NULL;
        for (char **g = c->protected_globs; g && *g; g++)
                if (path_glob_match_full(*g, path, true))
                        return *g;
        return NULL;
}

int breakers_check_changes(const BreakerConfig *c, const BreakerChange *changes, size_t n, BreakerTrip *ret) {
        uint64_t added = 0, removed = 0;

        assert(c);
        assert(changes || n == 0);
        assert(ret);

        if (c->enabled[BREAKER_PROTECTED_PATH])
                for (size_t i = 0; i < n; i++) {
                        const BreakerChange *ch = changes + i;
                        const char *g;

                        if (!ch->path)
                                continue;

                        if ((g = protected_match(c, ch->path)))
                                return trip(ret, BREAKER_PROTECTED_PATH, "protected path %s: %s (matches %s)",
                                            change_verb(ch->status), ch->path, g);
                        if (ch->status == 'R' && (g = protected_match(c, ch->old_path)))
                                return trip(ret, BREAKER_PROTECTED_PATH, "protected path renamed: %s -> %s (matches %s)",
                                            ch->old_path, ch->path, g);
                }

        if (c->enabled[BREAKER_TESTS_DELETED])
                for (size_t i = 0; i < n; i++) {
                        const BreakerChange *ch = changes + i;

                        if (!ch->path)
                                continue;

                        if (ch->status == 'D' && path_is_test_file(ch->path))
                                return trip(ret, BREAKER_TESTS_DELETED, "test file deleted: %s", ch->path);
                        if (ch->status == 'R' && ch->old_path && path_is_test_file(ch->old_path) &&
                            !path_is_test_file(ch->path))
                                return trip(ret, BREAKER_TESTS_DELETED, "test file renamed into a non-test name: %s -> %s",
                                            ch->old_path, ch->path);
                }

        if (c->enabled[BREAKER_DEPENDENCY_MANIFEST])
                for (size_t i = 0; i < n; i++) {
                        const BreakerChange *ch = changes + i;

                        if (!ch->path)
                                continue;

                        if (path_is_dependency_manifest(c, ch->path) ||
                            (ch->status == 'R' && ch->old_path && path_is_dependency_manifest(c, ch->old_path)))
                                return trip(ret, BREAKER_DEPENDENCY_MANIFEST, "dependency manifest %s: %s",
                                            change_verb(ch->status), ch->path);
                }

        if (c->enabled[BREAKER_FILES_CHANGED] && c->max_files_changed > 0 && n > c->max_files_changed)
                return trip(ret, BREAKER_FILES_CHANGED, "%zu files changed, more than the limit of %u",
                            n, c->max_files_changed);

        for (size_t i = 0; i < n; i++) {
                added += changes[i].added;
                removed += changes[i].removed;
        }
        if (c->enabled[BREAKER_LINES_CHANGED] && c->max_lines_changed > 0 && added + removed > c->max_lines_changed)
                return trip(ret, BREAKER_LINES_CHANGED, "%" PRIu64 " lines changed (+%" PRIu64 " -%" PRIu64 "), "
                            "more than the limit of %u", added + removed, added, removed, c->max_lines_changed);

        *ret = (BreakerTrip) { .breaker = _BREAKER_INVALID };
        return 0;
}

/* ---- Test runs ---- */

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv_byte(uint64_t h, unsigned char c) {
        return (h ^ c) * FNV_PRIME;
}

static uint64_t fnv_int(uint64_t h, int v) {
        for (unsigned i = 0; i < sizeof(v); i++)
                h = fnv_byte(h, (unsigned char) ((unsigned) v >> (8 * i)));
        return h;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_hex(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Hashes a line with what changes between runs of the same failure folded:
 * digit runs and 0x... numbers (timings, line numbers of the runner,
 * addresses, PIDs), /tmp/... names, runs of white space. */
static uint64_t hash_folded(uint64_t h, const char *s, size_t l) {
        for (size_t i = 0; i < l;) {
                if (s[i] == '0' && i + 1 < l && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
                        i += 2;
                        while (i < l && is_hex(s[i]))
                                i++;
                        h = fnv_byte(h, '#');
                } else if (is_digit(s[i])) {
                        while (i < l && is_digit(s[i]))
                                i++;
                        h = fnv_byte(h, '#');
                } else if (l - i >= 5 && strneq(s + i, "/tmp/", 5)) {
                        while (i < l && !strchr(" \t'\":)", s[i]))
                                i++;
                        h = fnv_byte(h, '@');
                } else if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
                        while (i < l && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
                                i++;
                        h = fnv_byte(h, ' ');
                } else
                        h = fnv_byte(h, (unsigned char) s[i++]);
        }
        return fnv_byte(h, '\n');
}

static bool line_is_failure(const char *s) {
        static const char *const markers[] = {
                "FAIL", "Error", "ERROR", "error:", "assert", "Assert", "not ok", "panic", "Traceback",
                "Exception", "expected", "Expected",
        };

        for (size_t i = 0; i < ELEMENTSOF(markers); i++)
                if (strstr(s, markers[i]))
                        return true;
        return false;
}

/* Parses a number at s (clamped), returns its end. */
static const char *parse_count(const char *s, int *ret) {
        long v = 0;

        while (is_digit(*s)) {
                if (v < INT_MAX / 20)
                        v = v * 10 + (*s - '0');
                s++;
        }
        *ret = (int) v;
        return s;
}

/* The value after "key=" somewhere in s, or 0. */
static int keyed_count(const char *s, const char *key) {
        const char *p = strstr(s, key);
        int v = 0;

        if (p && is_digit(p[strlen(key)]))
                (void) parse_count(p + strlen(key), &v);
        return v;
}

/* Copies a line without ANSI escape sequences (colored runner output). */
static void line_strip(const char *s, size_t l, char *buf, size_t size) {
        size_t n = 0;

        for (size_t i = 0; i < l && n + 1 < size; i++) {
                if (s[i] == '\x1b') {
                        if (i + 1 < l && s[i + 1] == '[') {
                                i += 2;
                                while (i < l && !(s[i] >= '@' && s[i] <= '~'))
                                        i++;
                        }
                        continue;
                }
                if (s[i] == '\r')
                        continue;
                buf[n++] = s[i];
        }
        buf[n] = '\0';
}

typedef enum SummaryKind {
        SUMMARY_NONE,
        SUMMARY_LINE,   /* one line with everything */
        SUMMARY_TAP,    /* "# pass N", "# fail N" */
        SUMMARY_MESON,  /* "Ok: N", "Fail: N", "Timeout: N", "Unexpected Pass: N" */
        SUMMARY_GTEST,  /* "[  PASSED  ] N tests.", "[  FAILED  ] N tests" */
        SUMMARY_MOCHA,  /* "N passing", "N failing" */
} SummaryKind;

typedef struct Summary {
        SummaryKind kind;
        int passed, failed;
} Summary;

static void summary_part(Summary *s, SummaryKind kind, int passed, int failed) {
        if (s->kind != kind)
                *s = (Summary) { .kind = kind, .passed = -1, .failed = -1 };
        if (passed >= 0)
                s->passed = passed;
        if (failed >= 0)
                s->failed = MAX(s->failed, 0) + failed;
}

/* Counts "<number> <word>" pairs of a summary line. Returns true if the line
 * looks like a test summary. Mocha's split lines come back as parts. */
static bool parse_counts_line(const char *s, Summary *sum) {
        int passed = -1, failed = -1, total = -1, skipped = 0, passing = -1, failing = -1;
        for (const char *p = s; *p;) {
                int v;

                if (!is_digit(*p) || (p > s && (is_alpha(p[-1]) || is_digit(p[-1]) || p[-1] == '_' || p[-1] == '.'))) {
                        p++;
                        continue;
                }
                p = parse_count(p, &v);
                if (*p != ' ')
                        continue;
                while (*p == ' ')
                        p++;

                const char *w = p;
                while (is_alpha(*p))
                        p++;
                size_t l = (size_t) (p - w);
                if (l == 0 || is_digit(*p))
                        continue;

#define WORD(x) (l == strlen(x) && strncasecmp(w, x, l) == 0)
                if (WORD("passed"))
                        passed = MAX(passed, 0) + v;
                else if (WORD("passing"))
                        passing = v;
                else if (WORD("failed") || WORD("failures") || WORD("failure") || WORD("errors") || WORD("error"))
                        failed = MAX(failed, 0) + v;
                else if (WORD("failing"))
                        failing = v;
                else if (WORD("tests") || WORD("test") || WORD("examples") || WORD("example") || WORD("runs") ||
                         WORD("total"))
                        total = total < 0 ? v : total;
                else if (WORD("skipped") || WORD("skips") || WORD("skip") || WORD("pending") || WORD("pendings") ||
                         WORD("omissions") || WORD("xfailed") || WORD("ignored") || WORD("todo"))
                        skipped += v;
#undef WORD
        }

        if (passing >= 0 || failing >= 0) {
                summary_part(sum, SUMMARY_MOCHA, passing, failing);
                return true;
        }
        if (passed < 0 && failed < 0)
                return false;
        /* "failed" alone ("1 error generated") says nothing about tests,
         * unless a total came with it ("10 examples, 2 failures"). */
        if (passed < 0 && total < 0)
                return false;
        if (passed < 0)
                passed = MAX(total - MAX(failed, 0) - skipped, 0);

        *sum = (Summary) { .kind = SUMMARY_LINE, .passed = passed, .failed = MAX(failed, 0) };
        return true;
}

/* "Key:   N" at the start of a line. */
static bool line_key_count(const char *s, const char *key, int *ret) {
        size_t l = strlen(key);

        if (!strneq(s, key, l))
                return false;
        s += l;
        while (*s == ' ' || *s == '\t')
                s++;
        if (!is_digit(*s))
                return false;
        s = parse_count(s, ret);
        return *s == '\0' || *s == ' ' || *s == '\t';
}

int test_run_parse(int exit_code, const char *output, TestRun *ret) {
        Summary sum = { .kind = SUMMARY_NONE, .passed = -1, .failed = -1 };
        int cargo_passed = 0, cargo_failed = 0, go_pass = 0, go_fail = 0, go_ok_pkgs = 0, go_fail_pkgs = 0;
        int tap_ok = 0, tap_not_ok = 0, unittest_ran = -1;
        bool cargo = false;
        uint64_t h_fail = FNV_OFFSET, h_all = FNV_OFFSET;
        bool any_failure_line = false;
        char line[4096];

        if (!ret)
                return -EINVAL;

        output = strempty(output);
        for (const char *p = output; *p;) {
                size_t l = strcspn(p, "\n");
                int v;

                line_strip(p, l, line, sizeof(line));
                p += l + (p[l] == '\n');

                h_all = hash_folded(h_all, line, strlen(line));
                if (line_is_failure(line)) {
                        h_fail = hash_folded(h_fail, line, strlen(line));
                        any_failure_line = true;
                }

                /* Raw lines first: TAP, go test. */
                if (strneq(line, "not ok", 6) && (line[6] == '\0' || line[6] == ' ')) {
                        tap_not_ok++;
                        continue;
                }
                if (strneq(line, "ok", 2) && (line[2] == '\0' || line[2] == ' ' || line[2] == '\t')) {
                        const char *q = line + 2;
                        q += strspn(q, " \t");
                        if (*q == '\0' || is_digit(*q) || *q == '-')
                                tap_ok++;
                        else if (strchr(line, '\t'))
                                go_ok_pkgs++;
                        continue;
                }
                if (strneq(line, "FAIL\t", 5)) {
                        go_fail_pkgs++;
                        continue;
                }
                if (strneq(line, "--- PASS:", 9)) {
                        go_pass++;
                        continue;
                }
                if (strneq(line, "--- FAIL:", 9)) {
                        go_fail++;
                        continue;
                }

                const char *s = line + strspn(line, " \t");

                /* cargo: one line per test binary, summed. */
                if (strneq(s, "test result:", 12)) {
                        Summary c = {};
                        if (parse_counts_line(s, &c) && c.kind == SUMMARY_LINE) {
                                cargo_passed += c.passed;
                                cargo_failed += c.failed;
                                cargo = true;
                        }
                        continue;
                }

                /* unittest: "Ran N tests in 0.1s", then "OK" or "FAILED (...)". */
                if (strneq(s, "Ran ", 4) && is_digit(s[4])) {
                        (void) parse_count(s + 4, &unittest_ran);
                        continue;
                }
                if (unittest_ran >= 0 && (streq(s, "OK") || strneq(s, "OK (", 4))) {
                        int skipped = keyed_count(s, "skipped=") + keyed_count(s, "expected failures=");
                        sum = (Summary) { SUMMARY_LINE, MAX(unittest_ran - skipped, 0), 0 };
                        unittest_ran = -1;
                        continue;
                }
                if (unittest_ran >= 0 && strneq(s, "FAILED (", 8)) {
                        int f = keyed_count(s, "failures=") + keyed_count(s, "errors=");
                        int skipped = keyed_count(s, "skipped=") + keyed_count(s, "expected failures=");
                        sum = (Summary) { SUMMARY_LINE, MAX(unittest_ran - f - skipped, 0), f };
                        unittest_ran = -1;
                        continue;
                }

                /* TAP producers' summary comments. */
                if (line_key_count(s, "# pass", &v)) {
                        summary_part(&sum, SUMMARY_TAP, v, -1);
                        continue;
                }
                if (line_key_count(s, "# fail", &v)) {
                        summary_part(&sum, SUMMARY_TAP, -1, v);
                        continue;
                }

                /* meson test. */
                if (line_key_count(s, "Ok:", &v)) {
                        summary_part(&sum, SUMMARY_MESON, v, -1);
                        continue;
                }
                if (sum.kind == SUMMARY_MESON &&
                    (line_key_count(s, "Fail:", &v) || line_key_count(s, "Timeout:", &v) ||
                     line_key_count(s, "Unexpected Pass:", &v))) {
                        summary_part(&sum, SUMMARY_MESON, -1, v);
                        continue;
                }

                /* googletest. */
                if (strneq(s, "[  PASSED  ] ", 13) && is_digit(s[13])) {
                        (void) parse_count(s + 13, &v);
                        summary_part(&sum, SUMMARY_GTEST, v, -1);
                        continue;
                }
                if (strneq(s, "[  FAILED  ] ", 13) && is_digit(s[13])) {
                        const char *e = parse_count(s + 13, &v);
                        if (strneq(e, " test", 5))
                                summary_part(&sum, SUMMARY_GTEST, -1, v);
                        continue;
                }

                /* ctest: "95% tests passed, 1 tests failed out of 20". */
                const char *q = strstr(s, "tests failed out of ");
                if (q && strstr(s, "tests passed")) {
                        int total, f = 0;
                        const char *b = q;
                        while (b > s && b[-1] == ' ')
                                b--;
                        while (b > s && is_digit(b[-1]))
                                b--;
                        (void) parse_count(b, &f);
                        (void) parse_count(q + strlen("tests failed out of "), &total);
                        sum = (Summary) { SUMMARY_LINE, MAX(total - f, 0), f };
                        continue;
                }

                /* Lines that count something else than tests. */
                if (strneq(s, "Test Suites:", 12) || strneq(s, "assertions:", 11) || strneq(s, "Snapshots:", 10))
                        continue;

                (void) parse_counts_line(s, &sum);
        }

        TestRun t = { .exit_code = exit_code, .n_passed = -1, .n_failed = -1 };
        if (cargo) {
                t.n_passed = cargo_passed;
                t.n_failed = cargo_failed;
        } else if (sum.kind != SUMMARY_NONE) {
                t.n_passed = sum.passed;
                t.n_failed = sum.failed;
                /* Split formats print the failure line only when something failed. */
                if (t.n_passed >= 0 && t.n_failed < 0)
                        t.n_failed = 0;
        } else if (go_pass + go_fail > 0) {
                t.n_passed = go_pass;
                t.n_failed = go_fail;
        } else if (tap_ok + tap_not_ok > 0) {
                t.n_passed = tap_ok;
                t.n_failed = tap_not_ok;
        } else if (go_ok_pkgs + go_fail_pkgs > 0) {
                t.n_passed = go_ok_pkgs;
                t.n_failed = go_fail_pkgs;
        }
        t.passed = exit_code == 0 && t.n_failed <= 0;

        uint64_t h = fnv_int(FNV_OFFSET, exit_code);
        h = fnv_int(h, t.n_failed);
        h ^= any_failure_line ? h_fail : h_all;
        t.signature = h * FNV_PRIME;

        *ret = t;
        return 0;
}

int breakers_check_tests(const BreakerConfig *c, const TestRun *history, size_t n, const TestRun *baseline, BreakerTrip *ret) {
        assert(c);
        assert(history || n == 0);
        assert(ret);

        *ret = (BreakerTrip) { .breaker = _BREAKER_INVALID };
        if (n == 0)
                return 0;

        const TestRun *last = history + n - 1;

        if (c->enabled[BREAKER_TESTS_FAILING] && c->max_consecutive_test_failures > 0 && !last->passed) {
                size_t k = 0;
                for (size_t i = n; i > 0; i--) {
                        const TestRun *t = history + i - 1;
                        if (t->passed || t->signature != last->signature)
                                break;
                        k++;
                }
                if (k >= c->max_consecutive_test_failures) {
                        if (last->n_failed >= 0)
                                return trip(ret, BREAKER_TESTS_FAILING, "tests failed %zu times in a row with the same "
                                            "failure (exit code %d, %d failing)", k, last->exit_code, last->n_failed);
                        return trip(ret, BREAKER_TESTS_FAILING, "tests failed %zu times in a row with the same "
                                    "failure (exit code %d)", k, last->exit_code);
                }
        }

        if (c->enabled[BREAKER_TESTS_REGRESSED] && baseline && baseline->n_passed >= 0 &&
            last->passed && last->n_passed >= 0 && last->n_passed < baseline->n_passed)
                return trip(ret, BREAKER_TESTS_REGRESSED, "tests passing dropped from %d at the start to %d",
                            baseline->n_passed, last->n_passed);

        return 0;
}

/* ---- Network ---- */

static bool command_fetches(const char *command) {
        static const char *const fetchers[] = {
                "pip", "pip3", "pipx", "uv", "poetry", "pipenv", "conda", "mamba", "npm", "npx", "yarn", "pnpm",
                "bun", "deno", "cargo", "rustup", "go", "gem", "bundle", "bundler", "mvn", "mvnw", "gradle",
                "gradlew", "sbt", "composer", "dotnet", "nuget", "apt", "apt-get", "apk", "dnf", "yum", "brew",
                "curl", "wget", "git", "docker", "podman", "swift", "pub", "flutter", "mix", "cabal", "stack",
        };

        if (!command)
                return false;

        for (const char *p = command; *p;) {
                p += strspn(p, " \t\n;|&()`'\"=");
                size_t l = strcspn(p, " \t\n;|&()`'\"=");
                if (l == 0)
                        break;
                /* The basename of the word: "/usr/bin/pip3", "./gradlew". */
                const char *w = p;
                for (const char *s = p; s < p + l; s++)
                        if (*s == '/')
                                w = s + 1;
                size_t wl = (size_t) (p + l - w);
                for (size_t i = 0; i < ELEMENTSOF(fetchers); i++)
                        if (wl == strlen(fetchers[i]) && strneq(w, fetchers[i], wl))
                                return true;
                p += l;
        }
        return false;
}

bool command_output_needs_network(const char *command, const char *output) {
        /* Said only when a name or network could not be reached. */
        static const char *const strong[] = {
                "could not resolve host", "couldn't resolve host", "could not resolve hostname",
                "temporary failure in name resolution", "temporary failure resolving", "name or service not known",
                "nodename nor servname", "no address associated with hostname", "network is unreachable",
                "no route to host", "getaddrinfo", "eai_again", "enotfound", "enetunreach", "ehostunreach",
                "failed to establish a new connection", "newconnectionerror", "max retries exceeded with url",
                "(from versions: none)", "unable to resolve host", "unknownhostexception",
                "could not transfer artifact", "dial tcp: lookup", "spurious network error",
                "failed to download from", "unable to access 'http",
                "network request to", "err_socket_timeout", "connecttimeouterror", "readtimeouterror",
        };
        /* Said by local services too: only with a remote peer in sight. */
        static const char *const weak[] = {
                "connection refused", "econnrefused", "connection timed out", "etimedout", "i/o timeout",
                "connection reset", "econnreset", "operation timed out", "tls handshake timeout",
                "failed to connect to",
        };
        static const char *const loopback[] = {
                "localhost", "127.0.0.1", "127.0.", "[::1]", "::1", "0.0.0.0", "/run/", "/var/run/", "unix:",
        };
        static const char *const remote[] = {
                "http://", "https://", "dial tcp", "tcp://", "git@", "ssh://", "registry", "proxy",
        };
        bool fetches = command_fetches(command);
        char line[4096];

        if (!output)
                return false;

        for (const char *p = output; *p;) {
                size_t l = strcspn(p, "\n");
                line_strip(p, l, line, sizeof(line));
                p += l + (p[l] == '\n');

                for (size_t i = 0; i < ELEMENTSOF(strong); i++)
                        if (strcasestr(line, strong[i]))
                                return true;

                bool w = false;
                for (size_t i = 0; !w && i < ELEMENTSOF(weak); i++)
                        w = strcasestr(line, weak[i]);
                if (!w)
                        continue;

                bool local = false;
                for (size_t i = 0; !local && i < ELEMENTSOF(loopback); i++)
                        local = strcasestr(line, loopback[i]);
                if (local)
                        continue;

                bool far = fetches;
                for (size_t i = 0; !far && i < ELEMENTSOF(remote); i++)
                        far = strcasestr(line, remote[i]);
                if (far)
                        return true;
        }
        return false;
}

int breakers_check_network(const BreakerConfig *c, const char *command, int exit_code, const char *output, BreakerTrip *ret) {
        assert(c);
        assert(ret);

        *ret = (BreakerTrip) { .breaker = _BREAKER_INVALID };
        if (!c->enabled[BREAKER_NETWORK] || exit_code == 0 || !command_output_needs_network(command, output))
                return 0;

        _cleanup_free_ char *shown = strshorten_line(strempty(command), 120);
        if (!shown)
                return -ENOMEM;
        return trip(ret, BREAKER_NETWORK, "command '%s' failed (exit code %d) and its output says it needs the "
                    "network, which the sandbox does not have", shown, exit_code);
}

int breakers_check_malformed(const BreakerConfig *c, unsigned n_malformed, BreakerTrip *ret) {
        assert(c);
        assert(ret);

        *ret = (BreakerTrip) { .breaker = _BREAKER_INVALID };
        if (!c->enabled[BREAKER_MALFORMED_OUTPUT] || c->max_malformed == 0 || n_malformed < c->max_malformed)
                return 0;
        return trip(ret, BREAKER_MALFORMED_OUTPUT, "the model sent %u malformed replies in a row", n_malformed);
}
