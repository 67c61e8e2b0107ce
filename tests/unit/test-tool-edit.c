/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* edit_file's tolerant matching and apply_patch: models copy text back
 * with drifted whitespace, tabs for spaces, shifted indentation, straight
 * quotes for curly ones, LF for CRLF and read_file's line prefixes; each
 * miss costs a step. These tables pin down which drift is forgiven, what
 * the file looks like afterwards (the file's own style kept), and that
 * ambiguity and a bad patch still change nothing. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "patch.h"
#include "string-util.h"
#include "tap.h"
#include "text-match.h"
#include "tools.h"

static char top[] = "/tmp/test-tool-edit-XXXXXX";
static int ws_fd = -EBADF;

/* Messages of checks stay on one TAP line (tap.h escapes line breaks). */
static bool contains(const char *s, const char *needle) {
        return s && strstr(s, needle);
}

static void put(const char *path, const char *content) {
        int fd = openat(ws_fd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t) strlen(content)) {
                perror(path);
                exit(2);
        }
        close(fd);
}

static char *get(const char *path) {
        char *s = NULL;
        if (read_file_at(ws_fd, path, 1 << 20, &s, NULL) < 0)
                return NULL;
        return s;
}

/* ---- edit_file's matching, in memory ---- */

typedef struct EditCase {
        const char *name, *file, *old, *new;
        bool replace_all;
        int error;              /* expected return */
        const char *result;     /* the file afterwards (on success) */
        MatchRule rule;
        const char *message;    /* a part of the error message, or NULL */
        const char *message2;
} EditCase;

