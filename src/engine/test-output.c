/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "macro.h"
#include "string-table.h"
#include "string-util.h"
#include "test-output.h"

/* The runners' output formats, as their documentation and their real
 * output show them (tests/unit/test-output/ holds recorded examples). One
 * pass reads every runner's marks at once; the runner whose summary comes
 * last wins (meson's summary follows the pytest output it printed for a
 * failing test), else the one with the most marks. */

static const char *const test_runner_table[_TEST_RUNNER_MAX] = {
        [TEST_RUNNER_PYTEST] = "pytest",
        [TEST_RUNNER_UNITTEST] = "unittest",
        [TEST_RUNNER_GO] = "go test",
        [TEST_RUNNER_CARGO] = "cargo test",
        [TEST_RUNNER_TAP] = "TAP",
        [TEST_RUNNER_MESON] = "meson test",
        [TEST_RUNNER_CTEST] = "ctest",
};

DEFINE_STRING_TABLE_LOOKUP(test_runner, TestRunner);

#define LINE_MAX_READ 4096u
#define TAP_DEPTH_MAX 16u
#define GO_RUNS_KEPT 64u

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_space(char c) {
        return c == ' ' || c == '\t';
}

static bool startswith(const char *s, const char *prefix) {
        return strneq(s, prefix, strlen(prefix));
}

static bool endswith(const char *s, const char *suffix) {
        size_t l = strlen(s), k = strlen(suffix);
        return l >= k && streq(s + l - k, suffix);
}

/* A number at *p (clamped), moving *p past it; false if there is none. */
static bool read_number(const char **p, int *ret) {
        long v = 0;

        if (!is_digit(**p))
                return false;
        while (is_digit(**p)) {
                if (v < INT_MAX / 20)
                        v = v * 10 + (**p - '0');
                (*p)++;
        }
        *ret = (int) v;
        return true;
}

void test_output_clean_line(const char *s, size_t l, char *buf, size_t size) {
        size_t n = 0;

        assert(size > 0);
        for (size_t i = 0; i < l && n + 1 < size; i++) {
                if (s[i] == '\0')
                        continue;
                if (s[i] == '\x1b') {
                        if (i + 1 < l && s[i + 1] == '[') {
                                i += 2;
                                while (i < l && !(s[i] >= '@' && s[i] <= '~'))
                                        i++;
                        }
                        continue;
                }
                /* The same, as exec_output_escape() writes it. */
                if (s[i] == '\\' && l - i >= 4 && strneq(s + i, "\\x1b", 4)) {
                        i += 3;
                        if (i + 1 < l && s[i + 1] == '[') {
                                i += 2;
                                while (i < l && !(s[i] >= '@' && s[i] <= '~'))
                                        i++;
                        }
                        continue;
                }
                if (s[i] == '\\' && l - i >= 4 && strneq(s + i, "\\x0d", 4)) {
                        i += 3;
                        continue;
                }
                if (s[i] == '\r')
                        continue;
                buf[n++] = s[i];
        }
        buf[n] = '\0';
}

/* Iterates over the lines of text[0..size): *off is where the next line
 * begins; the line's bytes go to *ret_start and *ret_len (without '\n'). */
static bool next_line(const char *text, size_t size, size_t *off, const char **ret_start, size_t *ret_len) {
        const char *s, *nl;
        size_t l;

        if (*off >= size)
                return false;
        s = text + *off;
        nl = memchr(s, '\n', size - *off);
        l = nl ? (size_t) (nl - s) : size - *off;
        *off += l + (nl ? 1 : 0);
        *ret_start = s;
        *ret_len = l;
        return true;
}

/* ---- Names ---- */

typedef struct Names {
        char **v;
        size_t n;
        size_t reports;
        bool truncated;
} Names;

static void names_done(Names *n) {
        strv_free(n->v);
        *n = (Names) {};
}

/* A name as the state file and the model get it: one line of valid UTF-8,
 * trimmed, bounded. *ret is NULL if nothing is left. */
static int name_clean(const char *s, size_t l, char **ret) {
        char *c;
        size_t n;

        *ret = NULL;
        while (l > 0 && is_space(*s))
                s++, l--;
        while (l > 0 && is_space(s[l - 1]))
                l--;
        if (l == 0)
                return 0;
        c = strndup(s, MIN(l, (size_t) TEST_NAME_MAX));
        if (!c)
                return -ENOMEM;
        n = strlen(c);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) c[i] < ' ' || c[i] == 127)
                        c[i] = ' ';
        utf8_sanitize(c, n);
        /* Cut inside a character: drop the pieces ('?' once sanitized). */
        if (l > n)
                while (n > 0 && c[n - 1] == '?' && (unsigned char) s[n - 1] >= 0x80)
                        c[--n] = '\0';
        while (n > 0 && c[n - 1] == ' ')
                c[--n] = '\0';
        if (n == 0) {
                free(c);
                return 0;
        }
        *ret = c;
        return 0;
}

static ssize_t names_find(const Names *n, const char *s) {
        for (size_t i = 0; i < n->n; i++)
                if (streq(n->v[i], s))
                        return (ssize_t) i;
        return -1;
}

/* Adds a failure report of the test named s[0..l); a report of a name
 * known already counts, and is not listed twice. */
static int names_add(Names *n, const char *s, size_t l) {
        _cleanup_free_ char *c = NULL;
        char **t;

        if (name_clean(s, l, &c) < 0)
                return -ENOMEM;
        if (!c)
                return 0;
        n->reports++;
        if (names_find(n, c) >= 0)
                return 0;
        if (n->n >= TEST_NAMES_MAX) {
                n->truncated = true;
                return 0;
        }
        t = realloc(n->v, sizeof(char *) * (n->n + 2));
        if (!t)
                return -ENOMEM;
        n->v = t;
        n->v[n->n++] = TAKE_PTR(c);
        n->v[n->n] = NULL;
        return 0;
}

static void names_remove(Names *n, size_t i) {
        free(n->v[i]);
        memmove(n->v + i, n->v + i + 1, sizeof(char *) * (n->n - i));
        n->n--;
}

/* ---- The runners' marks ---- */

typedef struct RunnerState {
        size_t summary;             /* line number (from 1) of the last summary line; 0: none */
        unsigned marks;
        int skipped;                /* -1: not said */
        Names names;
} RunnerState;

typedef struct Parser {
        RunnerState r[_TEST_RUNNER_MAX];
        size_t lineno;
        int oom;

        /* pytest */
        Names pytest_headers;       /* "____ name ____" of FAILURES/ERRORS, when no short summary names them */
        bool pytest_in_failures;

        /* unittest */
        bool unittest_ran;

        /* go */
        bool go_verbose;
        int go_skipped;

        /* TAP: the failures reported at each depth since the last result
         * one level up, to name a failed parent by its failed children. */
        size_t tap_pending[TAP_DEPTH_MAX][8];
        unsigned tap_n_pending[TAP_DEPTH_MAX];
        bool tap_pending_more[TAP_DEPTH_MAX];
        int tap_skipped_said, tap_todo_said, tap_skip_lines;
        bool tap_spec_failing;      /* node's spec reporter: in "✖ failing tests:" */

        /* meson */
        bool meson_in_summary;      /* "Summary of Failures:" repeats the failures */

        /* ctest */
        int ctest_skipped;
} Parser;

