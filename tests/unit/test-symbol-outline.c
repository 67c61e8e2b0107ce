/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol outline of the first prompt (symbol-outline.h): which files
 * the task points to, and the reading of ctags' output, which comes out of
 * the sandbox and is as untrusted as the files it parsed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "string-util.h"
#include "symbol-outline.h"
#include "tap.h"

static char root[] = "/tmp/test-symbol-outline-XXXXXX";

static void put(const char *path, const char *text) {
        char p[4096];
        (void) snprintf(p, sizeof(p), "mkdir -p \"$(dirname '%s/%s')\" && printf '%%s' '%s' > '%s/%s'", root, path, text,
                        root, path);
        if (system(p) != 0)
                abort();
}

static bool has(const char *s, const char *needle) {
        return s && strstr(s, needle);
}

static char *joined(char **l) {
        char *s = l ? strv_join(l, " ") : NULL;
        return s ?: strdup("");
}

/* The choice of files: what the task's words and the failed tests point
 * to comes first, and nothing else comes at all. */
static void test_rank(void) {
        static const struct {
                const char *requirement;
                const char *failures[3];
                unsigned max;
                const char *want;      /* the ranked files, space-separated */
                const char *why;
        } cases[] = {
                { "Fix the crash in src/parser.py when the input is empty.", {}, 5,
                  "src/parser.py tests/test_parser.py",
                  "a path named outright first; the test of its stem after" },
                { "The lexer (lexer.c) loses the last token.", {}, 5, "src/lexer.c src/lexer_test.c",
                  "a basename named, and its test after" },
                { "Make `parse_args` accept --verbose; see /workspace/src/cli.py.", {}, 5, "src/cli.py",
                  "a path under /workspace, in backquotes" },
                { "Rename the Config class.", {}, 5, "src/config.c src/config.h",
                  "a word equal to a stem, any case" },
                { "Something vague about performance.", {}, 5, "",
                  "nothing named: nothing chosen" },
                { "Fix it.", { "tests/test_parser.py::test_empty", NULL }, 5,
                  "tests/test_parser.py src/parser.py",
                  "a failed test's file, and by its name the file it tests" },
                { "Fix it.", { "TestLexer", NULL }, 5, "src/lexer.c",
                  "a Go-style test name points to its stem" },
                { "Fix src/parser.py, src/lexer.c and src/cli.py.", {}, 2, "src/cli.py src/lexer.c",
                  "bounded by max (ties by path)" },
                { "Fix ./src/parser.py.", {}, 5, "src/parser.py tests/test_parser.py",
                  "a leading ./ and a trailing full stop are not part of the path" },
                { "Fix parser.py", { "tests/test_parser.py::test_x", NULL }, 2, "tests/test_parser.py src/parser.py",
                  "the task's words and a failure add up" },
                { "The lexer is slow.", {}, 5, "src/lexer.c src/lexer_test.c",
                  "the shallower of two alike first; a test file of a named stem after" },
        };
        char *files[] = {
                (char *) "README.md", (char *) "src/parser.py", (char *) "src/lexer.c", (char *) "src/cli.py",
                (char *) "src/config.c", (char *) "src/config.h", (char *) "tests/test_parser.py",
                (char *) "docs/performance-notes.txt", (char *) "src/lexer_test.c", NULL,
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char **ranked = NULL;
                char *got;
                int r = outline_rank_files(files, cases[i].requirement, (char **) cases[i].failures, cases[i].max,
                                           &ranked);
                got = joined(ranked);
                CHECK(r == 0 && streq(got, cases[i].want), "rank %zu: %s: '%s' (want '%s')", i, cases[i].why, got,
                      cases[i].want);
                free(got);
                strv_free(ranked);
        }
}

