/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "checker-output.h"
#include "string-util.h"
#include "tap.h"

static const ReviewLine a_lines[] = { { 3, "x", 1 }, { 4, "y", 1 }, { 10, "z", 1 } };
static const ReviewLine b_lines[] = { { 1, "#!/bin/sh", 9 }, { 2, "echo $1", 7 } };
static const ReviewFile changed[] = {
        { "src/a.c", a_lines, ELEMENTSOF(a_lines) },
        { "scripts/run.sh", b_lines, ELEMENTSOF(b_lines) },
};

static void test_paths(void) {
        /* Every way a tool names a workspace file comes to the ledger's form. */
        static const struct { const char *in, *out; } t[] = {
                { "src/a.c", "src/a.c" },
                { "./src/a.c", "src/a.c" },
                { "/workspace/src/a.c", "src/a.c" },
                { "file:///workspace/src/a.c", "src/a.c" },
                { "file://localhost/workspace/src/a%2Ec", "src/a.c" },
                { "src//./a.c", "src/a.c" },
                { "../etc/passwd", NULL },
                { "src/../../x", NULL },
                { "/etc/passwd", NULL },
                { "file://evil.example/workspace/a.c", NULL },
                { "", NULL },
                { "a\nb", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_free_ char *p = review_path_normalize(t[i].in, strlen(t[i].in));
                CHECK(streq_ptr(p, t[i].out), "path %zu -> '%s'", i, strempty(p));
        }
        CHECK(review_files_line_changed(changed, ELEMENTSOF(changed), "src/a.c", 10) &&
              !review_files_line_changed(changed, ELEMENTSOF(changed), "src/a.c", 5) &&
              !review_files_line_changed(changed, ELEMENTSOF(changed), "src/b.c", 3), "changed lines by bisection");
}

static void test_lines(void) {
        const char *out =
                "../src/a.c: In function 'main':\n"
                "./src/a.c:3:5: warning: unused variable 'x' [-Wunused-variable]\n"
                "    3 |     int x;\n"
                "/workspace/src/a.c:4:1: error: expected ';' before '}' token\n"
                "src/a.c:5:1: error: not a changed line\n"
                "src/a.c:10: note: no column here\n"
                "scripts/run.sh:2:6: note: Double quote to prevent globbing and word splitting. [SC2086]\n"
                "scripts/run.sh:2:6: style: Consider something [checkStyle]\r\n"
                "weird:name:with:colons.c:3:1: error: not in the change\n"
                "src/a.c:4:2: fatal error: x.h: No such file or directory\n";
        FindingList l = {};
        CheckerStats st = {};

        CHECK_ERRNO(checker_parse("gcc", out, strlen(out), changed, ELEMENTSOF(changed), &l, &st, NULL), 0, "parses");
        CHECK(st.total == 8 && st.kept == 6, "8 findings, 6 on changed lines: %zu, %zu", st.total, st.kept);
        CHECK(l.n == 6 && streq(l.items[0].file, "src/a.c") && l.items[0].line == 3 && l.items[0].severity == FINDING_WARNING &&
              streq(l.items[0].rule, "gcc/-Wunused-variable") && streq(l.items[0].message, "unused variable 'x'"),
              "warning with its rule: %s %s", l.n ? l.items[0].rule : "", l.n ? l.items[0].message : "");
        CHECK(l.n == 6 && l.items[1].severity == FINDING_ERROR && l.items[1].line == 4 && streq(l.items[1].rule, "gcc"),
              "error without a rule");
        CHECK(l.n == 6 && l.items[2].line == 10 && l.items[2].severity == FINDING_NOTE, "FILE:LINE without a column");
        CHECK(l.n == 6 && streq(l.items[3].rule, "gcc/SC2086") && l.items[3].severity == FINDING_NOTE, "shellcheck -f gcc");
        CHECK(l.n == 6 && streq(l.items[4].rule, "gcc/checkStyle") && l.items[4].severity == FINDING_NOTE, "cppcheck style, CRLF");
        CHECK(l.n == 6 && l.items[5].severity == FINDING_ERROR && streq(l.items[5].message, "x.h: No such file or directory"),
              "fatal error");
        finding_list_done(&l);
}

static void test_sarif(void) {
        const char *sarif =
                "\xEF\xBB\xBF{\"version\":\"2.1.0\",\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\",\"runs\":[{"
                "\"tool\":{\"driver\":{\"name\":\"cppcheck\",\"rules\":[{\"id\":\"nullPointer\",\"defaultConfiguration\":{\"level\":\"error\"}}]}},"
                "\"results\":["
                "{\"ruleId\":\"nullPointer\",\"message\":{\"text\":\"Null pointer\\u0007 dereference\\n@someone <img src=x>\"},"
                " \"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":\"file:///workspace/src/a.c\"},\"region\":{\"startLine\":4}}}]},"
                "{\"ruleId\":\"unused\",\"level\":\"note\",\"message\":{\"text\":\"n\"},"
                " \"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":\"src/a.c\",\"uriBaseId\":\"SRCROOT\"},\"region\":{\"startLine\":3}}}]},"
                "{\"ruleId\":\"x\",\"message\":{\"text\":\"old code\"},"
                " \"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":\"src/a.c\"},\"region\":{\"startLine\":99}}}]},"
                "{\"ruleId\":\"y\",\"message\":{\"text\":\"no location\"}},"
                "{\"ruleId\":\"z\",\"message\":{\"text\":\"default level\"},"
                " \"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":\"scripts/run.sh\"},\"region\":{\"startLine\":1}}}]}"
                "]}]}";
        FindingList l = {};
        CheckerStats st = {};
        _cleanup_free_ char *error = NULL, *md = NULL;

        CHECK_ERRNO(checker_parse("cppcheck-sarif", sarif, strlen(sarif), changed, ELEMENTSOF(changed), &l, &st, &error), 0,
                    "SARIF detected and parsed");
        CHECK(st.total == 4 && st.kept == 3 && l.n == 3, "3 of 4 on changed lines: %zu %zu", st.total, st.kept);
        /* The rule's defaultConfiguration gives the level; control characters are escaped. */
        CHECK(l.n == 3 && l.items[0].severity == FINDING_ERROR && streq(l.items[0].rule, "cppcheck/nullPointer") &&
              streq(l.items[0].message, "Null pointer\\x07 dereference\\n@someone <img src=x>"), "level from the rule: %s",
              l.n ? l.items[0].message : "");
        CHECK(l.n == 3 && l.items[1].severity == FINDING_NOTE && l.items[2].severity == FINDING_WARNING,
              "an explicit level, and warning by default");
        /* The markdown leaves no HTML and no mention. */
        CHECK(finding_list_to_markdown(&l, NULL, &md) == 0 && !strstr(md, "<img") && !strstr(md, "@someone") &&
              strstr(md, "&lt;img") && strstr(md, "&#64;someone"), "markdown escaped");
        finding_list_done(&l);

        /* Malformed: a clear error, nothing kept. */
        CHECK(checker_parse_sarif("x", "{\"version\":\"2.1.0\",\"runs\":[", 27, changed, 2, &l, NULL, &error) == -EBADMSG &&
              error && l.n == 0, "truncated JSON: %s", strempty(error));
        CHECK(checker_parse_sarif("x", "{\"version\":\"1.0\",\"runs\":[]}", 27, changed, 2, &l, NULL, &error) == -EBADMSG &&
              strstr(error, "SARIF"), "not SARIF 2: %s", strempty(error));
        CHECK(checker_parse("x", "[1,2]", 5, changed, 2, &l, NULL, &error) == 0 && l.n == 0, "not an object: read as lines, nothing");
}

static void test_bounds(void) {
        FindingList l = {};
        CheckerStats st = {};
        _cleanup_free_ char *big = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&big, &size);

        /* More findings than kept: counted, not kept. */
        for (unsigned i = 0; i < 1000; i++)
                fprintf(f, "src/a.c:3:1: warning: number %u\n", i);
        /* A message far past the bound is cut. */
        fprintf(f, "src/a.c:4:1: error: ");
        for (unsigned i = 0; i < 10000; i++)
                fputc('m', f);
        fputc('\n', f);
        fclose(f);
        CHECK(checker_parse_lines("gcc", big, size, changed, ELEMENTSOF(changed), &l, &st, NULL) == 0 &&
              st.kept == CHECKER_FINDINGS_MAX && st.dropped == 1001 - CHECKER_FINDINGS_MAX, "bounded: kept %zu, dropped %zu",
              st.kept, st.dropped);
        finding_list_done(&l);
        CHECK_ERRNO(checker_parse_lines("gcc", big, CHECKER_OUTPUT_MAX + 1ULL, changed, 2, &l, NULL, NULL), -EFBIG, "size bound");

        /* One long message: cut to the bound. */
        l = (FindingList) {};
        const char *tail = strstr(big, "src/a.c:4:1");
        CHECK(checker_parse_lines("gcc", tail, strlen(tail), changed, 2, &l, NULL, NULL) == 0 && l.n == 1 &&
              strlen(l.items[0].message) <= FINDING_MESSAGE_MAX && strstr(l.items[0].message, "…"), "message cut");
        finding_list_done(&l);
}

