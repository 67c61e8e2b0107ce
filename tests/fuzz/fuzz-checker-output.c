/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a static checker printed, as the review stage reads it
 * (checker_parse(): SARIF when it starts with '{', else gcc-style
 * "FILE:LINE[:COL]: SEVERITY: MESSAGE [RULE]" lines), filtered against a
 * fixed set of changed lines. Invariants: the lines form never fails on
 * content and SARIF fails only with a reason; every finding is a static
 * check on a line the change touched, of a file the change touched; the
 * statistics add up (kept = findings, kept + dropped <= total, at most one
 * finding per input line); the findings survive JSON and markdown. */
#include "checker-output.h"
#include "fuzz-review.h"

static const ReviewLine changed_lines[] = { { 1, "", 0 }, { 2, "", 0 }, { 3, "", 0 }, { 10, "", 0 } };
static const ReviewFile changed[] = {
        { "a.c", changed_lines, ELEMENTSOF(changed_lines) },
        { "src/b.sh", changed_lines, ELEMENTSOF(changed_lines) },
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

FUZZ_UNINSTRUMENTED static size_t count_lines(const char *buf, size_t size) {
        size_t n = 1;
        for (const char *p = buf; (p = memchr(p, '\n', (size_t) (buf + size - p))); p++)
                n++;
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *error = NULL;
        const char *buf = (const char *) data;
        FindingList l = {};
        CheckerStats st = {};
        size_t i = 0, n_lines;
        bool sarif;
        int r;

        if (size > 1024 * 1024)
                return 0;
        /* The same choice checker_parse() makes. */
        if (size >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
                i = 3;
        while (i < size && strchr(" \t\n\v\f\r", buf[i]) && buf[i] != '\0')
                i++;
        sarif = i < size && buf[i] == '{';
        n_lines = count_lines(buf, size);

        r = checker_parse("fuzz", buf, size, changed, ELEMENTSOF(changed), &l, &st, &error);
        if (sarif)
                FUZZ_CHECK(r >= 0 || error, "SARIF refused (%d) without a reason", r);
        else
                FUZZ_CHECK(r >= 0, "lines refused (%d)", r);

        if (r >= 0) {
                FUZZ_CHECK(st.kept == l.n, "%zu kept, %zu findings", st.kept, l.n);
                FUZZ_CHECK(st.kept <= CHECKER_FINDINGS_MAX, "%zu kept", st.kept);
                FUZZ_CHECK(st.kept + st.dropped <= st.total, "%zu kept + %zu dropped > %zu", st.kept, st.dropped, st.total);
                if (!sarif)
                        FUZZ_CHECK(st.total <= n_lines, "%zu findings from %zu lines", st.total, n_lines);
        }
        for (size_t k = 0; k < l.n; k++) {
                const Finding *f = &l.items[k];
                FUZZ_CHECK(f->kind == FINDING_STATIC_CHECK, "kind %d", (int) f->kind);
                FUZZ_CHECK(f->file && review_files_line_changed(changed, ELEMENTSOF(changed), f->file, f->line),
                           "finding on %s:%u, which the change did not touch", fuzz_strna(f->file), f->line);
                FUZZ_CHECK(f->rule && (strneq(f->rule, "fuzz", 4) || sarif), "rule '%s' does not name the checker", fuzz_strna(f->rule));
        }
        fuzz_check_findings(&l);
        finding_list_done(&l);
        return 0;
}
