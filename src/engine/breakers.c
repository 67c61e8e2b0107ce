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
#include "string-table.h"
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
        [BREAKER_BINARY_FILE] = "binary-file",
        [BREAKER_GAVE_UP] = "gave-up",
        [BREAKER_STUCK] = "stuck",
};

DEFINE_STRING_TABLE_LOOKUP(breaker, Breaker);

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
                /* Three times the same answer to the same question is a
                 * pattern worth a word to the model; five, a loop. */
                .warn_repeated_calls = BREAKER_WARN_REPEATED_CALLS,
                .max_repeated_calls = BREAKER_MAX_REPEATED_CALLS,
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
                strip_ansi_line(p, l, line, sizeof(line));
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

/* ---- Giving up, and going round in circles ---- */

int breakers_check_gave_up(const BreakerConfig *c, const char *reason, BreakerTrip *ret) {
        _cleanup_free_ char *why = NULL;

        assert(c);
        assert(ret);

        *ret = (BreakerTrip) { .breaker = _BREAKER_INVALID };
        if (!c->enabled[BREAKER_GAVE_UP])
                return 0;
        /* The summary may be many lines: one, for the Reason property and
         * the journal, at most 1000 bytes (trip() blanks the rest). */
        why = strndup(strempty(reason), 1000);
        if (!why)
                return -ENOMEM;
        for (char *p = why; *p; p++)
                if (*p == '\n' || *p == '\r' || *p == '\t')
                        *p = ' ';
        return trip(ret, BREAKER_GAVE_UP, "the agent gave up: %s", isempty(why) ? "(no reason given)" : why);
}

uint64_t tool_call_signature(const char *name, const char *arguments, const char *result) {
        uint64_t h = TEST_RUN_HASH_INIT;

        /* Name and arguments exactly (another line or path is another
         * call), the result folded. */
        for (const char *p = strempty(name); *p; p++)
                h = (h ^ (unsigned char) *p) * UINT64_C(0x100000001b3);
        h = (h ^ 0xff) * UINT64_C(0x100000001b3);
        for (const char *p = strempty(arguments); *p; p++)
                h = (h ^ (unsigned char) *p) * UINT64_C(0x100000001b3);
        h = (h ^ 0xfe) * UINT64_C(0x100000001b3);
        return test_run_fold_hash(h, strempty(result), strlen(strempty(result)));
}

unsigned tool_call_repeats(const uint64_t *recent, size_t n, uint64_t sig) {
        unsigned k = 0;

        for (size_t i = 0; i < n; i++)
                if (recent[i] == sig)
                        k++;
        return k;
}

int breakers_check_stuck(const BreakerConfig *c, unsigned repeats, const char *call, BreakerTrip *ret) {
        assert(c);
        assert(ret);

        *ret = (BreakerTrip) { .breaker = _BREAKER_INVALID };
        if (!c->enabled[BREAKER_STUCK] || c->max_repeated_calls == 0 || repeats < c->max_repeated_calls)
                return 0;

        _cleanup_free_ char *shown = strshorten_line(strempty(call), 160);
        if (!shown)
                return -ENOMEM;
        return trip(ret, BREAKER_STUCK, "the model made the same call with the same result %u times: %s", repeats, shown);
}