/* A log of 20,000 rules and 20,000 results without a level of their own:
 * each result finds its rule's level by bisection (it walked all the rules
 * for each result, 4 * 10^8 comparisons for a 2 MB log); of two rules with
 * one id, the first counts. */
static void test_many_rules(void) {
        FILE *f;
        char *buf = NULL;
        size_t size = 0;
        FindingList l = {};
        CheckerStats st = {};

        f = open_memstream(&buf, &size);
        fputs("{\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"t\",\"rules\":[", f);
        fputs("{\"id\":\"r1\",\"defaultConfiguration\":{\"level\":\"error\"}},", f);
        for (unsigned i = 0; i < 20000; i++)
                fprintf(f, "{\"id\":\"r%u\",\"defaultConfiguration\":{\"level\":\"note\"}},", i);
        fputs("{}]}},\"results\":[", f);
        for (unsigned i = 0; i < 20000; i++)
                fprintf(f, "%s{\"ruleId\":\"r%u\",\"message\":{\"text\":\"m\"},\"locations\":[{\"physicalLocation\":"
                        "{\"artifactLocation\":{\"uri\":\"src/a.c\"},\"region\":{\"startLine\":%u}}}]}",
                        i > 0 ? "," : "", i, i == 1 ? 3 : i == 2 ? 4 : 1000 + i);
        fputs("]}]}", f);
        fclose(f);
        CHECK(checker_parse_sarif("x", buf, size, changed, ELEMENTSOF(changed), &l, &st, NULL) == 0 && st.total == 20000 &&
              l.n == 2, "20,000 results: %zu total, %zu kept", st.total, l.n);
        CHECK(l.n == 2 && l.items[0].severity == FINDING_ERROR && l.items[1].severity == FINDING_NOTE,
              "levels from the rules, the first of one id");
        finding_list_done(&l);
        free(buf);
}

int main(void) {
        test_paths();
        test_lines();
        test_sarif();
        test_bounds();
        test_many_rules();
        return tap_done();
}