static void parser_add(Parser *p, TestRunner r, const char *s, size_t l) {
        int k = names_add(&p->r[r].names, s, l);
        if (k < 0)
                p->oom = k;
}

/* "3 failed, 2 passed, 1 skipped, 1 error in 0.03s", with or without the
 * "=" around it, "no tests ran in 0.01s". Sets *skipped. */
static bool pytest_summary(const char *line, int *skipped) {
        static const char *const words[] = {
                "passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed", "deselected", "warning",
                "warnings", "rerun", "reruns",
        };
        const char *s = line, *e;
        int sk = 0;
        bool any = false;

        while (*s == '=' || *s == ' ')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == '=' || e[-1] == ' '))
                e--;
        if (startswith(s, "no tests ran in "))
                s += strlen("no tests ran"), any = true;
        else
                for (;;) {
                        int v;
                        size_t i;
                        if (!read_number(&s, &v) || *s != ' ')
                                return false;
                        s++;
                        for (i = 0; i < ELEMENTSOF(words); i++) {
                                size_t k = strlen(words[i]);
                                if (strneq(s, words[i], k) && (s[k] == ',' || s[k] == ' ')) {
                                        s += k;
                                        break;
                                }
                        }
                        if (i == ELEMENTSOF(words))
                                return false;
                        if (startswith(words[i], "skipped") || streq(words[i], "xfailed"))
                                sk += v;
                        any = true;
                        if (*s != ',')
                                break;
                        s += 2;
                }
        /* " in 0.03s" or " in 61.20s (0:01:01)" */
        if (!any || !startswith(s, " in "))
                return false;
        s += 4;
        if (!is_digit(*s))
                return false;
        while (s < e && (is_digit(*s) || *s == '.'))
                s++;
        if (s >= e || *s != 's')
                return false;
        s++;
        if (s < e && !startswith(s, " ("))
                return false;
        *skipped = sk;
        return true;
}

static void parse_pytest(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_PYTEST];
        int sk;

        if (line[0] == '=' && strstr(line, "test session starts"))
                st->marks++;
        if (line[0] == '=' && (strstr(line, " FAILURES ") || strstr(line, " ERRORS "))) {
                p->pytest_in_failures = true;
                st->marks++;
                return;
        }
        if (line[0] == '=' && strstr(line, "short test summary info")) {
                p->pytest_in_failures = false;
                st->marks++;
                return;
        }
        if (line[0] == '=')
                p->pytest_in_failures = false;
        if (pytest_summary(line, &sk)) {
                st->summary = p->lineno;
                st->skipped = sk;
                return;
        }

        /* The short summary: "FAILED nodeid - message", "ERROR nodeid". */
        if (startswith(line, "FAILED ") || startswith(line, "ERROR ")) {
                const char *n = line + strcspn(line, " ") + 1, *e = strstr(n, " - ");
                /* Not unittest's "FAILED (failures=1)". */
                if (*n && !is_space(*n) && *n != '(') {
                        parser_add(p, TEST_RUNNER_PYTEST, n, e ? (size_t) (e - n) : strlen(n));
                        st->marks++;
                }
                return;
        }
        /* -v: "test_calc.py::test_add FAILED   [ 14%]" */
        const char *f = strstr(line, " FAILED");
        if (!f)
                f = strstr(line, " ERROR");
        if (f && f > line && !is_space(line[0]) && memmem(line, (size_t) (f - line), "::", 2) &&
            !memchr(line, ' ', (size_t) (f - line))) {
                parser_add(p, TEST_RUNNER_PYTEST, line, (size_t) (f - line));
                return;
        }
        /* "____ TestThings.test_dict ____": names when there is no short summary. */
        if (p->pytest_in_failures && startswith(line, "___") && endswith(line, "___")) {
                const char *s = line + strspn(line, "_ "), *e = line + strlen(line);
                while (e > s && (e[-1] == '_' || e[-1] == ' '))
                        e--;
                static const char *const prefixes[] = { "ERROR at setup of ", "ERROR at teardown of ",
                                                        "ERROR collecting " };
                for (size_t i = 0; i < ELEMENTSOF(prefixes); i++)
                        if (startswith(s, prefixes[i]))
                                s += strlen(prefixes[i]);
                if (e > s && names_add(&p->pytest_headers, s, (size_t) (e - s)) < 0)
                        p->oom = -ENOMEM;
        }
}

/* "FAIL: test_add (test_calc.T.test_add)", "ERROR: test_add (test_calc.T)"
 * (before Python 3.11), "FAIL: test_sub (test_calc.U.test_sub) (i=1)". */
static void parse_unittest(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_UNITTEST];
        const char *s;
        int v;

        if (startswith(line, "Ran ") && is_digit(line[4]) && strstr(line, " test")) {
                p->unittest_ran = true;
                st->marks++;
                return;
        }
        if (p->unittest_ran && (streq(line, "OK") || startswith(line, "OK (") || startswith(line, "FAILED ("))) {
                const char *k;
                int sk = 0;
                st->summary = p->lineno;
                if ((k = strstr(line, "skipped=")) && (k += 8, read_number(&k, &v)))
                        sk += v;
                if ((k = strstr(line, "expected failures=")) && (k += 18, read_number(&k, &v)))
                        sk += v;
                st->skipped = sk;
                p->unittest_ran = false;
                return;
        }

        if (startswith(line, "FAIL: "))
                s = line + 6;
        else if (startswith(line, "ERROR: "))
                s = line + 7;
        else if (startswith(line, "UNEXPECTED SUCCESS: "))
                s = line + 20;
        else
                return;

        /* Always with the test's id in parentheses: "ERROR: Could not ..."
         * of another tool is not a test. */
        const char *open = strstr(s, " ("), *close = open ? strchr(open, ')') : NULL;
        if (!open || !close || open == s)
                return;
        st->marks++;
        size_t ml = (size_t) (open - s), pl = (size_t) (close - open - 2);
        const char *paren = open + 2;
        char name[2 * LINE_MAX_READ];

        if (pl > ml && paren[pl - ml - 1] == '.' && strneq(paren + pl - ml, s, ml))
                snprintf(name, sizeof(name), "%.*s", (int) pl, paren);          /* 3.11: the id itself */
        else if (startswith(paren, "unittest.loader._FailedTest") || startswith(paren, "unittest.loader.ModuleImportFailure"))
                snprintf(name, sizeof(name), "%.*s", (int) ml, s);               /* a module that did not import */
        else
                snprintf(name, sizeof(name), "%.*s.%.*s", (int) pl, paren, (int) ml, s);
        parser_add(p, TEST_RUNNER_UNITTEST, name, strlen(name));
}