static const EditCase edit_cases[] = {
        /* Exact, as before: partial lines, overlapping occurrences count. */
        { "exact", "alpha\nbeta\ngamma\n", "beta", "B", false, 0, "alpha\nB\ngamma\n", MATCH_EXACT, NULL, NULL },
        { "exact within a line", "return a - b;\n", "a - b", "a + b", false, 0, "return a + b;\n", MATCH_EXACT, NULL, NULL },
        { "exact deletes a whole line", "a\nb\nc\n", "b\n", "", false, 0, "a\nc\n", MATCH_EXACT, NULL, NULL },

        /* Trailing whitespace, on either side; the context line stays the file's. */
        { "trailing spaces in the file", "int x = 1;   \nint y = 2;\t\n", "int x = 1;\nint y = 2;\n",
          "int x = 10;\nint y = 2;\n", false, 0, "int x = 10;\nint y = 2;\t\n", MATCH_TRAILING_WHITESPACE, NULL, NULL },
        { "trailing spaces in old_text", "a\nb\n", "a  \nb\n", "a\nc\n", false, 0, "a\nc\n",
          MATCH_TRAILING_WHITESPACE, NULL, NULL },
        { "a line deleted despite trailing spaces", "a\nb\nc\n", "b  \n", "", false, 0, "a\nc\n",
          MATCH_TRAILING_WHITESPACE, NULL, NULL },
        { "the last line without its line ending", "a\nb", "b \n", "c\n", false, 0, "a\nc",
          MATCH_TRAILING_WHITESPACE, NULL, NULL },

        /* Indentation: spaces for tabs, shifted, dropped; new_text re-indented. */
        { "spaces for tabs", "if (x) {\n\tfoo();\n\tbar();\n}\n", "if (x) {\n    foo();\n    bar();\n}\n",
          "if (x) {\n    foo();\n    baz();\n    bar();\n}\n", false, 0, "if (x) {\n\tfoo();\n\tbaz();\n\tbar();\n}\n",
          MATCH_INDENTATION, NULL, NULL },
        { "dedented against tabs, a new level deeper", "\tif (x) {\n\t\tfoo();\n\t}\n", "if (x) {\n    foo();\n}",
          "if (x) {\n    foo();\n    if (y) {\n        bar();\n    }\n}", false, 0,
          "\tif (x) {\n\t\tfoo();\n\t\tif (y) {\n\t\t\tbar();\n\t\t}\n\t}\n", MATCH_INDENTATION, NULL, NULL },
        { "dedented against spaces", "class A:\n    def f(self):\n        return 1\n", "def f(self):\n    return 1\n",
          "def f(self):\n    return 2\n", false, 0, "class A:\n    def f(self):\n        return 2\n", MATCH_INDENTATION, NULL, NULL },
        { "two spaces for four", "def f():\n    if x:\n        y()\n", "def f():\n  if x:\n    y()\n",
          "def f():\n  if x:\n    y()\n    z()\n", false, 0, "def f():\n    if x:\n        y()\n        z()\n",
          MATCH_INDENTATION, NULL, NULL },
        { "a blank line in new_text stays blank", "\tx();\n", "x();  ", "x();\n\ny();", false, 0, "\tx();\n\n\ty();\n",
          MATCH_INDENTATION, NULL, NULL },

        /* Quotes, dashes and Unicode spaces. */
        { "curly quotes and an en dash", "msg = \u201chello\u201d \u2013 world\n", "msg = \"hello\" - world",
          "msg = \"bye\"", false, 0, "msg = \"bye\"\n", MATCH_PUNCTUATION, NULL, NULL },
        { "a no-break space", "a\u00a0= 1\n", "a = 1\n", "a = 2\n", false, 0, "a = 2\n", MATCH_PUNCTUATION, NULL, NULL },
        { "curly single quotes in old_text", "it's\n", "it\u2019s", "it is", false, 0, "it is\n", MATCH_PUNCTUATION, NULL, NULL },

        /* CRLF files: matched whatever the endings, and kept. */
        { "LF old_text in a CRLF file", "one\r\ntwo\r\nthree\r\n", "one\ntwo\n", "uno\ndos\n", false, 0,
          "uno\r\ndos\r\nthree\r\n", MATCH_LINE_ENDINGS, NULL, NULL },
        { "part of lines in a CRLF file", "ab\r\ncd\r\n", "b\ncd", "X\nY", false, 0, "aX\r\nY\r\n", MATCH_LINE_ENDINGS, NULL, NULL },
        { "CRLF and trailing spaces", "x = 1  \r\ny = 2\r\n", "x = 1\ny = 2\n", "x = 3\ny = 2\n", false, 0,
          "x = 3\r\ny = 2\r\n", MATCH_TRAILING_WHITESPACE, NULL, NULL },
        { "an exact match in a CRLF file takes CRLF", "a\r\nb\r\n", "b", "b\nc", false, 0, "a\r\nb\r\nc\r\n", MATCH_EXACT, NULL, NULL },
        { "CRLF old_text in an LF file", "one\ntwo\n", "one\r\ntwo\r\n", "1\r\n2\r\n", false, 0, "1\n2\n",
          MATCH_LINE_ENDINGS, NULL, NULL },

        /* read_file's prefixes. */
        { "copied prefixes", "def add(a, b):\n    return a - b\n", "   1| def add(a, b):\n   2|     return a - b",
          "   1| def add(a, b):\n   2|     return a + b", false, 0, "def add(a, b):\n    return a + b\n", MATCH_EXACT, NULL, NULL },
        { "copied prefixes and trailing spaces", "x\n    return a - b\n", "   2|     return a - b  ",
          "    return a + b", false, 0, "x\n    return a + b\n", MATCH_TRAILING_WHITESPACE, NULL, NULL },
        { "an inserted line without a prefix", "a\nb\n", "  1| a\n  2| b\n", "  1| a\nNEW\n  2| b\n", false, 0,
          "a\nNEW\nb\n", MATCH_EXACT, NULL, NULL },
        { "the prefixes' number picks among several", "x\ny\nx\ny\n", "   3| x\n   4| y", "   3| z", false, 0,
          "x\ny\nz\n", MATCH_EXACT, NULL, NULL },
        { "numbers that do not count up are no prefixes", "a\nb\n", "  1| a\n  5| b", "c", false, -ENODATA, NULL,
          MATCH_EXACT, "not found", NULL },
        { "a file that holds such lines is matched as it is", "  1| a\n", "  1| a", "  1| b", false, 0, "  1| b\n",
          MATCH_EXACT, NULL, NULL },

        /* Ambiguity still refuses, under the rule that matched, saying where. */
        { "twice exactly", "alpha\nbeta\ngamma\nbeta\n", "beta", "B", false, -ENOTUNIQ, NULL, MATCH_EXACT,
          "2 times", "lines 2, 4" },
        { "overlapping", "aaa\n", "aa", "b", false, -ENOTUNIQ, NULL, MATCH_EXACT, "2 times", NULL },
        { "twice when indentation is ignored", "  foo\n  bar\n    foo\n    bar\n", "foo\nbar", "x", false, -ENOTUNIQ, NULL,
          MATCH_EXACT, "ignoring indentation", "lines 1, 3" },

        /* Not found: the nearest lines, numbered, and the first difference. */
        { "the nearest lines", "import os\n\ndef add(a, b):\n    total = a - b\n    return total\n\nprint(add(1, 2))\n",
          "def add(a, b):\n    totl = a - b\n    return total\n", "x", false, -ENODATA, NULL, MATCH_EXACT,
          "   3| def add(a, b)", "line 4 of the file is '    total = a - b' where yours is '    totl = a - b'" },
        { "nothing resembles it", "alpha\nbeta\n", "zzzz qqqq wwww", "x", false, -ENODATA, NULL, MATCH_EXACT,
          "Nothing in the file resembles it", NULL },

        /* replace_all: every exact occurrence, counted. */
        { "replace_all", "foo bar foo\nbaz foo\n", "foo", "qux", true, 0, "qux bar qux\nbaz qux\n", MATCH_EXACT, NULL, NULL },
        { "replace_all is exact only", "  foo\n", "foo  ", "x", true, -ENODATA, NULL, MATCH_EXACT, "replace_all", NULL },

        /* Bounds. */
        { "growing past the limit", "abc\n", "b", "0123456789012345678901234567890123456789012345678901234567890123456789"
          "0123456789012345678901234567890123456789", false, -EFBIG, NULL,
          MATCH_EXACT, "would become", NULL },
};

