/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The secret scan over a file's added lines (the input, one line per '\n').
 * Invariants: matches lie within their line (up to a NUL, which ends it),
 * have a length, do not overlap and are at most SECRET_MATCHES_PER_LINE_MAX;
 * secret_scan_files() makes exactly one error finding per match, on that
 * line of that file; a finding never shows a secret's value (only what
 * secret_redact() keeps: at most min(4, n/4) of its bytes); an ignored file
 * is not scanned; the findings survive JSON and markdown; and
 * secret_redact_text() (for text others wrote about the files) is the text
 * with each match replaced by its redacted form and nothing else changed.
 *
 * The harness scans each line once, and both the findings and the
 * redacted text are compared with those matches (they were scanned twice:
 * secret_scan_line() is a function of the line's bytes up to its '\n' or
 * NUL, whichever comes first, and the lines of either check begin at the
 * same places, which is checked). */
#include "fuzz-review.h"
#include "secret-scan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

static bool quoted_redaction_ok(const char *message, size_t n) {
        /* "Possible KIND: 'PREFIX…' (N characters, redacted)." */
        const char *open = strstr(message, ": '"), *close;
        size_t k;

        if (!open)
                return false;
        open += 3;
        close = strstr(open, "…'");
        if (!close)
                return false;
        k = (size_t) (close - open);
        /* The prefix as finding_escape() wrote it: an escape widens a byte to at most 4. */
        return k <= 4 * MIN((size_t) 4, n / 4);
}

