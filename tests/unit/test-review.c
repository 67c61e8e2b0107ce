/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "json-util.h"
#include "review-settings.h"
#include "review.h"
#include "secret-scan.h"
#include "string-util.h"
#include "tap.h"

static void test_escape(void) {
        _cleanup_free_ char *a = finding_escape("a\nb\tc\x01" "d\x7f", 8, 64), *b = finding_escape("\xff\xfe ok \xc3\xa9", 8, 64),
                            *c = finding_escape("0123456789", 10, 10), *d = finding_escape("0123456789a", 11, 10),
                            *e = finding_escape("ééééé", 10, 8), *f = finding_escape("\xed\xa0\x80", 3, 16);

        /* One line, valid UTF-8, bounded, cut on a character boundary. */
        CHECK_STR_EQ(a, "a\\nb\\tc\\x01d\\x7F", "control characters: %s", a);
        CHECK_STR_EQ(b, "?? ok é", "invalid UTF-8: %s", b);
        CHECK_STR_EQ(c, "0123456789", "exactly the bound: %s", c);
        CHECK(streq(d, "0123456…") && strlen(d) == 10, "cut with …: %s", d);
        CHECK_STR_EQ(e, "éé…", "cut between characters: %s", e);
        CHECK_STR_EQ(f, "???", "a UTF-16 surrogate is not UTF-8: %s", f);
}

/* finding_list_add_text() adds as finding_list_add(l, ..., "%.*s", n, text)
 * did, but for a NUL, which is text like any other byte; the JSON and the
 * markdown of a list write each finding with its file, line and rule. */
static void test_add_text(void) {
        FindingList l = { .max = 2 }, back = {};
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *md = NULL;

        CHECK(finding_list_add_text(&l, FINDING_STATIC_CHECK, FINDING_ERROR, "a`b.c", 7, "cc/W1", "bad\x01 <x>\0tail", 13) == 0 &&
              l.n == 1 && streq(l.items[0].message, "bad\\x01 <x>\\x00tail") && streq(l.items[0].file, "a`b.c") &&
              l.items[0].line == 7 && streq(l.items[0].rule, "cc/W1"), "escaped, NUL included: %s", l.items[0].message);
        CHECK(finding_list_add_text(&l, FINDING_STATIC_CHECK, FINDING_NOTE, NULL, 0, NULL, NULL, 0) == 0 && l.n == 2 &&
              streq(l.items[1].message, "") && !l.items[1].file && !l.items[1].rule, "an empty message, no file or rule");
        CHECK(finding_list_add_text(&l, FINDING_SECRET, FINDING_ERROR, "x", 1, NULL, "m", 1) == 0 && l.n == 2 &&
              l.n_dropped == 1 && finding_list_errors(&l, FINDING_SECRET) == 1, "past the bound: counted, not kept");
        CHECK_ERRNO(finding_list_add_text(&l, _FINDING_KIND_MAX, FINDING_ERROR, NULL, 0, NULL, "m", 1), -EINVAL, "bad kind");

        CHECK_ERRNO(finding_list_to_json(&l, &j), 0, "to JSON");
        CHECK_STR_EQ(json_to_line(j), "[{\"kind\":\"static-check\",\"severity\":\"error\",\"file\":\"a`b.c\",\"line\":7,"
                     "\"rule\":\"cc/W1\",\"message\":\"bad\\\\x01 <x>\\\\x00tail\"},"
                     "{\"kind\":\"static-check\",\"severity\":\"note\",\"message\":\"\"}]", "JSON: %s", json_to_line(j));
        CHECK(finding_list_from_json(j, &back) == 0 && back.n == 2 && streq(back.items[0].message, l.items[0].message) &&
              streq(back.items[0].rule, "cc/W1") && back.items[0].line == 7 && !back.items[1].file, "and back");
        CHECK(finding_list_to_markdown(&l, NULL, &md) == 0 &&
              strstr(md, "- **error** static-check `a?b.c:7` (`cc/W1`): bad\\\\x01 &lt;x&gt;\\\\x00tail\n") &&
              strstr(md, "- **note** static-check: \n") && strstr(md, "\n1 more finding not shown.\n"), "markdown: %s", md);
        finding_list_done(&back);
        finding_list_done(&l);
}