static void test_edit_table(void) {
        for (size_t i = 0; i < ELEMENTSOF(edit_cases); i++) {
                const EditCase *c = &edit_cases[i];
                _cleanup_free_ char *error = NULL;
                TextEdit e = {};
                int r;

                r = text_edit(c->file, strlen(c->file), c->old, c->new, c->replace_all, 100, "'f'", &e, &error);
                CHECK_ERRNO(r, c->error, "%s: %s", c->name, strempty(error));
                if (r >= 0 && c->error == 0) {
                        CHECK_STR_EQ(e.text, c->result, "%s: the file afterwards", c->name);
                        if (!c->replace_all)
                                CHECK_STR_EQ(match_rule_to_string(e.rule), match_rule_to_string(c->rule),
                                             "%s: the rule that matched", c->name);
                }
                if (c->message)
                        CHECK(contains(error, c->message), "%s: the message says '%s': %s", c->name, c->message,
                              strempty(error));
                if (c->message2)
                        CHECK(contains(error, c->message2), "%s: the message says '%s': %s", c->name, c->message2,
                              strempty(error));
                text_edit_done(&e);
        }
}

static void test_edit_details(void) {
        _cleanup_free_ char *error = NULL;
        TextEdit e = {};
        int r;

        /* What the result says: where, how many, and that prefixes went. */
        r = text_edit("x\ny\nz\n", 6, "  2| y", "  2| Y", false, 1024, "'f'", &e, &error);
        CHECK(r == 0 && e.numbers_stripped && e.line == 2 && e.old_lines == 1 && e.new_lines == 1,
              "prefixes stripped, the change at line %u", e.line);
        text_edit_done(&e);

        r = text_edit("a\nfoo\nb\nfoo\nfoo\n", 16, "foo", "bar", true, 1024, "'f'", &e, &error);
        CHECK(r == 0 && e.count == 3 && streq_ptr(e.lines, "2, 4, 5") && e.line == 2,
              "replace_all counts 3 at lines '%s'", strempty(e.lines));
        text_edit_done(&e);

        /* An ambiguous exact match, listed at most eight times. */
        r = text_edit("x\nx\nx\nx\nx\nx\nx\nx\nx\nx\n", 20, "x", "y", false, 1024, "'f'", &e, &error);
        CHECK(r == -ENOTUNIQ && contains(error, "10 times") && contains(error, "8, ...") && contains(error, "replace_all"),
              "many matches: %s", strempty(error));
        free(error);
        error = NULL;

        /* The snippet around a change, numbered as read_file numbers. */
        _cleanup_(buf_done) Buf b = {};
        const char *text = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
        CHECK(text_snippet(text, strlen(text), 5, 5, 2, 16, &b) == 0 && streq_ptr(b.s, "   3| 3\n   4| 4\n   5| 5\n   6| 6\n   7| 7\n"),
              "a snippet with two lines of context: %s", strempty(b.s));
        buf_done(&b);
        CHECK(text_snippet(text, strlen(text), 1, 10, 2, 4, &b) == 0 && contains(b.s, "   2| 2\n[... 6 lines ...]\n   9| 9\n"),
              "a long change's middle cut: %s", strempty(b.s));

        /* Prefix stripping itself. */
        char *s = NULL;
        unsigned first = 0;
        CHECK(text_strip_line_numbers("  12| a\n  13| \n  14| \tb\n", true, &s, &first) == 1 && streq_ptr(s, "a\n\n\tb\n") &&
              first == 12, "prefixes off: '%s' from %u", strempty(s), first);
        free(s);
        s = NULL;
        CHECK(text_strip_line_numbers("  12| a\nb\n", true, &s, &first) == 0 && !s, "a line without one: nothing stripped");
        CHECK(text_strip_line_numbers("a|b\n", true, &s, &first) == 0, "'a|b' is no prefix");
}

/* A second search in the same text goes by an index of the lines'
 * hashes instead of rolling over them: both must find the same. */
