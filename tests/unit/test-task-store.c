/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "agentfab-bus.h"
#include "fs-util.h"
#include "tap.h"
#include "string-util.h"
#include "task-store.h"
#include "task.h"

static int tasks_fd = -1;

static Task *make_task(const char *id) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Task *t = NULL;

        if (task_new(&t, id) < 0)
                abort();
        t->tasks_fd = tasks_fd;
        t->owner = 1000;
        t->created_usec = t->updated_usec = 1700000000000000ULL;
        task_spec_set_string(&t->spec, "repository", "/srv/repo", &e);
        task_spec_set_string(&t->spec, "goal", "Make \"quotes\" and\nnewlines — and UTF-8 — survive", &e);
        task_spec_set_string(&t->spec, "test_command", "make check", &e);
        task_spec_set_limit(&t->spec, "max_steps", 12, &e);
        task_spec_set_limit(&t->spec, "memory_max", UINT64_MAX - 1, &e);
        task_spec_set_limit(&t->spec, "IOWeight", 50, &e);
        return t;
}

static void write_state(const char *id, const char *text) {
        char path[64];
        snprintf(path, sizeof(path), "%s", id);
        (void) mkdirat(tasks_fd, path, 0700);
        int fd = openat(tasks_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || write_file_atomic(fd, TASK_STATE_FILE, text, strlen(text), 0600) < 0)
                abort();
        close(fd);
}

static char *read_state(const char *id) {
        char *text = NULL;
        int fd = openat(tasks_fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || read_file_at(fd, TASK_STATE_FILE, TASK_STATE_FILE_MAX, &text, NULL) < 0)
                text = NULL;
        close(fd);
        return text;
}

static void test_round_trip(void) {
        Task *t = make_task("0123456789ab"), *u = NULL;

        /* What was acknowledged must be what is found again. */
        CHECK(task_create(t) >= 0, "task created");
        CHECK(task_create(t) < 0, "creating the same task again is refused, not overwritten");
        CHECK(task_load(tasks_fd, "0123456789ab", &u) >= 0 && u, "task loaded");
        CHECK(!u->broken, "loaded task is not broken");
        CHECK(u->owner == 1000 && u->state == TASK_QUEUED, "owner and state survive");
        CHECK_STR_EQ(u->spec.goal, t->spec.goal, "goal survives byte for byte");
        CHECK(streq(u->spec.repository, "/srv/repo") && streq(u->spec.test_command, "make check"), "spec strings survive");
        CHECK(u->spec.limits[TASK_LIMIT_MAX_STEPS] == 12 && u->spec.limits[TASK_LIMIT_MEMORY_MAX] == UINT64_MAX - 1,
              "limits survive, including 64-bit values");
        CHECK_UINT_EQ(u->spec.limits[TASK_LIMIT_MAX_TOKENS], TASK_LIMIT_UNSET, "unset limits stay unset");
        CHECK(u->spec.n_extra_limits == 1 && streq(u->spec.extra_limit_names[0], "IOWeight") &&
              u->spec.extra_limit_values[0] == 50, "limits of later releases survive");
        CHECK(u->created_usec == t->created_usec && streq(u->branch, "agentfab/0123456789ab"), "timestamps and branch survive");
        CHECK(u->progress.step == 0 && !u->progress.checkpoint && u->progress.baseline_passed == -1 && !u->progress.diff_shown,
              "a new task has done nothing yet");
        CHECK(u->progress.resources.cpu_usec == 0 && u->progress.resources.tokens_in == 0 &&
              u->progress.resources.cost_micros == TASK_RESOURCE_UNKNOWN, "a new task has used nothing, at no known cost");
        task_free(u);

        /* A state change is on disk when task_set_state() returns. */
        sd_bus_error e = SD_BUS_ERROR_NULL;
        CHECK(task_set_state(t, TASK_CANCELLED, "Cancelled by uid 1000.", 1000, &e) >= 0, "queued -> cancelled");
        u = NULL;
        CHECK(task_load(tasks_fd, "0123456789ab", &u) >= 0 && u->state == TASK_CANCELLED &&
              streq(u->reason, "Cancelled by uid 1000."), "new state and reason persisted");
        task_free(u);

        /* Illegal transitions change nothing, in memory or on disk. */
        char *before = read_state("0123456789ab");
        CHECK(task_set_state(t, TASK_RUNNING, NULL, 1000, &e) < 0 && sd_bus_error_has_name(&e, AGENTFAB_ERROR_BAD_STATE),
              "cancelled -> running refused with BadState");
        sd_bus_error_free(&e);
        char *after = read_state("0123456789ab");
        CHECK(t->state == TASK_CANCELLED && before && after && streq(before, after), "refused transition left no trace");
        free(before);
        free(after);

        /* Events are appended as JSON lines. */
        json_object *ev = json_object_new_object();
        json_object_object_add(ev, "type", json_object_new_string("state"));
        CHECK(task_append_event(t, ev) >= 0 && task_append_event(t, ev) >= 0, "events appended");
        json_object_put(ev);
        task_free(t);
}