/* "--- FAIL: TestTable/negative (0.00s)" at four spaces a level. */
static void parse_go(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_GO];
        size_t indent = strspn(line, " ");
        const char *s = line + indent;

        if (startswith(line, "=== RUN ") || startswith(line, "=== CONT ") || startswith(line, "=== PAUSE ")) {
                p->go_verbose = true;
                st->marks++;
                return;
        }
        if (startswith(s, "--- SKIP: ")) {
                st->marks++;
                if (indent == 0)
                        p->go_skipped++;
                return;
        }
        if (startswith(s, "--- PASS: ")) {
                st->marks++;
                return;
        }
        if (startswith(s, "--- FAIL: ")) {
                Names *n = &st->names;
                const char *name = s + 10, *e = strstr(name, " (");
                size_t l = e ? (size_t) (e - name) : strlen(name);
                st->marks++;
                /* A subtest names its failed parent ("TestTable" by
                 * "TestTable/negative"), which go reports first. */
                for (size_t i = 0; i < n->n; i++) {
                        size_t k = strlen(n->v[i]);
                        if (k < l && strneq(n->v[i], name, k) && name[k] == '/') {
                                names_remove(n, i);
                                break;
                        }
                }
                size_t before = n->reports;
                parser_add(p, TEST_RUNNER_GO, name, l);
                /* One report for each failed top-level test, as counted. */
                if (indent > 0)
                        n->reports = before;
                return;
        }
        /* "ok  \texample.com/m\t0.003s", "FAIL\texample.com/m [build failed]" */
        if (startswith(line, "ok  \t") || startswith(line, "FAIL\t")) {
                st->summary = p->lineno;
                if (startswith(line, "FAIL\t") && (strstr(line, "[build failed]") || strstr(line, "[setup failed]"))) {
                        char name[LINE_MAX_READ];
                        const char *pkg = line + 5;
                        snprintf(name, sizeof(name), "%.*s (build failed)", (int) strcspn(pkg, " \t"), pkg);
                        parser_add(p, TEST_RUNNER_GO, name, strlen(name));
                }
        }
}

/* "test tests::adds_numbers ... FAILED", "test result: ok. 3 passed; ..." */
static void parse_cargo(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_CARGO];
        const char *s, *e;
        int v;

        if (startswith(line, "running ") && is_digit(line[8]) && strstr(line, " test")) {
                st->marks++;
                return;
        }
        if (startswith(line, "test result: ")) {
                st->summary = p->lineno;
                s = strstr(line, " ignored");
                if (s) {
                        const char *b = s;
                        while (b > line && is_digit(b[-1]))
                                b--;
                        if (read_number(&b, &v))
                                st->skipped = MAX(st->skipped, 0) + v;
                }
                return;
        }
        if (startswith(line, "test ") && (e = strstr(line, " ... ")) && endswith(line, " FAILED")) {
                s = line + 5;
                const char *sp = strstr(s, " - should panic");
                if (sp && sp < e)
                        e = sp;
                st->marks++;
                parser_add(p, TEST_RUNNER_CARGO, s, (size_t) (e - s));
        }
}

static void tap_forget_pending(Parser *p, unsigned d) {
        for (; d < TAP_DEPTH_MAX; d++) {
                p->tap_n_pending[d] = 0;
                p->tap_pending_more[d] = false;
        }
}

/* "not ok 2 - two # TODO" at four spaces a depth; the result of a parent
 * (node's suites and files) follows its children's. */
static void parse_tap_result(Parser *p, const char *line, size_t indent, bool ok) {
        Names *n = &p->r[TEST_RUNNER_TAP].names;
        unsigned d = (unsigned) MIN(indent / 4, (size_t) TAP_DEPTH_MAX - 2);
        const char *s = line + indent + (ok ? 2 : 6), *hash, *name;
        char directive[8] = "";
        int num;

        p->r[TEST_RUNNER_TAP].marks++;
        s += strspn(s, " ");
        (void) read_number(&s, &num);
        s += strspn(s, " ");
        if (startswith(s, "- "))
                s += 2;
        name = s;
        /* A directive is " # SKIP ..." or " # TODO ..."; node writes a '#' of a name as "\#". */
        hash = NULL;
        for (const char *q = name; (q = strchr(q, '#')); q++)
                if (q == name || (q[-1] == ' ' && !(q >= name + 2 && q[-2] == '\\'))) {
                        const char *w = q + 1 + strspn(q + 1, " ");
                        if (strncasecmp(w, "skip", 4) == 0 || strncasecmp(w, "todo", 4) == 0) {
                                hash = q;
                                snprintf(directive, sizeof(directive), "%.4s", w);
                                break;
                        }
                }
        size_t l = hash ? (size_t) (hash - name) : strlen(name);

        if (ok) {
                if (d == 0 && strcasecmp(directive, "skip") == 0)
                        p->tap_skip_lines++;
                tap_forget_pending(p, d + 1);
                return;
        }
        if (strcasecmp(directive, "todo") == 0) {
                tap_forget_pending(p, d + 1);
                return;
        }

        if (p->tap_n_pending[d + 1] > 0 || p->tap_pending_more[d + 1]) {
                /* A parent failed by its children: they carry its name. */
                _cleanup_free_ char *parent = NULL;
                if (name_clean(name, l, &parent) < 0)
                        p->oom = -ENOMEM;
                for (unsigned i = 0; parent && i < p->tap_n_pending[d + 1]; i++) {
                        size_t idx = p->tap_pending[d + 1][i];
                        char *c;
                        if (idx >= n->n)
                                continue;
                        if (asprintf(&c, "%s > %s", parent, n->v[idx]) < 0) {
                                p->oom = -ENOMEM;
                                break;
                        }
                        if (strlen(c) > TEST_NAME_MAX) {
                                free(c);
                                continue;
                        }
                        free(n->v[idx]);
                        n->v[idx] = c;
                        /* Named so already: left empty, and dropped at the end. */
                        for (size_t j = 0; j < n->n; j++)
                                if (j != idx && streq(n->v[j], c)) {
                                        n->v[idx][0] = '\0';
                                        break;
                                }
                }
                for (unsigned i = 0; i < p->tap_n_pending[d + 1]; i++)
                        if (p->tap_n_pending[d] < ELEMENTSOF(p->tap_pending[d]))
                                p->tap_pending[d][p->tap_n_pending[d]++] = p->tap_pending[d + 1][i];
                        else
                                p->tap_pending_more[d] = true;
                if (p->tap_pending_more[d + 1])
                        p->tap_pending_more[d] = true;
                tap_forget_pending(p, d + 1);
                return;
        }

        size_t before = n->n;
        parser_add(p, TEST_RUNNER_TAP, name, l);
        if (n->n > before) {
                if (p->tap_n_pending[d] < ELEMENTSOF(p->tap_pending[d]))
                        p->tap_pending[d][p->tap_n_pending[d]++] = n->n - 1;
                else
                        p->tap_pending_more[d] = true;
        }
        tap_forget_pending(p, d + 1);
}

