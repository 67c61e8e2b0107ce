/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "breakers.h"
#include "fs-util.h"
#include "json-util.h"
#include "review-model.h"
#include "review-stage.h"
#include "string-util.h"
#include "tap.h"
#include "task.h"

static int tasks_fd = -1;

static Task *make_task(const char *id) {
        Task *t = NULL;

        if (task_new(&t, id) < 0)
                abort();
        t->tasks_fd = tasks_fd;
        if (mkdirat(tasks_fd, id, 0700) < 0)
                abort();
        return t;
}

static void write_task_file(Task *t, const char *name, const char *text) {
        int fd = openat(tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || write_file_atomic(fd, name, text, strlen(text), 0600) < 0)
                abort();
        close(fd);
}

/* The reviewer model's answer is untrusted: only the two verdicts, every
 * string escaped to one bounded line, the comments bounded in number. */
static void test_parse_verdict(void) {
        _cleanup_json_ json_object *v = NULL, *tools = review_model_tools();
        json_object *comments, *c;
        const char *s = NULL;
        uint64_t line = 0;

        CHECK(tools && json_object_array_length(tools) == 1, "the tool schema parses: one tool");

        CHECK_ERRNO(review_model_parse_verdict("{\"verdict\":\"approve\"}", &v), 0, "approve without anything else");
        CHECK(json_get_string(v, "verdict", &s) == 0 && streq(s, "approve"), "verdict kept");
        json_object_put(TAKE_PTR(v));

        CHECK_ERRNO(review_model_parse_verdict("{\"verdict\":\"request_changes\",\"summary\":\"a\\nb\\u001b[31m\","
                                               "\"comments\":[{\"file\":\"x.c\",\"line\":7,\"comment\":\"bad\\tthing\"},"
                                               "{\"comment\":\"general\",\"line\":-3}]}", &v), 0,
                    "request_changes with comments");
        CHECK(json_get_string(v, "summary", &s) == 0 && !strchr(s, '\n') && !strchr(s, '\033'),
              "control characters escaped: %s", s);
        CHECK(json_object_object_get_ex(v, "comments", &comments) && json_object_array_length(comments) == 2,
              "both comments");
        c = json_object_array_get_idx(comments, 0);
        CHECK(json_get_uint64(c, "line", &line) == 0 && line == 7 && json_get_string(c, "file", &s) == 0 &&
              streq(s, "x.c"), "file and line");
        c = json_object_array_get_idx(comments, 1);
        CHECK(!json_object_object_get_ex(c, "line", NULL) && !json_object_object_get_ex(c, "file", NULL),
              "a negative line and no file are left out");
        json_object_put(TAKE_PTR(v));

        CHECK_ERRNO(review_model_parse_verdict("{\"verdict\":\"merge it\"}", &v), -EBADMSG, "unknown verdict refused");
        CHECK_ERRNO(review_model_parse_verdict("not json", &v), -EBADMSG, "not JSON refused");
        CHECK_ERRNO(review_model_parse_verdict("[1]", &v), -EBADMSG, "not an object refused");
        CHECK_ERRNO(review_model_parse_verdict(NULL, &v), -EBADMSG, "no arguments refused");
        CHECK_ERRNO(review_model_parse_verdict("{\"verdict\":\"approve\",\"comments\":{}}", &v), -EBADMSG,
                    "comments not a list refused");
        CHECK_ERRNO(review_model_parse_verdict("{\"verdict\":\"approve\",\"comments\":[{\"file\":\"a\"}]}", &v), -EBADMSG,
                    "a comment without text refused");

        /* Past the bound, comments are dropped, not the verdict. */
        _cleanup_free_ char *many = strdup("{\"verdict\":\"request_changes\",\"comments\":[");
        for (unsigned i = 0; i < 200; i++) {
                _cleanup_free_ char *n = NULL;
                if (asprintf(&n, "%s%s{\"comment\":\"c%u\"}", many, i ? "," : "", i) < 0)
                        abort();
                free(many);
                many = TAKE_PTR(n);
        }
        _cleanup_free_ char *all = NULL;
        if (asprintf(&all, "%s]}", many) < 0)
                abort();
        CHECK(review_model_parse_verdict(all, &v) == 0 && json_object_object_get_ex(v, "comments", &comments) &&
              json_object_array_length(comments) == REVIEW_MODEL_COMMENTS_MAX, "comments bounded");
        json_object_put(TAKE_PTR(v));
}

/* What the stage left in the task directory is read back after a restart:
 * the Findings property, the summary, the trailers and a rejection's
 * message come from it. */