static void test_find_twice(void) {
        static const char *const hay = "a\n}\n\n  b\n}\nc\n}\n\n  b\n}\na\n}\n";
        static const char *const needles[] = { "}\n", "b\n}\n", "\n  b\n", "a\n}\n", "}\nc\n}\n\n", "x\n", "}\na\n}\n" };
        bool same = true;

        for (MatchRule rule = MATCH_EXACT; rule < _MATCH_RULE_MAX; rule++)
                for (size_t i = 0; i < ELEMENTSOF(needles); i++)
                        for (size_t from = 0; from < 12; from += 5) {
                                _cleanup_(text_lines_done) TextLines h = {}, n = {};
                                BlockFound a, b, c;
                                if (text_lines_split(hay, strlen(hay), &h) < 0 ||
                                    text_lines_split(needles[i], strlen(needles[i]), &n) < 0)
                                        exit(2);
                                (void) text_find_block(&h, &n, rule, from, false, &a);
                                (void) text_find_block(&h, &n, rule, from, false, &b);
                                (void) text_find_block(&h, &n, rule, from, true, &c);
                                if (a.n != b.n || a.more != b.more || memcmp(a.at, b.at, a.n * sizeof(size_t)) != 0 ||
                                    c.n > 1 || (c.n == 1 && (a.n == 0 || c.at[0] != a.at[a.n - 1]))) {
                                        printf("# rule %s, needle %zu, from %zu: %zu then %zu matches, %zu at the end\n",
                                               match_rule_to_string(rule), i, from, a.n, b.n, c.n);
                                        same = false;
                                }
                        }
        CHECK(same, "the rolling search and the indexed one find the same blocks");
}

/* ---- The patch parser ---- */

typedef struct ParseCase {
        const char *name, *patch;
        int error;
        PatchFormat format;
        size_t n_files;
        const char *message;
} ParseCase;

static const ParseCase parse_cases[] = {
        { "Codex", "*** Begin Patch\n*** Update File: a.c\n@@\n-x\n+y\n*** Add File: b.c\n+hi\n*** Delete File: c.c\n"
          "*** End Patch\n", 0, PATCH_FORMAT_CODEX, 3, NULL },
        { "Codex in a fence, with a here-document", "```\napply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: c.c\n"
          "*** End Patch\nEOF\n```\n", 0, PATCH_FORMAT_CODEX, 1, NULL },
        { "unified", "diff --git a/a.c b/a.c\nindex 1..2 100644\n--- a/a.c\n+++ b/a.c\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"
          "--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+new\n", 0, PATCH_FORMAT_UNIFIED, 2, NULL },
        { "a git rename without hunks", "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n", 0,
          PATCH_FORMAT_UNIFIED, 1, NULL },
        { "not a patch", "please change a.c\n", -EINVAL, _PATCH_FORMAT_INVALID, 0, "not a patch" },
        { "a Codex hunk line without its marker", "*** Begin Patch\n*** Update File: a.c\n@@\n x\nnope\n*** End Patch\n",
          -EINVAL, _PATCH_FORMAT_INVALID, 0, "patch line 5: unexpected line" },
        { "an update without hunks", "*** Begin Patch\n*** Update File: a.c\n*** End Patch\n", -EINVAL,
          _PATCH_FORMAT_INVALID, 0, "without a hunk" },
        { "an added line without '+'", "*** Begin Patch\n*** Add File: a.c\nx\n*** End Patch\n", -EINVAL,
          _PATCH_FORMAT_INVALID, 0, "does not start with '+'" },
        { "a path missing", "*** Begin Patch\n*** Delete File:   \n*** End Patch\n", -EINVAL, _PATCH_FORMAT_INVALID, 0,
          "without a path" },
        { "a hunk without file headers", "@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n", -EINVAL, _PATCH_FORMAT_INVALID, 0,
          "'--- a/PATH'" },
        { "binary", "diff --git a/x b/x\nGIT binary patch\nliteral 0\n", -EINVAL, _PATCH_FORMAT_INVALID, 0, "binary" },
        { "no file", "*** Begin Patch\n*** End Patch\n", -EINVAL, _PATCH_FORMAT_INVALID, 0, "changes no file" },
};

static void test_parse_table(void) {
        for (size_t i = 0; i < ELEMENTSOF(parse_cases); i++) {
                const ParseCase *c = &parse_cases[i];
                _cleanup_free_ char *error = NULL;
                _cleanup_(patch_done) Patch p = {};
                int r;

                r = patch_parse(c->patch, &p, &error);
                CHECK_ERRNO(r, c->error, "%s: %s", c->name, strempty(error));
                if (r >= 0)
                        CHECK(p.format == c->format && p.n_files == c->n_files, "%s: %s, %zu files", c->name,
                              strempty(patch_format_to_string(p.format)), p.n_files);
                if (c->message)
                        CHECK(contains(error, c->message), "%s: the message says '%s': %s", c->name, c->message,
                              strempty(error));
        }
}