static void test_pick(void) {
        char **picked = NULL, *got, big[64];
        int fd;

        put("src/parser.py", "def parse():\\n    pass\\n");
        put("node_modules/parser/index.js", "x\\n");
        put("-rf.py", "x\\n");
        put("tests/test_parser.py", "def test_x():\\n    pass\\n");
        /* A big one and a binary one the goal names. */
        (void) snprintf(big, sizeof(big), "%s/src/huge.py", root);
        fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ftruncate(fd, OUTLINE_FILE_SIZE_MAX + 1) < 0)
                abort();
        close(fd);
        (void) snprintf(big, sizeof(big), "%s/src/blob.py", root);
        fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "a\0b", 3) != 3)
                abort();
        close(fd);
        (void) snprintf(big, sizeof(big), "%s/src/link.py", root);
        if (symlink("/etc/passwd", big) < 0)
                abort();

        int ws = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(outline_pick_files(ws, "Fix parser.py, huge.py, blob.py, link.py, -rf.py and index.js", NULL, 20,
                                 &picked) == 0, "picking");
        got = joined(picked);
        CHECK(streq(got, "src/parser.py tests/test_parser.py"),
              "huge, binary, symlinked, bulky-directory files and names like options are left out: '%s'", got);
        free(got);
        strv_free(picked);
        close(ws);
}

static void test_argv(void) {
        char *files[] = { (char *) "a.c", NULL }, **argv = NULL, *got;

        CHECK(outline_ctags_argv(files, &argv) == 0, "argv");
        got = joined(argv);
        /* --options=NONE must come first for ctags to honour it. */
        CHECK(streq(got, "ctags --options=NONE --quiet=yes --output-format=json --fields=+nKS-P --sort=no -f - a.c"),
              "no option file is read, no pattern is written: '%s'", got);
        free(got);
        strv_free(argv);
}

/* ctags' output comes from the sandbox: every line that is not a tag of a
 * file asked for is skipped, and what is kept is shown safely. */