static bool key_count(const char *line, const char *key, int *ret) {
        const char *s;

        if (!startswith(line, key))
                return false;
        s = line + strlen(key);
        if (!is_space(*s))
                return false;
        s += strspn(s, " \t");
        return read_number(&s, ret) && (*s == '\0' || is_space(*s));
}

static void parse_tap(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_TAP];
        size_t indent = strspn(line, " ");
        const char *s = line + indent;
        int v;

        if (startswith(line, "TAP version ") || (startswith(s, "1..") && is_digit(s[3]))) {
                st->marks++;
                return;
        }
        if (startswith(s, "not ok") && (s[6] == '\0' || s[6] == ' ')) {
                parse_tap_result(p, line, indent, false);
                return;
        }
        if (startswith(s, "ok") && (s[2] == '\0' || (s[2] == ' ' && (is_digit(s[3]) || s[3] == '-' || s[3] == '\0')))) {
                parse_tap_result(p, line, indent, true);
                return;
        }
        /* node's summary, TAP ("# pass 2") or spec ("ℹ pass 2"). */
        if (indent == 0 && (startswith(line, "# ") || startswith(line, "\xe2\x84\xb9 "))) {
                const char *k = line + (line[0] == '#' ? 2 : 4);
                if (key_count(k, "pass", &v) || key_count(k, "fail", &v) || key_count(k, "tests", &v))
                        st->summary = p->lineno;
                else if (key_count(k, "skipped", &v))
                        p->tap_skipped_said = v;
                else if (key_count(k, "todo", &v))
                        p->tap_todo_said = v;
                return;
        }
        /* node's spec reporter lists the failures at the end. */
        if (streq(line, "\xe2\x9c\x96 failing tests:")) {
                p->tap_spec_failing = true;
                st->marks++;
                return;
        }
        if (p->tap_spec_failing && startswith(line, "\xe2\x9c\x96 ")) {
                const char *name = line + 4, *e = strrchr(name, '(');
                if (e && e > name && e[-1] == ' ' && endswith(line, "ms)"))
                        parser_add(p, TEST_RUNNER_TAP, name, (size_t) (e - 1 - name));
                else
                        parser_add(p, TEST_RUNNER_TAP, name, strlen(name));
        }
}

static const char *const meson_failures[] = { "FAIL", "TIMEOUT", "UNEXPECTEDPASS", "ERROR", "INTERRUPT" };
static const char *const meson_others[] = { "OK", "SKIP", "EXPECTEDFAIL" };

/* "2/5 demo / adds numbers   FAIL   0.03s   exit status 1": the name, and
 * whether the status is a failure; false if the line is not one. The
 * status is the first word of the list followed by the duration (the
 * longest name has one space before it, like the words of a name). */
static bool meson_status_line(const char *line, const char **ret_name, size_t *ret_len, bool *ret_failed) {
        const char *s = line + strspn(line, " "), *name;
        int v;

        if (!read_number(&s, &v) || *s != '/')
                return false;
        s++;
        if (!read_number(&s, &v) || *s != ' ')
                return false;
        name = s + strspn(s, " ");
        for (const char *q = name; (q = strchr(q, ' ')); q++) {
                const char *w = q + strspn(q, " "), *d;
                size_t wl = strcspn(w, " ");

                d = w + wl + strspn(w + wl, " ");
                if (d == w + wl || !is_digit(*d))
                        continue;
                while (is_digit(*d) || *d == '.')
                        d++;
                if (*d != 's' || (d[1] != '\0' && d[1] != ' '))
                        continue;
                for (int pass = 0; pass < 2; pass++) {
                        const char *const *list = pass == 0 ? meson_failures : meson_others;
                        size_t n = pass == 0 ? ELEMENTSOF(meson_failures) : ELEMENTSOF(meson_others);
                        for (size_t i = 0; i < n; i++)
                                if (wl == strlen(list[i]) && strneq(w, list[i], wl)) {
                                        *ret_name = name;
                                        *ret_len = (size_t) (q - name);
                                        *ret_failed = pass == 0;
                                        return *ret_len > 0;
                                }
                }
        }
        return false;
}

static void parse_meson(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_MESON];
        const char *name;
        size_t l;
        bool failed;
        int v;

        if (streq(line, "Summary of Failures:")) {
                p->meson_in_summary = true;
                return;
        }
        if (key_count(line, "Ok:", &v)) {
                st->summary = p->lineno;
                p->meson_in_summary = false;
                return;
        }
        if (key_count(line, "Skipped:", &v)) {
                st->skipped = v;
                return;
        }
        if (!meson_status_line(line, &name, &l, &failed))
                return;
        st->marks++;
        if (!failed)
                return;
        size_t before = st->names.reports;
        parser_add(p, TEST_RUNNER_MESON, name, l);
        if (p->meson_in_summary)
                st->names.reports = before;
}

/* "2/5 Test #2: adds_numbers .....................***Failed    0.01 sec":
 * the name, and the status after the dots. */
static bool ctest_status_line(const char *line, const char **ret_name, size_t *ret_len, const char **ret_status) {
        const char *s = line + strspn(line, " "), *name, *dots, *e;
        int v;

        if (!read_number(&s, &v) || *s != '/')
                return false;
        s++;
        if (!read_number(&s, &v) || !startswith(s, " Test") || !(s = strstr(s, "#")))
                return false;
        s++;
        if (!read_number(&s, &v) || !startswith(s, ": "))
                return false;
        name = s + 2;
        dots = strstr(name, " ..");
        if (!dots)
                return false;
        e = dots + 1;
        while (*e == '.')
                e++;
        *ret_name = name;
        *ret_len = (size_t) (dots - name);
        *ret_status = e + strspn(e, " ");
        return true;
}

static void parse_ctest(Parser *p, const char *line) {
        RunnerState *st = &p->r[TEST_RUNNER_CTEST];
        const char *name, *status;
        size_t l;

        if (startswith(line, "Test project ")) {
                st->marks++;
                return;
        }
        if (strstr(line, "% tests passed") && strstr(line, "tests failed out of")) {
                st->summary = p->lineno;
                return;
        }
        if (!ctest_status_line(line, &name, &l, &status))
                return;
        st->marks++;
        if (startswith(status, "***Skipped") || startswith(status, "***Not Run (Disabled)") ||
            startswith(status, "Disabled") || startswith(status, "***Disabled")) {
                p->ctest_skipped++;
                return;
        }
        if (startswith(status, "***"))
                parser_add(p, TEST_RUNNER_CTEST, name, l);
}