static void test_settings(void) {
        const char *md =
                "# Project notes\n\nsecret-scan-ignore: not-in-a-block/**\n\n"
                "```sh\nsecret-scan-ignore: not-ours/**\n```\n"
                "````agentfab\n# fixtures\nsecret-scan-ignore: tests/fixtures/** docs/*.pem ../escape /abs\n"
                "checker: shellcheck -f gcc {files}\ncoverage-report: build/coverage.info\nfrobnicate: yes\nnot a key value\n"
                "```\nchecker: still inside (a shorter fence does not close)\n````\n"
                "~~~ agentfab \ncoverage-report: cov.xml\n~~~\n";
        ReviewRepoSettings s = {};

        CHECK_ERRNO(review_repo_settings_parse(md, strlen(md), &s), 0, "parses");
        CHECK(strv_length(s.secret_scan_ignore) == 2 && streq(s.secret_scan_ignore[0], "tests/fixtures/**") &&
              streq(s.secret_scan_ignore[1], "docs/*.pem"), "globs from agentfab blocks only, bad ones dropped");
        CHECK(strv_length(s.checkers) == 2 && streq(s.checkers[0], "shellcheck -f gcc {files}"), "checkers");
        CHECK(streq_ptr(s.coverage_report, "cov.xml"), "the last coverage-report wins, ~~~ fences too");
        /* ../escape, /abs, frobnicate, "not a key value", and the inner ``` line. */
        CHECK(strv_length(s.warnings) == 5 && strstr(s.warnings[0], "line 10") && strstr(s.warnings[0], "../escape"),
              "warnings name the line: %s", s.warnings ? s.warnings[0] : "");
        review_repo_settings_done(&s);

        /* Control characters anywhere in a line: the line is skipped and the
         * warning quotes none of it (found by fuzz-review-settings). */
        static const char md2[] = "```agentfab\ncove\x1b[2Jrage: x\nchecker: ls\0; rm -rf ~\ncoverage-report: c.info\n```\n";
        CHECK(review_repo_settings_parse(md2, sizeof(md2) - 1, &s) == 0 && !s.checkers && streq_ptr(s.coverage_report, "c.info") &&
              strv_length(s.warnings) == 2 && string_is_safe(s.warnings[0], false) && strstr(s.warnings[1], "line 3"),
              "control characters and a NUL: %s", s.warnings ? s.warnings[0] : "");
        review_repo_settings_done(&s);

        CHECK(!review_glob_is_valid("a/../b") && !review_glob_is_valid("..") && review_glob_is_valid("a..b/**") &&
              !review_glob_is_valid("") && !review_glob_is_valid("a\tb"), "glob validity");
}

static char key[64];