static void test_parse(void) {
        static const struct {
                const char *line;
                bool kept;
                const char *name, *kind;
                unsigned depth;
                const char *why;
        } cases[] = {
                { "{\"_type\": \"tag\", \"name\": \"parse\", \"path\": \"src/parser.py\", \"line\": 3, \"kind\": \"function\"}",
                  true, "parse", "function", 0, "a function" },
                { "{\"_type\": \"tag\", \"name\": \"feed\", \"path\": \"src/parser.py\", \"line\": 9, \"kind\": \"member\", "
                  "\"scope\": \"Parser\", \"scopeKind\": \"class\"}",
                  true, "feed", "member", 1, "a method, one level in" },
                { "{\"_type\": \"tag\", \"name\": \"x\", \"path\": \"src/parser.py\", \"line\": 9, \"kind\": \"m\", "
                  "\"scope\": \"a::b.c::d.e.f.g\"}",
                  true, "x", "m", 4, "nesting is bounded" },
                { "{\"_type\": \"tag\", \"name\": \"nokind\", \"path\": \"src/parser.py\", \"line\": 1}",
                  true, "nokind", "symbol", 0, "no kind: 'symbol'" },
                { "{\"_type\": \"tag\", \"name\": \"a\\u001b[2Jb\\nc\\u0000d\", \"path\": \"src/parser.py\", \"line\": 1, \"kind\": \"f\"}",
                  true, "a?[2Jb?c?d", "f", 0, "control characters and NUL in a name are replaced" },
                { "{\"_type\": \"tag\", \"name\": \"\\u00c2\\u009b31m\", \"path\": \"src/parser.py\", \"line\": 1, \"kind\": \"f\"}",
                  true, "Â  31m", "f", 0, "a C1 control is blanked" },
                { "{\"_type\": \"tag\", \"name\": \"x\", \"path\": \"/etc/passwd\", \"line\": 1, \"kind\": \"f\"}",
                  false, NULL, NULL, 0, "a path not asked for" },
                { "{\"_type\": \"ptag\", \"name\": \"JSON_OUTPUT_VERSION\", \"path\": \"0.0\", \"line\": 1}",
                  false, NULL, NULL, 0, "a pseudo-tag" },
                { "{\"_type\": \"tag\", \"name\": \"x\", \"path\": \"src/parser.py\", \"line\": -4}",
                  false, NULL, NULL, 0, "a negative line" },
                { "{\"_type\": \"tag\", \"name\": \"x\", \"path\": \"src/parser.py\", \"line\": \"7\"}",
                  false, NULL, NULL, 0, "a line that is a string" },
                { "{\"_type\": \"tag\", \"name\": \"x\", \"path\": \"src/parser.py\", \"line\": 99999999999}",
                  false, NULL, NULL, 0, "a line past 32 bits" },
                { "{\"_type\": \"tag\", \"name\": 5, \"path\": \"src/parser.py\", \"line\": 1}",
                  false, NULL, NULL, 0, "a name that is not a string" },
                { "{\"_type\": \"tag\", \"name\": \"\", \"path\": \"src/parser.py\", \"line\": 1}",
                  false, NULL, NULL, 0, "an empty name" },
                { "{\"_type\": \"tag\", \"name\": \"x\", \"path\": \"src/parser.py\", \"line\": 1",
                  false, NULL, NULL, 0, "a line cut short" },
                { "[1, 2, 3]", false, NULL, NULL, 0, "an array" },
                { "ctags: Warning: cannot open input file \"x\" : No such file or directory",
                  false, NULL, NULL, 0, "a warning on stderr" },
                { "[... 12345 bytes cut ...]", false, NULL, NULL, 0, "the marker of a cut output" },
                { "\xff\xfe{\"_type\": \"tag\"}", false, NULL, NULL, 0, "garbage bytes" },
        };
        char *files[] = { (char *) "src/parser.py", NULL };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Outline o = {};
                int r = outline_parse(cases[i].line, strlen(cases[i].line), files, &o);

                if (cases[i].kept)
                        CHECK(r == 0 && o.n == 1 && o.skipped == 0 && streq(o.symbols[0].name, cases[i].name) &&
                              streq(o.symbols[0].kind, cases[i].kind) && o.symbols[0].depth == cases[i].depth,
                              "parse %zu: %s: '%s' %s, depth %u", i, cases[i].why, o.n ? o.symbols[0].name : "",
                              o.n ? o.symbols[0].kind : "", o.n ? o.symbols[0].depth : 0);
                else
                        CHECK(r == 0 && o.n == 0 && o.skipped == 1, "parse %zu: %s is skipped", i, cases[i].why);
                outline_done(&o);
        }

        /* Lines with NUL bytes between them, a huge line, a long name. */
        {
                static const char text[] = "{\"_type\": \"tag\", \"name\": \"a\", \"path\": \"src/parser.py\", \"line\": 1}\n"
                        "\0\0garbage\n"
                        "{\"_type\": \"tag\", \"name\": \"b\", \"path\": \"src/parser.py\", \"line\": 2}";
                Outline o = {};
                CHECK(outline_parse(text, sizeof(text) - 1, files, &o) == 0 && o.n == 2 && o.skipped == 1,
                      "a line with NUL bytes is skipped, the others kept (%zu kept, %zu skipped)", o.n, o.skipped);
                outline_done(&o);
        }
        {
                size_t n = OUTLINE_LINE_MAX + 100;
                char *huge = malloc(n + 1);
                Outline o = {};
                int l = snprintf(huge, n + 1, "{\"_type\": \"tag\", \"path\": \"src/parser.py\", \"line\": 1, \"name\": \"");
                memset(huge + l, 'x', n - (size_t) l - 2);
                memcpy(huge + n - 2, "\"}", 2);
                huge[n] = '\0';
                CHECK(outline_parse(huge, n, files, &o) == 0 && o.n == 0 && o.skipped == 1,
                      "a line longer than OUTLINE_LINE_MAX is skipped unread");
                outline_done(&o);

                /* Within the line bound, the name is shortened on a character. */
                n = 2000;
                l = snprintf(huge, n + 1, "{\"_type\": \"tag\", \"path\": \"src/parser.py\", \"line\": 1, \"name\": \"");
                for (size_t i = (size_t) l; i + 2 + 2 <= n; i += 2)
                        memcpy(huge + i, "\xc3\xa9", 2);   /* é */
                n = (size_t) l + ((n - (size_t) l - 2) / 2) * 2;
                memcpy(huge + n - 2, "\"}", 2);
                huge[n] = '\0';
                CHECK(outline_parse(huge, n, files, &o) == 0 && o.n == 1 &&
                      strlen(o.symbols[0].name) <= OUTLINE_NAME_MAX + strlen("…") &&
                      has(o.symbols[0].name, "é…") && !has(o.symbols[0].name, "\xc3…"),
                      "a long name is cut at %u bytes on a character, with …", OUTLINE_NAME_MAX);
                outline_done(&o);
                free(huge);
        }
        {
                /* More tags than kept: counted, not kept. */
                char line[128];
                char *text = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&text, &size);
                Outline o = {};
                for (unsigned i = 0; i < OUTLINE_SYMBOLS_MAX + 10; i++) {
                        (void) snprintf(line, sizeof(line),
                                        "{\"_type\": \"tag\", \"name\": \"s%u\", \"path\": \"src/parser.py\", \"line\": %u}\n",
                                        i, i + 1);
                        fputs(line, f);
                }
                fclose(f);
                CHECK(outline_parse(text, size, files, &o) == 0 && o.n == OUTLINE_SYMBOLS_MAX && o.dropped == 10,
                      "symbols are bounded: %zu kept, %zu dropped", o.n, o.dropped);
                outline_done(&o);
                free(text);
        }
}