int test_output_parse(const char *text, size_t size, TestOutput *ret) {
        _cleanup_free_ Parser *p = NULL;
        char line[LINE_MAX_READ];
        const char *s;
        size_t off = 0, l;

        if (!ret || (!text && size > 0))
                return -EINVAL;
        *ret = (TestOutput) { .runner = _TEST_RUNNER_INVALID, .n_skipped = -1 };

        p = calloc(1, sizeof(Parser));
        if (!p)
                return -ENOMEM;
        for (TestRunner r = 0; r < _TEST_RUNNER_MAX; r++)
                p->r[r].skipped = -1;
        p->tap_skipped_said = p->tap_todo_said = -1;

        while (next_line(text, size, &off, &s, &l)) {
                p->lineno++;
                test_output_clean_line(s, l, line, sizeof(line));
                parse_pytest(p, line);
                parse_unittest(p, line);
                parse_go(p, line);
                parse_cargo(p, line);
                parse_tap(p, line);
                parse_meson(p, line);
                parse_ctest(p, line);
                if (p->oom < 0)
                        break;
        }

        /* What each runner said of its skips, and its names as a fallback. */
        if (p->r[TEST_RUNNER_PYTEST].names.n == 0 && p->pytest_headers.n > 0) {
                names_done(&p->r[TEST_RUNNER_PYTEST].names);
                p->r[TEST_RUNNER_PYTEST].names = p->pytest_headers;
                p->pytest_headers = (Names) {};
        }
        if (p->go_verbose)
                p->r[TEST_RUNNER_GO].skipped = p->go_skipped;
        else if (p->go_skipped > 0)
                p->r[TEST_RUNNER_GO].skipped = p->go_skipped;
        if (p->tap_skipped_said >= 0 || p->tap_todo_said >= 0)
                p->r[TEST_RUNNER_TAP].skipped = MAX(p->tap_skipped_said, 0) + MAX(p->tap_todo_said, 0);
        else if (p->r[TEST_RUNNER_TAP].marks > 0)
                p->r[TEST_RUNNER_TAP].skipped = p->tap_skip_lines;
        if (p->r[TEST_RUNNER_CTEST].marks > 0)
                p->r[TEST_RUNNER_CTEST].skipped = p->ctest_skipped;

        TestRunner best = _TEST_RUNNER_INVALID;
        for (TestRunner r = 0; r < _TEST_RUNNER_MAX; r++) {
                const RunnerState *st = &p->r[r];
                if (st->summary == 0 && st->marks == 0 && st->names.n == 0)
                        continue;
                if (best < 0) {
                        best = r;
                        continue;
                }
                const RunnerState *b = &p->r[best];
                if (st->summary > b->summary || (st->summary == b->summary && st->marks > b->marks))
                        best = r;
        }

        if (p->oom < 0) {
                for (TestRunner r = 0; r < _TEST_RUNNER_MAX; r++)
                        names_done(&p->r[r].names);
                names_done(&p->pytest_headers);
                return p->oom;
        }
        if (best >= 0) {
                RunnerState *st = &p->r[best];
                /* Renamed into a name listed already (TAP's parents). */
                for (size_t i = 0; i < st->names.n;)
                        if (st->names.v[i][0] == '\0')
                                names_remove(&st->names, i);
                        else
                                i++;
                *ret = (TestOutput) {
                        .runner = best,
                        .n_skipped = st->skipped,
                        .failed = TAKE_PTR(st->names.v),
                        .n_failed = st->names.n,
                        .n_reports = st->names.reports,
                        .truncated = st->names.truncated,
                };
                st->names = (Names) {};
        }
        for (TestRunner r = 0; r < _TEST_RUNNER_MAX; r++)
                names_done(&p->r[r].names);
        names_done(&p->pytest_headers);
        return 0;
}

void test_output_done(TestOutput *o) {
        if (!o)
                return;
        strv_free(o->failed);
        *o = (TestOutput) { .runner = _TEST_RUNNER_INVALID, .n_skipped = -1 };
}

/* ---- The excerpt ---- */

#define BLOCKS_MAX 4096u
#define TAIL_LINES 10u
#define TAIL_BYTES 2048u
#define SHOW_LINE_MAX 2048u        /* a longer line (minified code, a progress bar) is cut */
#define BLOCK_MIN_SHARE 512u
#define NOTE_MAX 112u              /* the longest note of what was left out */
#define HEADER_MAX 128u
#define LINE_CUT_NOTE " [line cut]"
#define GENERIC_BEFORE 2u
#define GENERIC_AFTER 8u

typedef struct Block {
        size_t start, end;         /* whole lines: [start, end) of the text */
} Block;

typedef struct GoRun {
        char name[128];
        size_t start;
} GoRun;

typedef struct Excerpt {
        Block *v;
        size_t n;
        int oom;
        size_t open;               /* start of the block being read, or SIZE_MAX */
        int open_indent;           /* it goes on while lines are indented more; -1: until closed */
        bool until_blank;          /* it ends with a blank line (a build error) */
        size_t extend_until;       /* the generic blocks: open until this line number */
        size_t heading;            /* pytest: where the section's heading is, before its first block */
        GoRun go_runs[GO_RUNS_KEPT];   /* go test -v: where the latest tests' output began */
        size_t go_next;
} Excerpt;

static void ex_add(Excerpt *e, size_t start, size_t end) {
        Block *t;

        if (end <= start || e->n >= BLOCKS_MAX)
                return;
        t = realloc(e->v, sizeof(Block) * (e->n + 1));
        if (!t) {
                e->oom = -ENOMEM;
                return;
        }
        e->v = t;
        e->v[e->n++] = (Block) { start, end };
}

/* Closes the block being read before the line at `at`. */
static void ex_close(Excerpt *e, size_t at) {
        if (e->open == SIZE_MAX)
                return;
        ex_add(e, e->open, at);
        e->open = SIZE_MAX;
        e->open_indent = -1;
        e->until_blank = false;
}

/* Opens a block at `from` (maybe before this line, at `at`). */
static void ex_open_from(Excerpt *e, size_t from, size_t at, int indent) {
        ex_close(e, at);
        e->open = from;
        e->open_indent = indent;
}

static void ex_open(Excerpt *e, size_t at, int indent) {
        ex_open_from(e, at, at, indent);
}

static bool line_is_rule(const char *s, char c, size_t min) {
        size_t n = 0;
        while (s[n] == c)
                n++;
        return n >= min && s[n] == '\0';
}

static bool generic_failure_line(const char *s) {
        static const char *const markers[] = {
                "FAIL", "Error", "ERROR", "error:", "error[", "assert", "Assert", "not ok", "panic", "Traceback",
                "Exception", "expected", "Expected", "\xe2\x9c\x96" /* ✖ */,
        };

        for (size_t i = 0; i < ELEMENTSOF(markers); i++)
                if (strstr(s, markers[i]))
                        return true;
        return false;
}