/* Where the agent got must come back exactly after a restart: the step, the
 * checkpoint, the conversation's length and the budget decide what a
 * resumed task does next. */
static void test_progress_round_trip(void) {
        Task *t = make_task("0123456789ac"), *u = NULL;
        TaskProgress *p = &t->progress;

        p->step = 7;
        p->messages = 23;
        p->conversation_size = 4567;
        p->checkpoint = strdup("0123456789abcdef0123456789abcdef01234567");
        p->diff_shown = strdup("89abcdef0123456789abcdef0123456789abcdef");
        p->plan = strdup("1. read\n2. fix — carefully");
        p->tokens = 123456;
        p->commands = 9;
        p->extra_steps = 50;
        p->test_failures = 2;
        p->test_signature = UINT64_MAX - 5;
        p->baseline_passed = 40;
        p->baseline_done = true;
        p->baseline_recorded = true;
        p->baseline_exit = 1;
        p->baseline_failed = 2;
        p->baseline_failures_complete = true;
        CHECK(strv_extend(&p->baseline_failures, "test_calc.T.test_add") >= 0 &&
              strv_extend(&p->baseline_failures, "math > throws") >= 0, "baseline failures set");
        p->recent_calls[0] = 17;
        p->recent_calls[1] = UINT64_MAX;
        p->n_recent_calls = 2;
        p->budget_warned = TASK_BUDGET_WARNED_STEPS | TASK_BUDGET_WARNED_WALL;
        p->breaker = strdup("tests-failing");
        p->last_test_exit = -1;
        p->pushed = true;
        p->pull_request = strdup("https://gitea.example/alice/proj/pulls/7");
        p->paused_from = TASK_PREPARING;
        p->wall_usec = 61000000;
        p->resources.cpu_usec = 2500000;
        p->resources.memory_peak = TASK_RESOURCE_UNKNOWN;
        p->resources.net_connections = 4;
        p->resources.tokens_in = 1000;
        p->resources.tokens_cached = 600;
        p->resources.wall_usec = 1;
        p->resources.cost_micros = 150;
        strcpy(p->resources.currency, "EUR");
        t->spec.push_url = strdup("https://gitea.example/alice/proj.git");
        t->spec.forge = strdup("corp");
        t->spec.forge_repository = strdup("alice/proj");
        t->spec.pull_request_base = strdup("develop");
        t->spec.submodules = true;
        t->spec.reference = strdup("PROJ-123");
        p->requirement = 3;
        p->verified = true;
        CHECK(strv_extend(&p->allowed_hosts, "registry.example:443") >= 0 && strv_extend(&p->allowed_hosts, "10.0.0.5") >= 0,
              "allowed hosts set");
        CHECK(strv_extend(&p->approvals, "step 3, breaker protected-path, by ada (uid 1002)") >= 0, "approvals set");
        CHECK(task_create(t) >= 0 && task_load(tasks_fd, "0123456789ac", &u) >= 0 && u && !u->broken, "saved and loaded");
        /* The requirement a task answers is part of what it keeps: its
         * ticket, its version after amendments, and whether the delivered
         * tip's evidence is recorded (else a restart would record it twice). */
        CHECK(streq_ptr(u->spec.reference, "PROJ-123") && u->progress.requirement == 3 && task_requirement_version(u) == 3 &&
              u->progress.verified, "reference, requirement version and verification survive");
        /* What an approval let the task reach must come back with it, or a
         * restarted task would trip the same breaker again. */
        CHECK(strv_length(u->progress.allowed_hosts) == 2 && streq_ptr(u->progress.allowed_hosts[0], "registry.example:443") &&
              streq_ptr(u->progress.allowed_hosts[1], "10.0.0.5"), "allowed hosts survive");
        CHECK(strv_length(u->progress.approvals) == 1 &&
              streq_ptr(u->progress.approvals[0], "step 3, breaker protected-path, by ada (uid 1002)"),
              "approvals survive, for the delivered tip's trailers");
        CHECK(u->progress.pushed && streq_ptr(u->progress.pull_request, p->pull_request), "push and pull request survive");
        CHECK(streq_ptr(u->spec.push_url, t->spec.push_url) && streq_ptr(u->spec.forge, "corp") &&
              streq_ptr(u->spec.forge_repository, "alice/proj") && streq_ptr(u->spec.pull_request_base, "develop"),
              "delivery keys of the spec survive");
        CHECK(u->spec.submodules, "submodules=true survives");
        CHECK(u->progress.step == 7 && u->progress.messages == 23 && u->progress.conversation_size == 4567,
              "step and conversation length survive");
        CHECK(streq_ptr(u->progress.checkpoint, p->checkpoint) && streq_ptr(u->progress.plan, p->plan), "checkpoint and plan survive");
        CHECK(streq_ptr(u->progress.diff_shown, p->diff_shown), "the tip whose diff the model was shown survives");
        CHECK(u->progress.tokens == 123456 && u->progress.commands == 9 && u->progress.extra_steps == 50, "budget survives");
        CHECK(u->progress.test_failures == 2 && u->progress.test_signature == UINT64_MAX - 5 &&
              u->progress.baseline_passed == 40 && u->progress.baseline_done, "test history survives");
        CHECK(streq_ptr(u->progress.breaker, "tests-failing") && u->progress.last_test_exit == -1, "breaker and exit survive");
        /* What failed at the start decides finish after a restart as before it. */
        CHECK(u->progress.baseline_recorded && u->progress.baseline_exit == 1 && u->progress.baseline_failed == 2 &&
              u->progress.baseline_failures_complete && strv_length(u->progress.baseline_failures) == 2 &&
              streq_ptr(u->progress.baseline_failures[1], "math > throws"), "the baseline's failures survive");
        /* And the stuck breaker's count and the budgets told of. */
        CHECK(u->progress.n_recent_calls == 2 && u->progress.recent_calls[0] == 17 &&
              u->progress.recent_calls[1] == UINT64_MAX &&
              u->progress.budget_warned == (TASK_BUDGET_WARNED_STEPS | TASK_BUDGET_WARNED_WALL),
              "recent calls and budget warnings survive");
        /* A paused task goes back where it was paused, after a restart too. */
        CHECK_INT_EQ(u->progress.paused_from, TASK_PREPARING, "the state a pause goes back to survives");
        /* What the task used is banked across restarts; the wall time has
         * one source, the progress's. */
        CHECK(u->progress.resources.cpu_usec == 2500000 && u->progress.resources.memory_peak == TASK_RESOURCE_UNKNOWN &&
              u->progress.resources.net_connections == 4 && u->progress.resources.tokens_in == 1000 &&
              u->progress.resources.tokens_cached == 600 && u->progress.resources.cost_micros == 150 &&
              streq(u->progress.resources.currency, "EUR"), "what the task used survives, unknowns included");
        CHECK_UINT_EQ(u->progress.resources.wall_usec, 61000000, "the wall time is the progress's");
        task_free(t);
        task_free(u);
}