static void test_parse_details(void) {
        _cleanup_(patch_done) Patch p = {};
        _cleanup_free_ char *error = NULL;

        /* Paths as git writes them; the moves and the content of an add. */
        CHECK(patch_parse("--- \"a/with space.c\"\t2024-01-01\n+++ \"b/with space.c\"\n@@ -3,1 +3,1 @@\n-a\n+b\n",
                          &p, &error) == 0 && p.n_files == 1 && streq(p.files[0].path, "with space.c") &&
              !p.files[0].move_to && p.files[0].hunks[0].has_start && p.files[0].hunks[0].old_start == 3,
              "quoted path, a timestamp, the hunk's start: %s", strempty(error));
        patch_done(&p);
        CHECK(patch_parse("*** Begin Patch\n*** Update File: a.c\n*** Move to: b.c\n@@ class A\n@@ def f\n x\n-y\n+z\n"
                          "*** End of File\n*** End Patch\n", &p, &error) == 0 &&
              streq(p.files[0].move_to, "b.c") && p.files[0].hunks[0].n_anchors == 2 &&
              streq(p.files[0].hunks[0].anchors[1], "def f") && p.files[0].hunks[0].at_end,
              "a move, two '@@' lines, the end of the file");
        patch_done(&p);
        CHECK(patch_parse("*** Begin Patch\n*** Add File: n.txt\n+one\n+\n+two\n\n*** End Patch\n", &p, &error) == 0 &&
              streq(p.files[0].content, "one\n\ntwo\n"), "an added file's content: '%s'",
              p.n_files ? p.files[0].content : "");
        patch_done(&p);
        CHECK(patch_parse("--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n\\ No newline at end of file\n",
                          &p, &error) == 0 && p.files[0].op == PATCH_OP_ADD && streq(p.files[0].content, "one\ntwo"),
              "a new file without a final newline");
        patch_done(&p);
        /* A removed line that looks like a file header, inside the counts. */
        CHECK(patch_parse("--- a/x.sql\n+++ b/x.sql\n@@ -1,2 +1,2 @@\n--- a comment\n+++ b comment\n x\n", &p, &error) == 0 &&
              p.n_files == 1 && p.files[0].n_hunks == 1 && streq(p.files[0].hunks[0].old_text, "-- a comment\nx\n"),
              "'--- ' inside a hunk's counts is a removed line");
        patch_done(&p);
        /* Miscounted: the body goes on while its lines are body lines. */
        CHECK(patch_parse("--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n a\n-b\n+c\n\n", &p, &error) == 0 &&
              streq(p.files[0].hunks[0].old_text, "a\nb\n") && streq(p.files[0].hunks[0].new_text, "a\nc\n"),
              "wrong counts tolerated, a trailing empty line dropped");
}

/* ---- apply_patch on a workspace ---- */

static int patch_tool(const char *patch, char ***ret_paths, char **ret) {
        ToolCallArgs a = { .kind = TOOL_APPLY_PATCH, .patch = (char *) patch };
        *ret = NULL;
        return tool_apply_patch(ws_fd, &a, 4096, ret_paths, ret);
}