static void go_remember_run(Excerpt *e, const char *line, size_t start) {
        const char *name = line + strlen("=== RUN");
        GoRun *r = &e->go_runs[e->go_next++ % GO_RUNS_KEPT];

        name += strspn(name, " ");
        snprintf(r->name, sizeof(r->name), "%s", name);
        r->start = start;
}

/* Where the output of go test -v for the test began: its "=== RUN". */
static size_t go_run_start(const Excerpt *e, const char *name, size_t l, size_t fallback) {
        for (size_t i = 0; i < MIN(e->go_next, (size_t) GO_RUNS_KEPT); i++) {
                const GoRun *r = &e->go_runs[(e->go_next - 1 - i) % GO_RUNS_KEPT];
                if (strlen(r->name) == l && strneq(r->name, name, l))
                        return r->start;
        }
        return fallback;
}

/* The blocks of one line: it begins at start, the next one at end; next
 * is the next line, cleaned ("" at the end). */
static void ex_line(Excerpt *e, TestRunner runner, const char *line, const char *next, size_t start, size_t end) {
        size_t indent = strspn(line, " \t");
        const char *name, *status;
        size_t l;
        bool failed;
        int sk;

        /* An indented block goes on while lines are indented more (or, for
         * TAP, are its "#" diagnostics); a build error's, to a blank line. */
        if (e->open != SIZE_MAX && e->open_indent >= 0 && line[0] != '\0' && (int) indent <= e->open_indent &&
            !(runner == TEST_RUNNER_TAP && line[indent] == '#' && !startswith(line + indent, "# Subtest")))
                ex_close(e, start);
        if (e->open != SIZE_MAX && e->until_blank && line[0] == '\0') {
                ex_close(e, end);
                return;
        }

        switch (runner) {
        case TEST_RUNNER_PYTEST:
                /* A section's heading goes with its first test's block. */
                if (line[0] == '=' && (strstr(line, " FAILURES ") || strstr(line, " ERRORS "))) {
                        ex_close(e, start);
                        e->heading = start;
                } else if (line[0] == '=' && strstr(line, "short test summary info"))
                        ex_open(e, start, -1);   /* through the counts */
                else if (pytest_summary(line, &sk)) {
                        if (e->open == SIZE_MAX)
                                e->open = start;
                        ex_close(e, end);
                } else if (startswith(line, "===")) {
                        ex_close(e, start);
                        e->heading = SIZE_MAX;
                } else if (startswith(line, "___") && endswith(line, "___") && (e->open != SIZE_MAX || e->heading != SIZE_MAX)) {
                        ex_open_from(e, e->heading != SIZE_MAX ? e->heading : start, start, -1);  /* one block a test */
                        e->heading = SIZE_MAX;
                }
                break;

        case TEST_RUNNER_UNITTEST:
                if (line_is_rule(line, '=', 20) &&
                    (startswith(next, "FAIL: ") || startswith(next, "ERROR: ") || startswith(next, "UNEXPECTED SUCCESS: ")))
                        ex_open(e, start, -1);
                else if (line_is_rule(line, '=', 20) || (line_is_rule(line, '-', 20) && startswith(next, "Ran ")))
                        ex_close(e, start);
                else if (startswith(line, "Ran ") && is_digit(line[4]))
                        ex_open(e, start, -1);
                else if (streq(line, "OK") || startswith(line, "OK (") || startswith(line, "FAILED (")) {
                        if (e->open == SIZE_MAX)
                                e->open = start;
                        ex_close(e, end);
                }
                break;

        case TEST_RUNNER_GO:
                if (startswith(line, "=== RUN ")) {
                        ex_close(e, start);
                        go_remember_run(e, line, start);
                } else if (startswith(line + indent, "--- FAIL: ")) {
                        const char *n = line + indent + 10, *p = strstr(n, " (");
                        ex_open_from(e, go_run_start(e, n, p ? (size_t) (p - n) : strlen(n), start), start, (int) indent);
                } else if (startswith(line, "panic: "))
                        ex_open(e, start, -1);   /* and the goroutines' traces */
                else if (startswith(line, "# ") && !is_space(line[2])) {
                        ex_open(e, start, -1);   /* a package that did not build */
                } else if (startswith(line, "FAIL\t") || startswith(line, "ok  \t")) {
                        ex_close(e, start);
                        if (startswith(line, "FAIL\t"))
                                ex_add(e, start, end);
                } else if (startswith(line, "--- PASS: ") || startswith(line, "--- SKIP: ") ||
                           startswith(line, "=== CONT ") || startswith(line, "=== PAUSE "))
                        ex_close(e, start);
                break;

        case TEST_RUNNER_CARGO:
                if (startswith(line, "---- ") && endswith(line, " ----"))
                        ex_open(e, start, -1);
                else if (streq(line, "failures:") || startswith(line, "test result: ") || startswith(line, "running ")) {
                        ex_close(e, start);
                        if (startswith(line, "test result: FAILED"))
                                ex_add(e, start, end);
                } else if (startswith(line, "error[") || (startswith(line, "error: ") && e->open == SIZE_MAX)) {
                        ex_open(e, start, -1);   /* a build error, to the blank line */
                        e->until_blank = true;
                }
                break;

        case TEST_RUNNER_TAP:
                if (startswith(line + indent, "not ok") && !strcasestr(line, "# todo"))
                        ex_open(e, start, (int) indent);
                else if (streq(line, "\xe2\x9c\x96 failing tests:")) {
                        ex_close(e, start);
                        e->heading = start;
                } else if (startswith(line, "test at ") && (e->heading != SIZE_MAX || (e->open != SIZE_MAX &&
                                                                                        e->open_indent < 0))) {
                        /* node's spec reporter: one block a failure. */
                        ex_open_from(e, e->heading != SIZE_MAX ? e->heading : start, start, -1);
                        e->heading = SIZE_MAX;
                }
                break;

        case TEST_RUNNER_MESON:
                if (meson_status_line(line, &name, &l, &failed)) {
                        if (failed)
                                ex_open(e, start, -1);
                        else
                                ex_close(e, start);
                } else if (streq(line, "Summary of Failures:") || startswith(line, "Ok:"))
                        ex_open(e, start, -1);   /* the list, the counts */
                else if (startswith(line, "Timeout:") && e->open != SIZE_MAX)
                        ex_close(e, end);
                else if (startswith(line, "\xe2\x96\xb6 ") && strstr(line, " FAIL")) {
                        ex_close(e, start);
                        ex_add(e, start, end);   /* a TAP subtest of the next test */
                }
                break;

        case TEST_RUNNER_CTEST:
                if (ctest_status_line(line, &name, &l, &status)) {
                        if (startswith(status, "***") && !startswith(status, "***Skipped") &&
                            !startswith(status, "***Not Run (Disabled)"))
                                ex_open(e, start, -1);
                        else
                                ex_close(e, start);
                } else if (startswith(line, "    Start ") || line_is_rule(line, '-', 20))
                        ex_close(e, start);
                else if (streq(line, "The following tests FAILED:"))
                        ex_open(e, start, 0);    /* and its indented lines */
                else if (strstr(line, "% tests passed") && strstr(line, "tests failed out of")) {
                        ex_close(e, start);
                        ex_add(e, start, end);
                }
                break;

        default:
                break;
        }
}

