/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A repository's .agentfab.md as the review reads it (the ```agentfab
 * blocks). Invariants: what is kept is within its bounds (64 globs, 16
 * checkers of 1 to 1024 bytes, 32 warnings), every glob valid, the report
 * path a valid glob without pattern characters, no control characters
 * anywhere, each warning naming a line of the input; written out again as
 * one block and read back, the same settings and no warning; and each glob
 * answers a path match (including a long one) in bounded time. */
#include "breakers.h"
#include "fuzz.h"
#include "macro.h"
#include "review-settings.h"
#include "string-util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

static bool strv_equal_ptr(char **a, char **b) {
        size_t i = 0;

        for (; a && a[i] && b && b[i]; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return false;
        return (!a || !a[i]) && (!b || !b[i]);
}

static void check(const ReviewRepoSettings *s, size_t n_lines) {
        FUZZ_CHECK(strv_length(s->secret_scan_ignore) <= REVIEW_IGNORE_GLOBS_MAX, "%zu globs", strv_length(s->secret_scan_ignore));
        FUZZ_CHECK(strv_length(s->checkers) <= REVIEW_CHECKERS_MAX, "%zu checkers", strv_length(s->checkers));
        FUZZ_CHECK(strv_length(s->warnings) <= 32, "%zu warnings", strv_length(s->warnings));
        for (char **g = s->secret_scan_ignore; g && *g; g++)
                FUZZ_CHECK(review_glob_is_valid(*g) && !strpbrk(*g, " \t"), "glob '%s' kept", *g);
        for (char **c = s->checkers; c && *c; c++)
                FUZZ_CHECK(**c && strlen(*c) <= REVIEW_CHECKER_COMMAND_MAX && string_is_safe(*c, false) &&
                           !strchr(" \t", (*c)[0]) && !strchr(" \t", (*c)[strlen(*c) - 1]),
                           "checker '%s' kept", *c);
        if (s->coverage_report)
                FUZZ_CHECK(review_glob_is_valid(s->coverage_report) && !strpbrk(s->coverage_report, "*?[ \t"),
                           "report path '%s' kept", s->coverage_report);
        for (char **w = s->warnings; w && *w; w++) {
                unsigned line;
                int k = 0;
                FUZZ_CHECK(sscanf(*w, "line %u: %n", &line, &k) == 1 && k > 0 && line >= 1 && line <= n_lines,
                           "warning '%s' names no line of %zu", *w, n_lines);
                FUZZ_CHECK(string_is_safe(*w, false), "warning '%s' has control characters", *w);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ReviewRepoSettings s = {}, back = {};
        char *buf = NULL;
        size_t len = 0, n_lines = 1;
        FILE *f;
        int r;

        if (size > REVIEW_SETTINGS_SIZE_MAX)
                return 0;
        for (size_t i = 0; i < size; i++)
                n_lines += data[i] == '\n';
        r = review_repo_settings_parse((const char *) data, size, &s);
        FUZZ_CHECK(r >= 0, "settings refused: %d", r);
        check(&s, n_lines);

        /* The round trip. */
        f = open_memstream(&buf, &len);
        if (!f)
                abort();
        fputs("Instructions for the model.\n\n```agentfab\n", f);
        for (char **g = s.secret_scan_ignore; g && *g; g++)
                fprintf(f, "secret-scan-ignore: %s\n", *g);
        for (char **c = s.checkers; c && *c; c++)
                fprintf(f, "checker: %s\n", *c);
        if (s.coverage_report)
                fprintf(f, "coverage-report: %s\n", s.coverage_report);
        fputs("```\n", f);
        if (fclose(f) != 0)
                abort();
        r = review_repo_settings_parse(buf, len, &back);
        FUZZ_CHECK(r >= 0, "settings written out refused: %d", r);
        FUZZ_CHECK(strv_equal_ptr(s.secret_scan_ignore, back.secret_scan_ignore), "globs differ after a round trip:\n%s", buf);
        FUZZ_CHECK(strv_equal_ptr(s.checkers, back.checkers), "checkers differ after a round trip:\n%s", buf);
        FUZZ_CHECK(fuzz_streq_ptr(s.coverage_report, back.coverage_report), "report path differs after a round trip:\n%s", buf);
        FUZZ_CHECK(strv_length(back.warnings) == 0, "settings written out warn: %s", back.warnings[0]);

        /* Globs are matched against every changed file: no blow-up on a deep path. */
        for (char **g = s.secret_scan_ignore; g && *g; g++) {
                (void) path_glob_match(*g, "tests/fixtures/keys/id_rsa");
                (void) path_glob_match(*g, "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab");
        }

        free(buf);
        review_repo_settings_done(&s);
        review_repo_settings_done(&back);
        return 0;
}
