/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <math.h>
#include <stdio.h>

#include "coverage.h"
#include "string-util.h"
#include "tap.h"

#define NEAR(a, b) (fabs((a) - (b)) < 0.001)

static void test_lcov(void) {
        const char *totals = "TN:\nSF:/w/a.c\nFN:1,main\nFNDA:1,main\nDA:1,1\nDA:2,0\nLF:10\nLH:7\nend_of_record\n"
                             "SF:/w/b.c\nLF:10\nLH:3\nend_of_record\n";
        const char *da = "SF:a.py\r\nDA:1,1\r\nDA:2,0\r\nDA:3,5,abcdef\r\nDA:2,1\r\nDA:4,-1\r\nend_of_record\r\n";
        Coverage c;
        _cleanup_free_ char *error = NULL;

        /* LF/LH totals where a record has them, DA lines counted where not. */
        CHECK(coverage_parse(totals, strlen(totals), &c, &error) == 0 && c.lines_valid == 20 && c.lines_covered == 10 &&
              NEAR(c.percent, 50.0), "LF/LH summed: %.2f", c.percent);
        CHECK(coverage_parse_lcov(da, strlen(da), &c, &error) == 0 && c.lines_valid == 3 && c.lines_covered == 3,
              "DA counted, a line twice once, negative hits not executable: %lu/%lu", (unsigned long) c.lines_covered,
              (unsigned long) c.lines_valid);

        CHECK(coverage_parse_lcov("LF:3\nLH:4\n", 10, &c, &error) == -EBADMSG && strstr(error, "line 2"), "LH > LF: %s", error);
        CHECK_ERRNO(coverage_parse_lcov("DA:x,1\n", 7, &c, &error), -EBADMSG, "DA not a number: %s", error);
        CHECK_ERRNO(coverage_parse_lcov("hello world\n", 12, &c, &error), -EBADMSG, "not lcov: %s", error);
        CHECK_ERRNO(coverage_parse_lcov("TN:\nSF:x\nend_of_record\n", 23, &c, &error), -ENODATA, "no data: %s", error);
        CHECK_ERRNO(coverage_parse_lcov("", 0, &c, &error), -ENODATA, "empty");
        CHECK_ERRNO(coverage_parse_lcov("LF:99999999999999999999\n", 24, &c, &error), -EBADMSG, "an absurd number");
        CHECK_ERRNO(coverage_parse_lcov("LF:1\0\n", 6, &c, &error), -EBADMSG, "NUL");

        /* Totals summed over records stay within what 18 digits hold: 19
         * records of 10^18 - 1 lines once wrapped around to a small, wrong
         * figure (found by fuzz-coverage). */
        _cleanup_free_ char *many = NULL;
        size_t n = 0;
        many = malloc(19 * 64);
        for (int i = 0; i < 19; i++)
                n += (size_t) sprintf(many + n, "SF:%d\nLF:999999999999999999\nLH:1\nend_of_record\n", i);
        error = mfree_ptr(error);
        CHECK(coverage_parse_lcov(many, n, &c, &error) == -EBADMSG && strstr(error, "lines in all"), "sums bounded: %s",
              strempty(error));
        CHECK(coverage_parse_lcov("LF:999999999999999999\nDA:1,1\n", 29, &c, &error) == 0 && c.lines_valid == COVERAGE_LINES_MAX,
              "the bound itself");
        CHECK_ERRNO(coverage_parse_lcov("LF:999999999999999999\nend_of_record\nDA:1,1\n", 43, &c, &error), -EBADMSG,
                    "one DA line past the bound");
}