static int block_cmp(const void *a, const void *b) {
        const Block *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

/* The lines of [start, end), a last one without '\n' included. */
static size_t count_lines(const char *text, size_t start, size_t end) {
        size_t n = 0;

        for (const char *p = text + start; p < text + end && (p = memchr(p, '\n', (size_t) (text + end - p))); p++)
                n++;
        if (end > start && text[end - 1] != '\n')
                n++;
        return n;
}

/* Appends s[0..n) with control characters and bytes that are not UTF-8 as
 * "\xNN" (exec_output_escape()'s rule), at most max bytes; returns how many
 * bytes of s were taken. */
static size_t append_escaped(Buf *b, const char *s, size_t n, size_t max, int *oom) {
        const unsigned char *d = (const unsigned char *) s;
        size_t i = 0, written = 0;

        while (i < n && *oom == 0) {
                unsigned char c = d[i];
                size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
                bool ok = k > 0 && i + k <= n && (k != 2 || c >= 0xC2) && (k != 1 || c == '\t' || (c >= ' ' && c != 127));

                for (size_t j = 1; ok && j < k; j++)
                        ok = (d[i + j] & 0xC0) == 0x80;
                if (!ok) {
                        char x[5];
                        if (written + 4 > max)
                                break;
                        snprintf(x, sizeof(x), "\\x%02x", c);
                        if (buf_append(b, x, 4) < 0)
                                *oom = -ENOMEM;
                        written += 4;
                        i++;
                        continue;
                }
                if (written + k > max)
                        break;
                if (buf_append(b, s + i, k) < 0)
                        *oom = -ENOMEM;
                written += k;
                i += k;
        }
        return i;
}

/* Appends the lines of [start, end) as far as they fit in allot bytes,
 * then a note of how many did not (at most NOTE_MAX bytes more). */
static void emit_block(Buf *b, const char *text, size_t start, size_t end, size_t allot, int *oom) {
        const size_t cut_note = strlen(LINE_CUT_NOTE);
        size_t used = 0, off = start, l;
        const char *s;
        char line[SHOW_LINE_MAX];

        while (*oom == 0 && next_line(text, end, &off, &s, &l)) {
                size_t cl, before = b->n, took;

                test_output_clean_line(s, l, line, sizeof(line));
                cl = strlen(line);
                /* A line is cut only when it is the block's first (or too
                 * long to show anyway): else the note counts it. */
                if (allot - used < (used > 0 ? cl : MIN(cl, (size_t) 32)) + cut_note + 1) {
                        off = (size_t) (s - text);
                        break;
                }
                took = append_escaped(b, line, cl, allot - used - cut_note - 1, oom);
                if ((took < cl || cl + 1 >= sizeof(line)) && buf_puts(b, LINE_CUT_NOTE) < 0)
                        *oom = -ENOMEM;
                if (buf_append(b, "\n", 1) < 0)
                        *oom = -ENOMEM;
                used += b->n - before;
        }
        if (off < end && *oom == 0) {
                size_t more = count_lines(text, off, end);
                if (buf_printf(b, "[... %zu more line%s of this part not shown ...]\n", more, more == 1 ? "" : "s") < 0)
                        *oom = -ENOMEM;
        }
}

/* What a cleaned line takes when emit_block() shows it whole. */
static size_t shown_length(const char *line) {
        _cleanup_(buf_done) Buf scratch = {};
        size_t n = strlen(line);
        int oom = 0;

        (void) append_escaped(&scratch, line, n, SIZE_MAX, &oom);
        return (oom < 0 ? 4 * n : scratch.n) + 1 + (n + 1 >= SHOW_LINE_MAX ? strlen(LINE_CUT_NOTE) : 0);
}

/* The end of the output: its last lines, as many as fit in allot bytes,
 * with a note of those before them that do not. */
static void emit_tail(Buf *b, const char *text, size_t start, size_t end, size_t allot, int *oom) {
        size_t off = start, l, total = 0, skip = 0;
        const char *s;
        char line[SHOW_LINE_MAX];

        while (next_line(text, end, &off, &s, &l)) {
                test_output_clean_line(s, l, line, sizeof(line));
                total += shown_length(line);
        }
        off = start;
        while (total > allot && next_line(text, end, &off, &s, &l)) {
                test_output_clean_line(s, l, line, sizeof(line));
                total -= shown_length(line);
                skip++;
        }
        if (skip > 0 && buf_printf(b, "[... %zu line%s not shown ...]\n", skip, skip == 1 ? "" : "s") < 0)
                *oom = -ENOMEM;
        emit_block(b, text, off, end, allot, oom);
}

/* Where the last lines begin: TAIL_LINES of them, at most about
 * TAIL_BYTES, at least the last line. */
static size_t tail_start(const char *text, size_t size) {
        size_t i = size, lines = 0;

        if (i > 0 && text[i - 1] == '\n')
                i--;
        while (i > 0 && size - i < TAIL_BYTES) {
                if (text[i - 1] == '\n' && ++lines >= TAIL_LINES)
                        break;
                i--;
        }
        if (i > 0 && text[i - 1] != '\n') {
                /* Stopped inside a line: from the next one, or this one if it is the last. */
                const char *nl = memchr(text + i, '\n', size - i);
                if (nl && (size_t) (nl - text) + 1 < size)
                        i = (size_t) (nl - text) + 1;
                else
                        while (i > 0 && text[i - 1] != '\n')
                                i--;
        }
        return i;
}

/* All of the output, cleaned and escaped, if that fits in max. */
static int excerpt_whole(const char *text, size_t size, size_t max, char **ret) {
        _cleanup_(buf_done) Buf b = {};
        _cleanup_free_ char *line = malloc(size + 1);
        size_t off = 0, l;
        const char *s;
        int oom = 0;

        if (!line)
                return -ENOMEM;
        while (oom == 0 && next_line(text, size, &off, &s, &l)) {
                test_output_clean_line(s, l, line, l + 1);
                (void) append_escaped(&b, line, strlen(line), SIZE_MAX, &oom);
                if (s + l < text + size && buf_append(&b, "\n", 1) < 0)
                        oom = -ENOMEM;
        }
        if (oom < 0)
                return oom;
        if (b.n > max)
                return 0;
        *ret = b.s ? TAKE_PTR(b.s) : strdup("");
        return *ret ? 1 : -ENOMEM;
}

int test_output_excerpt(const char *text, size_t size, TestRunner runner, size_t max, char **ret) {
        _cleanup_free_ size_t *allot = NULL, *order = NULL;
        _cleanup_free_ Excerpt *e = NULL;
        _cleanup_(buf_done) Buf b = {};
        char line[LINE_MAX_READ], next[LINE_MAX_READ];
        size_t before[GENERIC_BEFORE] = {}, n_before = 0, off = 0, lineno = 0, dropped = 0, k;
        const char *s, *ns;
        size_t l, nl;
        int oom = 0, r;

        if (!ret || max < 1024 || (!text && size > 0))
                return -EINVAL;

        if (size <= max) {
                r = excerpt_whole(text, size, max, ret);
                if (r != 0)
                        return r < 0 ? r : 0;
        }

        e = calloc(1, sizeof(Excerpt));
        if (!e)
                return -ENOMEM;
        e->open = e->heading = SIZE_MAX;
        e->open_indent = -1;

        /* The runner's blocks, each line read with the next one in sight. */
        bool have = runner >= 0 && next_line(text, size, &off, &s, &l);
        if (have)
                test_output_clean_line(s, l, line, sizeof(line));
        while (have && e->oom == 0) {
                size_t start = (size_t) (s - text), end = off;
                bool more = next_line(text, size, &off, &ns, &nl);

                if (more)
                        test_output_clean_line(ns, nl, next, sizeof(next));
                else
                        next[0] = '\0';
                ex_line(e, runner, line, next, start, end);
                memcpy(line, next, strlen(next) + 1);
                s = ns, l = nl, have = more;
        }
        ex_close(e, size);

        /* Nothing the runner's rules know of: the lines that look like
         * failures, with GENERIC_BEFORE lines before and GENERIC_AFTER after. */
        if (e->n == 0 && e->oom == 0) {
                off = 0;
                while (e->oom == 0 && next_line(text, size, &off, &s, &l)) {
                        size_t start = (size_t) (s - text);

                        lineno++;
                        test_output_clean_line(s, l, line, sizeof(line));
                        if (generic_failure_line(line)) {
                                if (e->open == SIZE_MAX)
                                        e->open = n_before > 0 ? before[0] : start;
                                e->extend_until = lineno + GENERIC_AFTER;
                        } else if (e->open != SIZE_MAX && lineno > e->extend_until)
                                ex_close(e, start);
                        if (n_before < GENERIC_BEFORE)
                                before[n_before++] = start;
                        else {
                                memmove(before, before + 1, sizeof(size_t) * (GENERIC_BEFORE - 1));
                                before[GENERIC_BEFORE - 1] = start;
                        }
                }
                ex_close(e, size);
        }

        if (e->oom < 0) {
                free(e->v);
                return e->oom;
        }

        /* In order, overlaps merged; then the end, where the summary is, a
         * block of its own that a long block before it cannot swallow. */
        if (e->n > 0)
                qsort(e->v, e->n, sizeof(Block), block_cmp);
        k = 0;
        for (size_t i = 0; i < e->n; i++) {
                if (k > 0 && e->v[i].start < e->v[k - 1].end) {
                        e->v[k - 1].end = MAX(e->v[k - 1].end, e->v[i].end);
                        continue;
                }
                e->v[k++] = e->v[i];
        }
        e->n = k;
        size_t tail = tail_start(text, size);
        while (e->n > 0 && e->v[e->n - 1].start >= tail)
                e->n--;
        if (e->n > 0 && e->v[e->n - 1].end > tail)
                e->v[e->n - 1].end = tail;
        if (e->n >= BLOCKS_MAX)
                e->n = BLOCKS_MAX - 1;
        ex_add(e, tail, size);
        if (e->oom < 0 || e->n == 0) {
                free(e->v);
                if (e->oom < 0)
                        return e->oom;
                *ret = strdup("");
                return *ret ? 0 : -ENOMEM;
        }

        /* Room for the header and the notes first; then as many blocks as
         * get a fair share: the first ones (a model fixes one failure at a
         * time) and the last (the summary). */
        const size_t reserve = HEADER_MAX + NOTE_MAX, per_block = 2 * NOTE_MAX;
        size_t shown = e->n;
        while (shown > 1 && reserve + shown * (per_block + BLOCK_MIN_SHARE) > max)
                shown--;
        if (shown < e->n) {
                dropped = e->n - shown;
                e->v[shown - 1] = e->v[e->n - 1];
                e->n = shown;
        }
        size_t budget = max - reserve - e->n * per_block;

        /* Water-filling: the small blocks whole, the big ones share the rest. */
        allot = calloc(e->n, sizeof(size_t));
        order = calloc(e->n, sizeof(size_t));
        if (!allot || !order) {
                free(e->v);
                return -ENOMEM;
        }
        for (size_t i = 0; i < e->n; i++)
                order[i] = i;
        for (size_t i = 1; i < e->n; i++)       /* by size; a few dozen at most */
                for (size_t j = i; j > 0 && e->v[order[j]].end - e->v[order[j]].start <
                                              e->v[order[j - 1]].end - e->v[order[j - 1]].start; j--) {
                        size_t t = order[j];
                        order[j] = order[j - 1];
                        order[j - 1] = t;
                }
        /* The end first (it has the counts), at most half of it all. */
        size_t left = budget, last = e->n - 1, want = e->v[last].end - e->v[last].start;
        allot[last] = MIN(want * 4 + 32, budget / 2);
        left -= allot[last];
        for (size_t i = 0, j = 0; i < e->n; i++) {
                size_t bi = order[i];
                if (bi == last)
                        continue;
                /* Escapes and cut notes take a little more than the raw bytes. */
                want = e->v[bi].end - e->v[bi].start;
                want += want / 8 + 32;
                allot[bi] = MIN(want, left / (e->n - 1 - j));
                left -= allot[bi];
                j++;
        }

        if (buf_printf(&b, "[%zu lines of output, %zu bytes; shown: the parts about failures, and the end]\n",
                       count_lines(text, 0, size), size) < 0)
                oom = -ENOMEM;
        size_t prev = 0;
        for (size_t i = 0; i < e->n && oom == 0; i++) {
                if (e->v[i].start > prev) {
                        size_t gap = count_lines(text, prev, e->v[i].start);
                        if (i == e->n - 1 && dropped > 0)
                                r = buf_printf(&b, "[... %zu lines, with %zu more parts about failures, not shown ...]\n",
                                               gap, dropped);
                        else
                                r = buf_printf(&b, "[... %zu line%s not shown ...]\n", gap, gap == 1 ? "" : "s");
                        if (r < 0)
                                oom = -ENOMEM;
                }
                if (i == e->n - 1)
                        emit_tail(&b, text, e->v[i].start, e->v[i].end, allot[i], &oom);
                else
                        emit_block(&b, text, e->v[i].start, e->v[i].end, allot[i], &oom);
                prev = e->v[i].end;
        }
        free(e->v);
        if (oom < 0)
                return oom;
        /* Without the last newline, as a command's output ends. */
        if (b.n > 0 && b.s[b.n - 1] == '\n')
                b.s[--b.n] = '\0';
        assert(b.n <= max);
        *ret = TAKE_PTR(b.s);
        return 0;
}