/* A step the state file never acknowledged (it could not be written) is not
 * taken as done when the task goes on: the progress is read back first. */
static void test_settle_unsaved(void) {
        Task *t = make_task("0123456789ad");
        sd_bus_error e = SD_BUS_ERROR_NULL;

        t->progress.step = 1;
        t->progress.messages = 3;
        t->progress.checkpoint = strdup("1111111111111111111111111111111111111111");
        CHECK(task_create(t) >= 0, "saved at step 1");
        CHECK(task_settle_progress(t) == 0 && t->progress.step == 1, "nothing to settle: unchanged");

        /* In memory the task went on; then the file system filled up. */
        t->progress.step = 2;
        t->progress.messages = 5;
        (void) free_and_strdup(&t->progress.checkpoint, "2222222222222222222222222222222222222222");
        task_fail_unsaved(t, "Cannot save the task's state", -ENOSPC);
        CHECK(t->state == TASK_FAILED && t->progress_unsaved && strstr(t->reason, "No space left on device"),
              "failed in memory, saying why: %s", t->reason);
        CHECK(task_set_state(t, TASK_QUEUED, NULL, 1000, &e) >= 0, "resumed");
        CHECK(!t->progress_unsaved && t->progress.step == 1 && t->progress.messages == 3 &&
              streq_ptr(t->progress.checkpoint, "1111111111111111111111111111111111111111"),
              "it goes on from the acknowledged step %u, not from the one in memory", t->progress.step);
        _cleanup_free_ char *text = read_state("0123456789ad");
        CHECK(text && strstr(text, "\"queued\"") && !strstr(text, "2222222222"), "and the file says the same");
        sd_bus_error_free(&e);
        task_free(t);
}