static void test_apply(void) {
        _cleanup_strv_free_ char **paths = NULL;
        char *o = NULL, *a, *b;
        struct stat st;
        int r;

        /* Codex format, several files, drifted context: all land. */
        put("a.py", "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n");
        put("b.py", "from a import add\n\nprint(add(1, 2))\n");
        put("old.txt", "bye\n");
        r = patch_tool("*** Begin Patch\n"
                       "*** Update File: a.py\n"
                       "@@ def add(a, b):\n"
                       "-  return a - b  \n"            /* indentation and trailing spaces drifted */
                       "+  return a + b\n"
                       "*** Update File: b.py\n"
                       "@@\n"
                       " print(add(1, 2))\n"
                       "+print(add(2, 3))\n"
                       "*** Add File: new/dir/c.py\n"
                       "+X = 1\n"
                       "*** Delete File: old.txt\n"
                       "*** End Patch\n", &paths, &o);
        a = get("a.py");
        b = get("b.py");
        CHECK(r == 0 && streq_ptr(a, "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n") &&
              streq_ptr(b, "from a import add\n\nprint(add(1, 2))\nprint(add(2, 3))\n"), "Codex patch applied: %s", strempty(o));
        free(a);
        free(b);
        a = get("new/dir/c.py");
        CHECK(streq_ptr(a, "X = 1\n") && faccessat(ws_fd, "old.txt", F_OK, AT_SYMLINK_NOFOLLOW) < 0,
              "added with its parents, deleted");
        free(a);
        CHECK(contains(o, "updated 'a.py': hunk 1 at line 2 (indentation)") && contains(o, "   2|     return a + b") &&
              contains(o, "added 'new/dir/c.py' (1 line)") && contains(o, "deleted 'old.txt'"),
              "the answer says what matched how, with the lines: %s", strempty(o));
        a = strv_join(paths, " ");
        CHECK_STR_EQ(a, "a.py b.py new/dir/c.py old.txt", "every path it wrote, for the ledger");
        free(a);
        strv_free(paths);
        paths = NULL;
        free(o);

        /* A unified diff over two files, its line numbers off by some. */
        put("x.c", "int x(void) {\n        return 1;\n}\n");
        put("y.c", "int y(void) {\n        return 2;\n}\n");
        r = patch_tool("diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -7,3 +7,3 @@\n int x(void) {\n-        return 1;\n"
                       "+        return 10;\n }\ndiff --git a/y.c b/y.c\n--- a/y.c\n+++ b/y.c\n@@ -1,3 +1,3 @@ int y(void)\n"
                       " int y(void) {\n-        return 2;\n+        return 20;\n }\n", NULL, &o);
        a = get("x.c");
        b = get("y.c");
        CHECK(r == 0 && contains(a, "return 10;") && contains(b, "return 20;") && contains(o, "unified diff"),
              "unified diff applied: %s", strempty(o));
        free(a);
        free(b);
        free(o);

        /* One failing hunk: no file changes, and the model hears where. */
        put("x.c", "int x(void) {\n        return 1;\n}\n");
        put("y.c", "int y(void) {\n        return 2;\n}\n");
        r = patch_tool("*** Begin Patch\n*** Update File: x.c\n@@\n-        return 1;\n+        return 11;\n"
                       "*** Add File: z.c\n+z\n"
                       "*** Update File: y.c\n@@\n int y(void) {\n-        return 3;\n+        return 33;\n"
                       "*** Delete File: x.c\n*** End Patch\n", NULL, &o);
        CHECK_ERRNO(r, -EINVAL, "x.c named twice: %s", strempty(o));
        CHECK(contains(o, "'x.c' is named twice"), "and said: %s", strempty(o));
        free(o);
        r = patch_tool("*** Begin Patch\n*** Update File: x.c\n@@\n-        return 1;\n+        return 11;\n"
                       "*** Add File: z.c\n+z\n"
                       "*** Update File: y.c\n@@\n int y(void) {\n-        return 3;\n+        return 33;\n"
                       "*** End Patch\n", &paths, &o);
        a = get("x.c");
        b = get("y.c");
        CHECK(r == -ENODATA && streq_ptr(a, "int x(void) {\n        return 1;\n}\n") &&
              streq_ptr(b, "int y(void) {\n        return 2;\n}\n") && faccessat(ws_fd, "z.c", F_OK, 0) < 0 && !paths,
              "a failing hunk leaves every file untouched: %s", strempty(o));
        CHECK(contains(o, "nothing was changed") && contains(o, "'y.c', hunk 1 (patch line 9)") &&
              contains(o, "   2|         return 2;") && contains(o, "where yours is '        return 3;'"),
              "the failure names the file, the hunk and the nearest lines: %s", strempty(o));
        free(a);
        free(b);
        free(o);

        /* Ambiguity refuses; the line number of a unified hunk picks. */
        put("d.txt", "x\ny\nx\ny\n");
        r = patch_tool("*** Begin Patch\n*** Update File: d.txt\n@@\n x\n-y\n+Y\n*** End Patch\n", NULL, &o);
        CHECK(r == -ENOTUNIQ && contains(o, "occur 2 times (at lines 1, 3)"), "ambiguous hunk refused: %s", strempty(o));
        free(o);
        r = patch_tool("--- a/d.txt\n+++ b/d.txt\n@@ -3,2 +3,2 @@\n x\n-y\n+Y\n", NULL, &o);
        a = get("d.txt");
        CHECK(r == 0 && streq_ptr(a, "x\ny\nx\nY\n"), "the nearest to line 3: %s", strempty(o));
        free(a);
        free(o);

        /* Several hunks in one file, in its order; the last one's lines are
         * there twice after the one before, and its line number picks. */
        put("h.txt", "one\nx\ntwo\nx\nthree\nx\nfour\nx\n");
        r = patch_tool("--- a/h.txt\n+++ b/h.txt\n@@ -1,2 +1,2 @@\n one\n-x\n+X1\n@@ -3,2 +3,2 @@\n two\n-x\n+X2\n"
                       "@@ -8,1 +8,1 @@\n-x\n+X8\n", NULL, &o);
        a = get("h.txt");
        CHECK(r == 0 && streq_ptr(a, "one\nX1\ntwo\nX2\nthree\nx\nfour\nX8\n") &&
              contains(o, "hunk 1 at line 1 (exact), hunk 2 at line 3 (exact), hunk 3 at line 8 (exact)"),
              "three hunks in one file: %s", strempty(o));
        free(a);
        free(o);

        /* CRLF kept; a file without a final newline keeps lacking it. */
        put("w.txt", "one\r\ntwo\r\nthree");
        r = patch_tool("*** Begin Patch\n*** Update File: w.txt\n@@\n two\n-three\n+THREE\n+four\n*** End of File\n"
                       "*** End Patch\n", NULL, &o);
        a = get("w.txt");
        CHECK(r == 0 && streq_ptr(a, "one\r\ntwo\r\nTHREE\r\nfour"), "CRLF and no final newline kept: %s", strempty(o));
        free(a);
        free(o);

        /* A move, the mode kept. */
        put("m.sh", "echo a\n");
        fchmodat(ws_fd, "m.sh", 0755, 0);
        r = patch_tool("*** Begin Patch\n*** Update File: m.sh\n*** Move to: bin/m.sh\n@@\n-echo a\n+echo b\n"
                       "*** End Patch\n", NULL, &o);
        a = get("bin/m.sh");
        CHECK(r == 0 && streq_ptr(a, "echo b\n") && faccessat(ws_fd, "m.sh", F_OK, 0) < 0 &&
              fstatat(ws_fd, "bin/m.sh", &st, 0) == 0 && (st.st_mode & 0777) == 0755 && contains(o, "moved 'm.sh' to 'bin/m.sh'"),
              "moved and changed, still executable: %s", strempty(o));
        free(a);
        free(o);

        /* Bounds. */
        r = patch_tool("*** Begin Patch\n*** Add File: big.txt\n+0123456789\n*** End Patch\n", NULL, &o);
        CHECK(r == 0, "small add: %s", strempty(o));
        free(o);
        char *big = malloc(6000);
        strcpy(big, "*** Begin Patch\n*** Add File: huge.txt\n+");
        size_t k = strlen(big);
        memset(big + k, 'x', 5000);
        strcpy(big + k + 5000, "\n*** End Patch\n");
        r = patch_tool(big, NULL, &o);
        CHECK(r == -EFBIG && faccessat(ws_fd, "huge.txt", F_OK, 0) < 0, "a new file over the limit: %s", strempty(o));
        free(big);
        free(o);
}