static void test_cobertura(void) {
        const char *attrs = "<?xml version=\"1.0\" ?>\n<!DOCTYPE coverage SYSTEM \"http://cobertura.sourceforge.net/xml/coverage-04.dtd\">\n"
                            "<coverage line-rate=\"0.5\" lines-valid=\"200\" lines-covered=\"150\" version=\"7.2\">"
                            "<!-- <coverage> in a comment --><sources><source>/w</source></sources></coverage>\n";
        const char *rate = "<coverage line-rate='0.8125' branch-rate='0'><packages/></coverage>";
        const char *lines =
                "<coverage><packages><package name='p'><classes><class name='a' filename='a.c'>"
                "<methods><method name='m'><lines><line number='1' hits='1'/></lines></method></methods>"
                "<lines><line number=\"1\" hits=\"1\"/><line number=\"2\" hits=\"0\"/><line number=\"3\" hits=\"4\" branch=\"false\"/>"
                "<line number=\"4\" hits=\"0\"></line></lines></class></classes></package></packages></coverage>";
        Coverage c;
        _cleanup_free_ char *error = NULL;

        CHECK(coverage_parse(attrs, strlen(attrs), &c, &error) == 0 && c.lines_valid == 200 && NEAR(c.percent, 75.0),
              "lines-valid/lines-covered over line-rate: %.2f", c.percent);
        CHECK(coverage_parse(rate, strlen(rate), &c, &error) == 0 && NEAR(c.percent, 81.25), "line-rate: %.2f", c.percent);
        CHECK(coverage_parse(lines, strlen(lines), &c, &error) == 0 && c.lines_valid == 4 && c.lines_covered == 2,
              "<line hits> counted, methods' copies not: %lu/%lu", (unsigned long) c.lines_covered, (unsigned long) c.lines_valid);

        /* Malformed: clear errors. */
        static const char *bad[] = {
                "<coverage line-rate='0.5'>",
                "<report line-rate='0.5'></report>",
                "<coverage line-rate='0.5'></cov>",
                "<coverage line-rate=0.5></coverage>",
                "<coverage><lines><line hits='x'/></lines></coverage>",
                "<coverage></coverage><coverage></coverage>",
                "<coverage><!-- unterminated </coverage>",
                "<coverage lines-valid='1' lines-covered='2'></coverage>",
                "<coverage></coverage>",
                "<",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = coverage_parse_cobertura(bad[i], strlen(bad[i]), &c, &error);
                CHECK((r == -EBADMSG || r == -ENODATA) && error, "malformed %zu: %s", i, strempty(error));
        }

        /* Deep nesting is refused, not recursed into. */
        _cleanup_free_ char *deep = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&deep, &size);
        fputs("<coverage>", f);
        for (unsigned i = 0; i < 100000; i++)
                fputs("<a>", f);
        fclose(f);
        CHECK(coverage_parse_cobertura(deep, size, &c, &error) == -EBADMSG && strstr(error, "deeper"), "depth bounded: %s", error);

        /* SECURITY: entities are never expanded (a "billion laughs" costs nothing). */
        const char *laughs = "<?xml version='1.0'?><!DOCTYPE lolz [<!ENTITY lol 'lol'><!ENTITY lol2 '&lol;&lol;&lol;'>]>"
                             "<coverage line-rate='0.25'>&lol2;</coverage>";
        CHECK(coverage_parse(laughs, strlen(laughs), &c, &error) == 0 && NEAR(c.percent, 25.0), "DTD skipped, no expansion");
}

static void test_compare(void) {
        Coverage base = { .percent = 80.0 }, same = { .percent = 79.5 }, lower = { .percent = 78.0 };
        FindingList l = {};

        CHECK(coverage_compare(&base, &same, 1.0, "coverage.info", &l) == 0 && l.n == 1 && l.items[0].severity == FINDING_NOTE,
              "within the tolerance: a note");
        CHECK(coverage_compare(&base, &lower, 1.0, "coverage.info", &l) == 1 && l.n == 2 && l.items[1].severity == FINDING_ERROR &&
              streq(l.items[1].rule, "coverage-dropped") && strstr(l.items[1].message, "80.00% to 78.00%"),
              "beyond it: %s", l.n == 2 ? l.items[1].message : "");
        CHECK_ERRNO(coverage_compare(&base, &lower, 5.0, NULL, &l), 0, "a larger tolerance");
        finding_list_done(&l);
}

int main(void) {
        test_lcov();
        test_cobertura();
        test_compare();
        return tap_done();
}