static int match_compare(const void *a, const void *b) {
        const SecretMatch *x = a, *y = b;
        return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The matches of each line, as the harness scanned it once: both checks
 * below compare the product with them. */
typedef struct LineMatches {
        SecretMatch m[SECRET_MATCHES_PER_LINE_MAX];
        size_t n;
} LineMatches;

/* The text as secret_redact_text() must give it: each line up to the first
 * NUL (which ends the text; the line that holds it was scanned up to it
 * too: secret_scan_line() stops there), its matches replaced. */
static void check_redact_text(const char *text, const ReviewLine *lines, const LineMatches *lm) {
        _cleanup_free_ char *red = secret_redact_text(NULL, text), *expected = NULL;
        size_t size = 0, i = 0;
        FILE *f = open_memstream(&expected, &size);

        FUZZ_CHECK(red && f, "redact_text failed");
        for (const char *line = text; *line; i++) {
                size_t length = strcspn(line, "\n"), at = 0;
                SecretMatch m[SECRET_MATCHES_PER_LINE_MAX];
                size_t k = lm[i].n;

                FUZZ_CHECK(line == lines[i].text, "line %zu", i + 1);
                memcpy(m, lm[i].m, k * sizeof(SecretMatch));
                qsort(m, k, sizeof(SecretMatch), match_compare);
                for (size_t x = 0; x < k; x++) {
                        _cleanup_free_ char *r = secret_redact(line + m[x].offset, m[x].length);
                        fwrite(line + at, 1, m[x].offset - at, f);
                        fputs(r, f);
                        at = m[x].offset + m[x].length;
                }
                fwrite(line + at, 1, length - at, f);
                line += length;
                if (*line == '\n')
                        fputc(*line++, f);
        }
        FUZZ_CHECK(fclose(f) == 0, "memstream");
        FUZZ_CHECK(streq(red, expected), "redacted text\n%s\nis not\n%s", red, expected);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ ReviewLine *lines = NULL;
        _cleanup_free_ LineMatches *lm = NULL;
        FindingList l = {};
        size_t n = 0, expected = 0;
        ReviewFile f = { .path = "src/config.py" };
        char *ignore[] = { (char *) "src/*.py", NULL };
        SecretScanOptions ignoring = { .ignore_globs = ignore };
        int r;

        if (size > 256 * 1024)
                return 0;
        text = fuzz_text(data, size);
        /* One entry a line: not one for each byte of the input. */
        for (const char *c = text; (c = memchr(c, '\n', (size_t) (text + size - c))); c++)
                n++;
        lines = malloc((n + 1) * sizeof(ReviewLine));
        lm = malloc((n + 1) * sizeof(LineMatches));
        if (!lines || !lm)
                abort();
        n = 0;
        for (char *s = text, *nl; s; s = nl) {
                nl = memchr(s, '\n', (size_t) (text + size - s));
                lines[n] = (ReviewLine) { (unsigned) n + 1, s, (size_t) ((nl ? nl : text + size) - s) };
                if (nl)
                        nl++;
                FUZZ_CHECK(secret_scan_line(NULL, lines[n].text, lines[n].length, lm[n].m, ELEMENTSOF(lm[n].m), &lm[n].n) >= 0,
                           "line %zu", n + 1);
                n++;
        }
        /* Before the lines are cut at their '\n': the text as a whole. */
        check_redact_text(text, lines, lm);
        for (size_t i = 0; i + 1 < n; i++)
                text[lines[i + 1].text - text - 1] = '\0';
        f.lines = lines;
        f.n_lines = n;

        r = secret_scan_files(NULL, &f, 1, &l);
        FUZZ_CHECK(r >= 0, "the scan failed: %d", r);

        for (size_t i = 0; i < n; i++) {
                const SecretMatch *m = lm[i].m;
                size_t k = lm[i].n, len = strnlen(lines[i].text, lines[i].length);

                FUZZ_CHECK(k <= ELEMENTSOF(lm[i].m), "%zu matches", k);
                for (size_t a = 0; a < k; a++) {
                        FUZZ_CHECK(m[a].kind >= 0 && m[a].kind < _SECRET_KIND_MAX, "kind %d", (int) m[a].kind);
                        FUZZ_CHECK(m[a].length > 0 && m[a].offset <= len && m[a].length <= len - m[a].offset,
                                   "match %zu+%zu outside a line of %zu", m[a].offset, m[a].length, len);
                        for (size_t b = 0; b < a; b++)
                                FUZZ_CHECK(m[a].offset >= m[b].offset + m[b].length || m[b].offset >= m[a].offset + m[a].length,
                                           "matches %zu+%zu and %zu+%zu overlap", m[a].offset, m[a].length, m[b].offset, m[b].length);
                }
                /* The findings of this line, in match order. */
                for (size_t a = 0; a < k && expected + a < l.n; a++) {
                        const Finding *x = &l.items[expected + a];
                        const char *value = lines[i].text + m[a].offset;
                        _cleanup_free_ char *v = strndup(value, m[a].length);

                        if (!v)
                                abort();
                        FUZZ_CHECK(x->kind == FINDING_SECRET && x->severity == FINDING_ERROR, "kind %d severity %d",
                                   (int) x->kind, (int) x->severity);
                        FUZZ_CHECK(x->line == i + 1 && fuzz_streq_ptr(x->file, f.path), "finding on %s:%u for line %zu",
                                   fuzz_strna(x->file), x->line, i + 1);
                        FUZZ_CHECK(fuzz_streq_ptr(x->rule, secret_kind_to_string(m[a].kind)), "rule %s", fuzz_strna(x->rule));
                        /* The value itself never shows, unless the message's fixed words happen to hold it. */
                        FUZZ_CHECK(m[a].length < 8 || !strstr(x->message, v) ||
                                   strstr(secret_kind_description(m[a].kind), v) || strstr("Possible : a private key block begins here.", v),
                                   "the message shows the secret '%s': %s", v, x->message);
                        if (m[a].kind != SECRET_PRIVATE_KEY)
                                FUZZ_CHECK(quoted_redaction_ok(x->message, m[a].length),
                                           "the message shows more than a redacted prefix of '%s': %s", v, x->message);
                }
                expected += k;
        }
        FUZZ_CHECK(l.n + l.n_dropped == expected, "%zu findings (+%zu dropped) for %zu matches", l.n, l.n_dropped, expected);
        FUZZ_CHECK(finding_list_errors(&l, FINDING_SECRET) == expected, "%zu errors counted for %zu matches",
                   finding_list_errors(&l, FINDING_SECRET), expected);
        fuzz_check_findings(&l);
        finding_list_done(&l);

        /* On the ignore list: nothing. */
        FUZZ_CHECK(secret_scan_files(&ignoring, &f, 1, &l) >= 0 && l.n == 0 && l.n_dropped == 0, "an ignored file was scanned");
        finding_list_done(&l);
        return 0;
}