static void test_stage_records(void) {
        _cleanup_(task_freep) Task *t = make_task("0123456789ab");
        _cleanup_close_ int dir = openat(tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_(finding_list_done) FindingList l = {};
        _cleanup_free_ char *md = NULL, *text = NULL;
        _cleanup_strv_free_ char **trailers = NULL;

        CHECK(review_stage_load(t, &l) == 0 && l.n == 0, "no review.json: no findings");
        CHECK(review_stage_markdown(dir, &md) == 0 && !md, "no review.json: no section");
        CHECK(review_stage_trailers(t, &trailers) == 0 && !trailers, "not reviewed: no trailers");

        write_task_file(t, REVIEW_STAGE_FILE,
                        "{\"breaker\":\"secret\",\"reason\":\"1 possible secret in a.py:3\",\"findings\":["
                        "{\"kind\":\"secret\",\"severity\":\"error\",\"file\":\"a.py\",\"line\":3,"
                        "\"rule\":\"aws-access-key-id\",\"message\":\"Possible AWS access key id: 'AKIA…' (redacted).\"},"
                        "{\"kind\":\"static-check\",\"severity\":\"warning\",\"file\":\"b.sh\",\"line\":1,"
                        "\"message\":\"quote this\"}],\"dropped\":0,\"commit\":\"base\"}");
        CHECK(review_stage_load(t, &l) == 0 && l.n == 2 && l.items[0].line == 3, "findings read back");
        CHECK(review_stage_markdown(dir, &md) == 0 && md && strstr(md, "## Review") && strstr(md, "`secret`"),
              "the summary's section names the breaker");

        /* Rejection: the work stays, the model gets the findings. */
        t->progress.breaker = strdup("secret");
        t->progress.finished = true;
        CHECK(review_stage_decide(t, false, &text) == 1 && text && strstr(text, "a.py") && !t->progress.finished,
              "rejection sends the findings back and the model goes on");
        text = mfree_ptr(text);
        CHECK(review_stage_decide(t, true, &text) == 0 && !text && t->progress.reviewed, "approval passes the review");
        CHECK(review_stage_trailers(t, &trailers) == 0 && trailers && streq(trailers[0],
              "Agentfab-Review: 1 error, 1 warning (approved by a person)"), "trailer: %s", trailers ? trailers[0] : "-");
        strv_free(TAKE_PTR(trailers));

        /* The reviewer model's approval names it on the tip. */
        write_task_file(t, REVIEW_MODEL_FILE, "{\"verdict\":\"approve\",\"summary\":\"ok\",\"comments\":[],"
                        "\"model\":\"reviewer/big\",\"round\":2}");
        CHECK(review_stage_trailers(t, &trailers) == 0 && strv_length(trailers) == 2 &&
              streq(trailers[0], "Agentfab-Reviewed-By: reviewer/big"), "Agentfab-Reviewed-By");
        md = mfree_ptr(md);
        CHECK(review_stage_markdown(dir, &md) == 0 && md && strstr(md, "reviewer/big (round 2): **approved**"),
              "the summary names the reviewer's verdict");

        free(t->progress.breaker);
        t->progress.breaker = strdup("tests-failing");
        CHECK(review_stage_decide(t, false, &text) == 0 && !text, "other breakers are not the stage's");

        /* A damaged record is an error, not findings. */
        write_task_file(t, REVIEW_STAGE_FILE, "{\"findings\":[{\"kind\":\"nope\"}]}");
        finding_list_done(&l);
        CHECK(review_stage_load(t, &l) < 0, "damaged review.json refused");
}

static void test_breakers(void) {
        CHECK(breaker_is_review("secret") && breaker_is_review("coverage-dropped") && breaker_is_review("review") &&
              breaker_is_review("vulnerable-dependency"), "the stage's breakers");
        CHECK(!breaker_is_review("tests-failing") && !breaker_is_review(NULL) && !breaker_is_review("x"), "others not");
}

/* The coverage report is read beneath the workspace only. */
static void test_spec_key(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec s = { .repository_fd = -EBADF };

        CHECK(task_spec_set_string(&s, "coverage_report", "build/coverage.info", &e) >= 0, "relative path taken");
        CHECK(task_spec_set_string(&s, "coverage_report", "../etc/shadow", &e) < 0, "'..' refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "coverage_report", "/etc/shadow", &e) < 0, "absolute refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);
}

int main(void) {
        char dir[] = "/tmp/test-review-stage.XXXXXX";

        if (!mkdtemp(dir))
                return 1;
        tasks_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tasks_fd < 0)
                return 1;

        test_parse_verdict();
        test_stage_records();
        test_breakers();
        test_spec_key();

        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