static void test_format(void) {
        static const char out[] =
                "{\"_type\": \"tag\", \"name\": \"Parser\", \"path\": \"src/parser.py\", \"line\": 1, \"kind\": \"class\"}\n"
                "{\"_type\": \"tag\", \"name\": \"feed\", \"path\": \"src/parser.py\", \"line\": 4, \"kind\": \"member\", \"scope\": \"Parser\"}\n"
                "{\"_type\": \"tag\", \"name\": \"main\", \"path\": \"src/cli.py\", \"line\": 2, \"kind\": \"function\", \"signature\": \"(argv)\"}\n";
        char *files[] = { (char *) "src/parser.py", (char *) "src/empty.py", (char *) "src/cli.py", NULL };
        Outline o = {};
        char *t = NULL;

        CHECK(outline_parse(out, sizeof(out) - 1, files, &o) == 0 && o.n == 3, "three symbols");
        CHECK(outline_format(&o, files, 4096, &t) == 0 &&
              streq(t, "src/parser.py:\n  class Parser (line 1)\n    member feed (line 4)\nsrc/cli.py:\n  function main(argv) (line 2)\n"),
              "per file in the order given, nested by scope, files without symbols left out:\n%s", t);
        free(t);
        outline_done(&o);

        o = (Outline) {};
        t = NULL;
        CHECK(outline_format(&o, files, 4096, &t) == 0 && !t, "no symbols: no outline");

        /* Many symbols in several files: the budget holds, each file has
         * its share, and what is left out is counted. */
        {
                char *text = NULL, line[160];
                size_t size = 0;
                FILE *f = open_memstream(&text, &size);
                char *many[] = { (char *) "a.c", (char *) "b.c", (char *) "c.c", NULL };
                for (unsigned i = 0; i < 300; i++) {
                        (void) snprintf(line, sizeof(line),
                                        "{\"_type\": \"tag\", \"name\": \"function_number_%u\", \"path\": \"%s\", \"line\": %u, \"kind\": \"function\"}\n",
                                        i, many[i % 3], i + 1);
                        fputs(line, f);
                }
                fclose(f);
                CHECK(outline_parse(text, size, many, &o) == 0 && o.n == 300, "300 symbols");
                for (size_t max = 40; max <= 4096; max = max * 3 / 2) {
                        t = NULL;
                        int r = outline_format(&o, many, max, &t);
                        CHECK(r == 0 && (!t || strlen(t) <= max), "budget %zu: %zu bytes", max, t ? strlen(t) : 0);
                        free(t);
                }
                t = NULL;
                CHECK(outline_format(&o, many, 1500, &t) == 0 && has(t, "a.c:\n") && has(t, "b.c:\n") &&
                      has(t, "c.c:\n") && has(t, "function_number_2 ") && has(t, "  … 89 more\n") && has(t, "  … 88 more\n"),
                      "at 1500 bytes every file has its share, cut with \"… N more\":\n%s", t);
                free(t);
                t = NULL;
                CHECK(outline_format(&o, many, 120, &t) == 0 && has(t, "a.c:\n  function function_number_0 (line 1)\n") &&
                      has(t, "… 2 more files\n") &&
                      strlen(t) <= 120, "a tiny budget shows what it can and counts the files left out:\n%s", t);
                free(t);
                outline_done(&o);
                free(text);
        }
}