static void test_run(void) {
        char line[128], sarif[1024];
        ReviewLine app[] = { { 2, "import yaml", 11 }, { 5, line, 0 } };
        ReviewLine fixture[] = { { 1, line, 0 } };
        ReviewLine sh[] = { { 3, "rm -rf $DIR/", 12 } };
        ReviewFile files[] = {
                { "app.py", app, ELEMENTSOF(app) },
                { "tests/fixtures/token.txt", fixture, ELEMENTSOF(fixture) },
                { "run.sh", sh, ELEMENTSOF(sh) },
        };
        ReviewManifest manifests[] = {
                { "requirements.txt", "PyYAML==5.4\n", 12, "PyYAML==5.3.1\n", 14 },
                { "README.md", NULL, 0, "x", 1 },
                { "old/package.json", "{}", 2, NULL, 0 },
        };
        ReviewCheckerOutput checkers[3] = {
                { "shellcheck", "run.sh:3:8: warning: Quote this to prevent word splitting. [SC2046]\nrun.sh:9:1: error: old\n", 0 },
                { "semgrep", sarif, 0 },
                { "broken", "{\"version\":", 11 },
        };
        ReviewCoverageReports cov = {
                .path = "coverage.info",
                .base = "LF:100\nLH:90\n", .base_size = 13,
                .final = "LF:100\nLH:80\n", .final_size = 13,
        };
        const char *agentfab_md = "```agentfab\nsecret-scan-ignore: tests/fixtures/**\n```\n";
        ReviewInput in = {
                .files = files, .n_files = ELEMENTSOF(files),
                .manifests = manifests, .n_manifests = ELEMENTSOF(manifests),
                .checkers = checkers, .n_checkers = ELEMENTSOF(checkers),
                .coverage = &cov,
                .repo_settings = agentfab_md, .repo_settings_size = strlen(agentfab_md),
        };
        ReviewConfig config = { .vulnerability_database = OSV_TEST_DB, .coverage_tolerance = 2.0 };
        ReviewResult res = {};
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *md = NULL;

        for (size_t i = 0; i < 36; i++)
                key[i] = "aB3dE5fG7hJ9kLmN1pQrS2tUvW4xYz0cK8"[(i * 7 + 3) % 34];
        snprintf(line, sizeof(line), "GH = 'ghp_%s'", key);
        app[1].length = fixture[0].length = strlen(line);
        snprintf(sarif, sizeof(sarif),
                 "{\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"semgrep\"}},\"results\":["
                 "{\"ruleId\":\"yaml-load\",\"level\":\"error\",\"message\":{\"text\":\"yaml.load is unsafe\"},"
                 "\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":\"app.py\"},\"region\":{\"startLine\":2}}}]}]}]}");
        checkers[0].size = strlen(checkers[0].output);
        checkers[1].size = strlen(sarif);

        CHECK_ERRNO(review_run(&config, &in, &res), 0, "runs");
        /* Everything found, the first breaker in order reported. */
        CHECK(res.tripped && res.breaker == REVIEW_BREAKER_SECRET && strstr(res.reason, "1 possible secret in app.py:5"),
              "breaker secret: %s", strempty(res.reason));
        CHECK_INT_EQ(finding_list_errors(&res.findings, FINDING_SECRET), 1, "the fixture is ignored through .agentfab.md");
        CHECK_INT_EQ(finding_list_errors(&res.findings, FINDING_VULNERABLE_DEPENDENCY), 1, "PyYAML 5.3.1 is vulnerable");
        CHECK(finding_list_errors(&res.findings, FINDING_STATIC_CHECK) == 1 &&
              finding_list_count(&res.findings, FINDING_STATIC_CHECK, FINDING_WARNING) == 2, "semgrep's error, shellcheck's warning");
        CHECK_INT_EQ(finding_list_errors(&res.findings, FINDING_REVIEW_ERROR), 1, "the broken checker output fails closed");
        CHECK_INT_EQ(finding_list_errors(&res.findings, FINDING_COVERAGE), 1, "coverage 90 -> 80 beyond 2 points");
        CHECK_INT_EQ(finding_list_count(&res.findings, FINDING_DEPENDENCY, FINDING_NOTE), 1, "one dependency change listed");
        CHECK(res.findings.items[0].severity == FINDING_ERROR && res.findings.items[res.findings.n - 1].severity == FINDING_NOTE,
              "sorted, errors first");

        /* Serialised for the state file and back. */
        CHECK_ERRNO(review_result_to_json(&res, &j), 0, "to JSON");
        {
                json_object *findings = NULL, *breaker = NULL;
                FindingList back = {};
                _cleanup_json_ json_object *again = NULL;
                CHECK(json_object_object_get_ex(j, "breaker", &breaker) && streq(json_object_get_string(breaker), "secret") &&
                      json_object_object_get_ex(j, "findings", &findings), "breaker and findings in the JSON");
                CHECK(finding_list_from_json(findings, &back) == 0 && back.n == res.findings.n &&
                      finding_list_to_json(&back, &again) == 0 &&
                      streq(json_object_to_json_string(again), json_object_to_json_string(findings)), "round trip");
                finding_list_done(&back);
                CHECK(!strstr(json_object_to_json_string(j), key + 4), "SECURITY: the token is nowhere in the JSON");
        }
        CHECK(review_result_to_markdown(&res, &md) == 0 && strstr(md, "## Review\n\n**Stopped for a person: breaker `secret`.**") &&
              strstr(md, "`app.py:5`") && !strstr(md, key + 4), "markdown section");
        review_result_done(&res);

        /* Without the secret and with more tolerance, the next breakers in order. */
        app[1].text = "x = 1";
        app[1].length = 5;
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_VULNERABLE_DEPENDENCY &&
              strstr(res.reason, "TEST-PYPI-0001"), "vulnerable-dependency: %s", strempty(res.reason));
        review_result_done(&res);
        manifests[0].new_text = "PyYAML==6.0\n";
        manifests[0].new_size = 12;
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_REVIEW, "review: %s", strempty(res.reason));
        review_result_done(&res);
        in.n_checkers = 1;
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_COVERAGE_DROPPED, "coverage-dropped: %s",
              strempty(res.reason));
        review_result_done(&res);
        config.coverage_tolerance = 20;
        CHECK(review_run(&config, &in, &res) == 0 && !res.tripped && res.findings.n == 3, "nothing trips: %zu findings",
              res.findings.n);
        review_result_done(&res);

        /* What the task wrote and the review cannot read fails closed. */
        cov.final = "garbage";
        cov.final_size = 7;
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_REVIEW, "unreadable final coverage: %s",
              strempty(res.reason));
        review_result_done(&res);
        cov.final = NULL;
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_REVIEW, "no final coverage: %s",
              strempty(res.reason));
        review_result_done(&res);
        in.coverage = NULL;
        manifests[0].new_text = "[[[";
        manifests[0].new_size = 3;
        manifests[0].path = "Cargo.toml";
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_REVIEW && strstr(res.reason, "Cargo.toml"),
              "a manifest that does not parse: %s", strempty(res.reason));
        review_result_done(&res);
        manifests[0].new_text = "[dependencies]\n";
        config.vulnerability_database = "/nonexistent";
        manifests[0].new_text = "[dependencies]\nserde = \"1\"\n";
        manifests[0].new_size = strlen(manifests[0].new_text);
        CHECK(review_run(&config, &in, &res) == 0 && res.breaker == REVIEW_BREAKER_REVIEW && strstr(res.reason, "/nonexistent"),
              "a missing database: %s", strempty(res.reason));
        review_result_done(&res);

        /* The contract: lines ascending. */
        ReviewLine bad[] = { { 5, "a", 1 }, { 5, "b", 1 } };
        files[0].lines = bad;
        files[0].n_lines = 2;
        CHECK_ERRNO(review_run(&config, &in, &res), -EINVAL, "lines out of order refused");
}