typedef struct AttackCase {
        const char *name, *patch, *message;
        int error;
} AttackCase;

/* SECURITY: a patch reaches no further than the other file tools. */
static const AttackCase attacks[] = {
        { "'..'", "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch\n", "escapes the workspace", -EXDEV },
        { "absolute", "*** Begin Patch\n*** Add File: /tmp/abs.txt\n+x\n*** End Patch\n", "absolute", -EXDEV },
        { ".git", "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+x\n*** End Patch\n", ".git", -EPERM },
        { "a symlink out", "*** Begin Patch\n*** Add File: out-dir/evil.txt\n+x\n*** End Patch\n", "escapes", -EXDEV },
        { "through a symlink", "*** Begin Patch\n*** Update File: alias\n@@\n-a\n+b\n*** End Patch\n", "symlink", -ELOOP },
        { "deleting a symlink", "*** Begin Patch\n*** Delete File: alias\n*** End Patch\n", "symlink", -ELOOP },
        { "a move out", "*** Begin Patch\n*** Update File: t.txt\n*** Move to: ../moved.txt\n*** End Patch\n",
          "escapes", -EXDEV },
        { "a unified diff out", "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-root\n+toor\n",
          "escapes", -EXDEV },
        { "a directory", "*** Begin Patch\n*** Delete File: dir\n*** End Patch\n", "directory", -EISDIR },
        { "the top", "*** Begin Patch\n*** Delete File: .\n*** End Patch\n", "directory", -EISDIR },
        { "a missing file", "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch\n", "no such file",
          -ENOENT },
        { "a binary file", "*** Begin Patch\n*** Update File: bin.dat\n@@\n-a\n+b\n*** End Patch\n", "binary",
          -EMEDIUMTYPE },
        { "parents through a file", "*** Begin Patch\n*** Add File: t.txt/sub/x\n+x\n*** End Patch\n",
          "not a directory", -ENOTDIR },
};