/* The real ctags on real files, when it is installed: its output reads as
 * the parser expects. (In the daemon it runs in the sandbox; here the
 * command line is the same.) */
static void test_real_ctags(void) {
        char *files[] = { (char *) "src/parser.py", NULL }, **argv = NULL, *cmd = NULL, *text = NULL, *t = NULL;
        char buf[4096];
        size_t size = 0;
        Outline o = {};
        FILE *p, *m;

        if (system("command -v ctags >/dev/null 2>&1") != 0) {
                SKIP("ctags is not installed");
                return;
        }
        put("src/parser.py", "class Parser:\n    def feed(self, data):\n        pass\n\ndef parse(text):\n    return 1\n");
        if (outline_ctags_argv(files, &argv) < 0)
                abort();
        cmd = strv_join(argv, " ");
        char *full = NULL;
        if (!cmd || asprintf(&full, "cd '%s' && %s 2>/dev/null", root, cmd) < 0)
                abort();
        p = popen(full, "r");
        m = open_memstream(&text, &size);
        for (size_t k; p && (k = fread(buf, 1, sizeof(buf), p)) > 0;)
                fwrite(buf, 1, k, m);
        if (p)
                pclose(p);
        fclose(m);
        CHECK(outline_parse(text, size, files, &o) == 0 && o.n == 3 && o.skipped == 0, "ctags' JSON: %zu tags", o.n);
        CHECK(outline_format(&o, files, 4096, &t) == 0 &&
              streq(t, "src/parser.py:\n  class Parser (line 1)\n    member feed(self, data) (line 2)\n"
                    "  function parse(text) (line 5)\n"),
              "as the model sees it:\n%s", t);
        free(t);
        outline_done(&o);
        free(text);
        free(full);
        free(cmd);
        strv_free(argv);
}

static void test_budget(void) {
        CHECK_UINT_EQ(outline_budget_bytes(32768, 4000), 2048u * 4, "a sixteenth of 32k tokens, at 4 bytes a token");
        CHECK_UINT_EQ(outline_budget_bytes(1000000, 4000), OUTLINE_TOKENS_MAX * 4u, "bounded above");
        CHECK_UINT_EQ(outline_budget_bytes(2048, 3000), OUTLINE_TOKENS_MIN * 3u, "bounded below");
        CHECK_UINT_EQ(outline_budget_bytes(0, 4000), OUTLINE_TOKENS_DEFAULT * 4u, "no window known: the default");
}

int main(void) {
        if (!mkdtemp(root))
                return 1;
        test_rank();
        test_pick();
        test_argv();
        test_parse();
        test_format();
        test_real_ctags();
        test_budget();
        {
                char cmd[128];
                (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
                (void) system(cmd);
        }
        return tap_done();
}