static void test_corruption(void) {
        static const struct {
                const char *name, *text, *reason;
        } cases[] = {
                { "truncated",     "{\"version\":1,\"id\":\"aaaaaaaaaaa1\",\"own", "not valid JSON" },
                { "garbage",       "\x7f" "ELF\x01\x02 binary junk", "not valid JSON" },
                { "empty",         "", "not valid JSON" },
                { "trailing",      "{\"version\":1} {\"version\":1}", "not valid JSON" },
                { "array",         "[1,2,3]", "not a JSON object" },
                { "new version",   "{\"version\":99}", "version 99 is not supported" },
                { "no version",    "{\"id\":\"x\"}", "no 'version'" },
                { "wrong id",      "{\"version\":1,\"id\":\"ffffffffffff\"}", "'id'" },
                { "bad state",     "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"exploded\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{}}", "'state'" },
                { "negative owner","{\"version\":1,\"id\":\"@\",\"owner\":-1,\"state\":\"queued\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{}}", "'owner'" },
                { "owner string",  "{\"version\":1,\"id\":\"@\",\"owner\":\"root\",\"state\":\"queued\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{}}", "'owner'" },
                { "spec missing goal", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"queued\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\"}}", "goal" },
                { "spec bad key",  "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"queued\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\",\"evil\":\"x\"}}", "Unknown key" },
                { "spec bad limit","{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"queued\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\",\"limits\":{\"max_steps\":\"ten\"}}}", "limit" },
                /* The agent's progress decides where a resumed task starts: a
                 * checkpoint that is not a commit id must never reach git. */
                { "progress not object", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"running\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\"},\"progress\":7}", "'progress'" },
                { "bad checkpoint", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"running\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\"},\"progress\":{\"checkpoint\":\"HEAD~1; rm -rf /\"}}", "'progress'" },
                /* SECURITY: what the proxy lets the task reach comes only in
                 * the shape an approval could have given it. */
                { "allowed host bad", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"running\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\"},\"progress\":{\"allowed_hosts\":[\"a b\"]}}", "'progress'" },
                { "allowed hosts not array", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"running\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\"},\"progress\":{\"allowed_hosts\":\"x\"}}", "'progress'" },
                /* Resume() of a paused task goes back to this state: only one Pause() may leave. */
                { "bad paused_from", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"paused\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\"},\"progress\":{\"paused_from\":\"succeeded\"}}", "'progress'" },
                { "step not number", "{\"version\":1,\"id\":\"@\",\"owner\":1,\"state\":\"running\",\"reason\":\"\",\"created_usec\":1,\"updated_usec\":1,\"spec\":{\"repository\":\"/r\",\"goal\":\"g\"},\"progress\":{\"step\":\"3\"}}", "'progress'" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char id[AGENTFAB_TASK_ID_LEN + 1], text[1024];
                Task *t = NULL;
                sd_bus_error e = SD_BUS_ERROR_NULL;

                snprintf(id, sizeof(id), "aaaaaaaaaa%02zx", i);
                /* '@' in a case stands for the task's own id. */
                const char *at = strchr(cases[i].text, '@');
                if (at)
                        snprintf(text, sizeof(text), "%.*s%s%s", (int) (at - cases[i].text), cases[i].text, id, at + 1);
                else
                        snprintf(text, sizeof(text), "%s", cases[i].text);
                write_state(id, text);

                /* A damaged record is never a crash and never vanishes: it is
                 * shown as failed, says why, and is left alone on disk. */
                int r = task_load(tasks_fd, id, &t);
                CHECK(r >= 0 && t, "%s: loaded without crashing", cases[i].name);
                if (!t)
                        continue;
                CHECK(t->broken && t->state == TASK_FAILED, "%s: marked broken and failed", cases[i].name);
                CHECK(strstr(t->reason, cases[i].reason) != NULL, "%s: reason says '%s' (got '%s')", cases[i].name, cases[i].reason, t->reason);
                CHECK(task_set_state(t, TASK_QUEUED, NULL, 0, &e) < 0 && sd_bus_error_has_name(&e, AGENTFAB_ERROR_STATE_BROKEN),
                      "%s: read-only", cases[i].name);
                sd_bus_error_free(&e);
                char *now = read_state(id);
                CHECK(now && streq(now, text), "%s: file left untouched", cases[i].name);
                free(now);
                task_free(t);
        }

        /* A missing state file (crash between mkdir and write of an old
         * version) is reported the same way. */
        Task *t = NULL;
        (void) mkdirat(tasks_fd, "bbbbbbbbbbbb", 0700);
        CHECK(task_load(tasks_fd, "bbbbbbbbbbbb", &t) >= 0 && t->broken && strstr(t->reason, "cannot read"), "missing state file reported");
        task_free(t);

        /* A huge file is not read into memory. */
        (void) mkdirat(tasks_fd, "cccccccccccc", 0700);
        int dfd = openat(tasks_fd, "cccccccccccc", O_RDONLY | O_DIRECTORY);
        int fd = openat(dfd, TASK_STATE_FILE, O_WRONLY | O_CREAT, 0600);
        CHECK_INT_EQ(ftruncate(fd, TASK_STATE_FILE_MAX + 1), 0, "made an oversized state file");
        close(fd);
        close(dfd);
        t = NULL;
        CHECK(task_load(tasks_fd, "cccccccccccc", &t) >= 0 && t->broken && strstr(t->reason, "too large"), "oversized state file refused: %s", t ? t->reason : "");
        task_free(t);

        /* A symlink planted in place of the state file is not followed. */
        (void) mkdirat(tasks_fd, "dddddddddddd", 0700);
        dfd = openat(tasks_fd, "dddddddddddd", O_RDONLY | O_DIRECTORY);
        CHECK_INT_EQ(symlinkat("/etc/passwd", dfd, TASK_STATE_FILE), 0, "planted symlink");
        close(dfd);
        t = NULL;
        CHECK(task_load(tasks_fd, "dddddddddddd", &t) >= 0 && t->broken, "symlinked state file not followed");
        task_free(t);
}

static void test_interrupted_create(void) {
        struct stat st;

        /* What a crash in the middle of task_create() leaves is cleaned up,
         * and never shows up as a task. */
        CHECK_INT_EQ(mkdirat(tasks_fd, ".new-eeeeeeeeeeee", 0700), 0, "left a half-made task directory");
        task_store_clean(tasks_fd);
        CHECK(fstatat(tasks_fd, ".new-eeeeeeeeeeee", &st, 0) < 0 && errno == ENOENT, "half-made task directory removed");
}

static void test_ids(void) {
        char a[AGENTFAB_TASK_ID_LEN + 1], b[AGENTFAB_TASK_ID_LEN + 1];

        CHECK(task_id_generate(a) >= 0 && task_id_generate(b) >= 0 && !streq(a, b), "ids are random");
        CHECK(task_id_is_valid(a), "generated id is valid");
        CHECK(!task_id_is_valid("../../etc/pa") && !task_id_is_valid("ABCDEF012345") && !task_id_is_valid("0123") &&
              !task_id_is_valid(""), "ids that could be paths or are malformed are refused");
        Task *t = NULL;
        CHECK(task_new(&t, "../x") < 0 && !t, "task_new refuses a bad id");
}

int main(void) {
        char dir[] = "/tmp/test-task-store-XXXXXX";

        if (!mkdtemp(dir))
                return 1;
        tasks_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        test_round_trip();
        test_progress_round_trip();
        test_settle_unsaved();
        test_corruption();
        test_interrupted_create();
        test_ids();

        (void) rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