static void test_attacks(void) {
        char p[PATH_MAX];
        int fd;

        snprintf(p, sizeof(p), "%s/outside", top);
        mkdir(p, 0755);
        symlinkat("../outside", ws_fd, "out-dir");
        put("t.txt", "a\n");
        symlinkat("t.txt", ws_fd, "alias");
        mkdirat(ws_fd, "dir", 0755);
        mkdirat(ws_fd, ".git", 0755);
        fd = openat(ws_fd, "bin.dat", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        (void) !write(fd, "a\0b\n", 4);
        close(fd);

        for (size_t i = 0; i < ELEMENTSOF(attacks); i++) {
                _cleanup_strv_free_ char **paths = NULL;
                _cleanup_free_ char *o = NULL, *t = NULL;
                int r;

                /* Each attack comes with an honest change, which must not land either. */
                _cleanup_free_ char *patch = NULL;
                if (attacks[i].patch[0] == '*')
                        (void) asprintf(&patch, "*** Begin Patch\n*** Add File: honest.txt\n+ok\n%s",
                                        attacks[i].patch + strlen("*** Begin Patch\n"));
                else
                        patch = strdup(attacks[i].patch);
                r = patch_tool(patch, &paths, &o);
                CHECK_ERRNO(r, attacks[i].error, "%s refused: %s", attacks[i].name, strempty(o));
                CHECK(contains(o, attacks[i].message) && contains(o, "nothing was changed") && !paths,
                      "%s: the reason: %s", attacks[i].name, strempty(o));
                t = get("t.txt");
                CHECK(streq_ptr(t, "a\n") && faccessat(ws_fd, "honest.txt", F_OK, 0) < 0,
                      "%s: nothing in the workspace changed", attacks[i].name);
        }
        snprintf(p, sizeof(p), "%s/outside/evil.txt", top);
        CHECK(access(p, F_OK) < 0 && faccessat(ws_fd, ".git/hooks", F_OK, 0) < 0 && access("/tmp/abs.txt", F_OK) < 0,
              "nothing written outside or into .git");
}

/* ---- The calls' arguments and schema ---- */

static void test_call(void) {
        _cleanup_json_ json_object *schema = tools_schema();
        ToolCallArgs a;
        char *e = NULL;
        bool found = false;

        CHECK(tool_call_parse("apply_patch", "{\"patch\": \"*** Begin Patch\"}", &a, &e) == 0 &&
              a.kind == TOOL_APPLY_PATCH && streq_ptr(a.patch, "*** Begin Patch"), "apply_patch parsed");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("apply_patch", "{}", &a, &e) == -EINVAL && contains(e, "'patch' is required"),
              "a patch is required: %s", strempty(e));
        free(e);
        e = NULL;
        CHECK(tool_call_parse("apply_patch", "{\"input\": \"x\"}", &a, &e) == -EINVAL &&
              contains(e, "unknown argument 'input'") && contains(e, "patch"), "an unknown key names 'patch': %s",
              strempty(e));
        free(e);
        e = NULL;
        CHECK(tool_call_parse("edit_file", "{\"path\": \"a\", \"old_text\": \"x\", \"new_text\": \"y\", "
                              "\"replace_all\": true}", &a, &e) == 0 && a.replace_all, "replace_all parsed");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("edit_file", "{\"path\": \"a\", \"old_text\": \"x\", \"new_text\": \"y\", "
                              "\"replace_all\": 2}", &a, &e) == -EINVAL && contains(e, "true or false"),
              "replace_all is a boolean: %s", strempty(e));
        free(e);
        e = NULL;
        CHECK(tool_call_parse("apply_pach", "{}", &a, &e) == -EINVAL && contains(e, "apply_patch"),
              "the list of tools names apply_patch: %s", strempty(e));
        free(e);

        for (size_t i = 0; schema && i < json_object_array_length(schema); i++) {
                json_object *f, *params, *req;
                const char *name = NULL;
                if (json_object_object_get_ex(json_object_array_get_idx(schema, i), "function", &f) &&
                    json_get_string(f, "name", &name) >= 0 && streq(name, "apply_patch") &&
                    json_object_object_get_ex(f, "parameters", &params) &&
                    json_object_object_get_ex(params, "required", &req) && json_object_array_length(req) == 1 &&
                    streq(json_object_get_string(json_object_array_get_idx(req, 0)), "patch"))
                        found = true;
        }
        CHECK(found, "the schema offers apply_patch, which requires 'patch'");
}

/* ---- edit_file through the tool ---- */

static void test_edit_tool(void) {
        ToolCallArgs a = { .kind = TOOL_EDIT_FILE, .path = (char *) "e.py" };
        char *o = NULL, *c;
        int r;

        put("e.py", "def f():\r\n\tif x:\r\n\t\treturn 1\r\n");
        a.old_text = (char *) "   2|     if x:\n   3|         return 1  \n";
        a.new_text = (char *) "   2|     if x:\n   3|         return 2\n";
        r = tool_edit_file(ws_fd, &a, 4096, &o);
        c = get("e.py");
        CHECK(r == 0 && streq_ptr(c, "def f():\r\n\tif x:\r\n\t\treturn 2\r\n"),
              "prefixes, spaces for tabs, trailing spaces and LF for CRLF at once: %s", strempty(o));
        CHECK(contains(o, "edited 'e.py' (matched ignoring indentation") && contains(o, "read_file line numbers") &&
              contains(o, "at line 2") && contains(o, "   3| \t\treturn 2"), "the answer: %s", strempty(o));
        free(c);
        free(o);

        a.old_text = (char *) "\treturn";
        a.new_text = (char *) "\tyield";
        a.replace_all = true;
        put("e.py", "def f():\n\treturn 1\ndef g():\n\treturn 2\n");
        r = tool_edit_file(ws_fd, &a, 4096, &o);
        c = get("e.py");
        CHECK(r == 0 && streq_ptr(c, "def f():\n\tyield 1\ndef g():\n\tyield 2\n") &&
              contains(o, "replaced 2 occurrences (at lines 2, 4)"), "replace_all: %s", strempty(o));
        free(c);
        free(o);
}

int main(void) {
        if (!mkdtemp(top))
                exit(2);
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/ws", top);
        mkdir(p, 0755);
        ws_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ws_fd < 0)
                exit(2);

        test_edit_table();
        test_edit_details();
        test_find_twice();
        test_parse_table();
        test_parse_details();
        test_apply();
        test_attacks();
        test_call();
        test_edit_tool();

        close(ws_fd);
        rm_rf_at(AT_FDCWD, top);
        return tap_done();
}