static void test_bound(void) {
        ReviewLine lines[1000];
        char text[1000][48];
        ReviewFile f = { "keys.env", lines, ELEMENTSOF(lines) };
        ReviewInput in = { .files = &f, .n_files = 1 };
        ReviewConfig c = { .max_findings = 10, .coverage_tolerance = -1 };
        ReviewResult res = {};
        _cleanup_free_ char *md = NULL;

        for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
                snprintf(text[i], sizeof(text[i]), "K%zu=AKIA%016zu", i, i);
                for (char *p = text[i] + strlen(text[i]) - 16; *p; p++)
                        *p = (char) ('A' + (*p - '0'));
                lines[i] = (ReviewLine) { (unsigned) i + 1, text[i], strlen(text[i]) };
        }
        /* Findings past the bound are counted, and still trip the breaker. */
        CHECK(review_run(&c, &in, &res) == 0 && res.findings.n == 10 && res.findings.n_dropped == 990 && res.tripped &&
              strstr(res.reason, "1000 possible secrets"), "bounded: %s", strempty(res.reason));
        CHECK(review_result_to_markdown(&res, &md) == 0 && strstr(md, "990 more findings not shown"), "the markdown says so");
        review_result_done(&res);
}

/* SECURITY: a checker that quotes the line it is about does not carry the
 * secret on it into the findings (journal, summary, the model's context). */
static void test_checker_quotes_secret(void) {
        const char *token = "ghp_Zq8XbN3vK7mP2rT9wY4cH6jL1sD5fG0aE3uI";
        char line[128], output[512];
        ReviewLine conf[] = { { 4, line, 0 } };
        ReviewFile files[] = { { "deploy.sh", conf, ELEMENTSOF(conf) } };
        ReviewCheckerOutput checkers[] = { { "lint", output, 0 } };
        ReviewInput in = { .files = files, .n_files = 1, .checkers = checkers, .n_checkers = 1 };
        ReviewConfig config = { .coverage_tolerance = -1 };
        ReviewResult res = {};
        _cleanup_free_ char *md = NULL;
        _cleanup_json_ json_object *j = NULL;

        snprintf(line, sizeof(line), "curl -H \"Authorization: $T\" # T=%s", token);
        conf[0].length = strlen(line);
        snprintf(output, sizeof(output), "deploy.sh:4:1: warning: literal token in '%s' [L42]\n"
                 "deploy.sh:4:2: note: also https://bob:%s@example.com/x\n", token, token + 4);
        checkers[0].size = strlen(output);

        CHECK_ERRNO(review_run(&config, &in, &res), 0, "runs");
        CHECK(finding_list_count(&res.findings, FINDING_STATIC_CHECK, FINDING_WARNING) >= 1, "the checker's warning is kept");
        CHECK(review_result_to_json(&res, &j) == 0 && !strstr(json_object_to_json_string(j), token + 8),
              "the quoted token is in no finding: %s", json_object_to_json_string(j));
        CHECK(review_result_to_markdown(&res, &md) == 0 && !strstr(md, token + 8) && strstr(md, "literal token"),
              "nor in the summary, whose message stays readable");
        review_result_done(&res);

        {
                _cleanup_free_ char *a = secret_redact_text(NULL, "no secret here\nnor here\n");
                _cleanup_free_ char *b = secret_redact_text(NULL, "x\ny = https://u:hunter2hunter2@h/\n");
                CHECK(streq_ptr(a, "no secret here\nnor here\n"), "text without secrets is unchanged");
                CHECK(b && strstr(b, "x\ny = https://u:") && !strstr(b, "hunter2hunter2"), "redacted line by line: %s", strempty(b));
        }
}

int main(void) {
        test_escape();
        test_add_text();
        test_checker_quotes_secret();
        test_settings();
        test_run();
        test_bound();
        return tap_done();
}
