/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "agentfab-bus.h"
#include "forge.h"
#include "fs-util.h"
#include "json-util.h"
#include "review-stage.h"
#include "string-util.h"
#include "summary.h"
#include "task-job.h"
#include "task-store.h"

#define SUMMARY_LEFT_OUT_MAX 32U   /* left-out events listed */

struct SummaryInput {
        int dir_fd;             /* the task's directory: its events and review records */
        char *id, *reference, *goal, *acceptance, *environment, *agent_summary, *plan;
        char *steps;            /* the "## Steps" list, one line each */
        char *diffstat;
        char *test_command, *last_tests, *checkpoint;
        unsigned requirement, step;
        int last_test_exit;
        bool verified;
        uint64_t tokens, commands, wall_usec;
        char *resources;        /* task_resources_format()'s line */
        uint64_t model_calls, tokens_cached;
};

SummaryInput *summary_input_free(SummaryInput *in) {
        if (!in)
                return NULL;
        safe_close(in->dir_fd);
        free(in->id);
        free(in->reference);
        free(in->goal);
        free(in->acceptance);
        free(in->environment);
        free(in->agent_summary);
        free(in->plan);
        free(in->steps);
        free(in->diffstat);
        free(in->test_command);
        free(in->last_tests);
        free(in->checkpoint);
        free(in->resources);
        free(in);
        return NULL;
}

int summary_input_new(AgentRun *run, const char *diffstat, json_object *checkpoints, SummaryInput **ret) {
        _cleanup_(summary_input_freep) SummaryInput *in = NULL;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        size_t size = 0;
        FILE *f;

        in = calloc(1, sizeof(SummaryInput));
        if (!in)
                return -ENOMEM;
        in->dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3);
        if (in->dir_fd < 0)
                return -errno;
        in->requirement = task_requirement_version(t);
        in->step = p->step;
        in->last_test_exit = p->last_test_exit;
        in->verified = p->verified;
        in->tokens = p->tokens;
        in->commands = p->commands;
        in->wall_usec = p->wall_usec;
        TaskResources res = p->resources;
        res.wall_usec = p->wall_usec;
        in->resources = task_resources_format(&res);
        if (!in->resources)
                return -ENOMEM;
        in->model_calls = res.model_calls;
        in->tokens_cached = res.tokens_cached;
        if (free_and_strdup(&in->id, t->id) < 0 || free_and_strdup(&in->reference, t->spec.reference) < 0 ||
            free_and_strdup(&in->goal, t->spec.goal) < 0 || free_and_strdup(&in->acceptance, t->spec.acceptance) < 0 ||
            free_and_strdup(&in->environment, p->environment_identity) < 0 ||
            free_and_strdup(&in->agent_summary, p->summary) < 0 || free_and_strdup(&in->plan, p->plan) < 0 ||
            free_and_strdup(&in->diffstat, diffstat) < 0 || free_and_strdup(&in->test_command, t->spec.test_command) < 0 ||
            free_and_strdup(&in->last_tests, p->last_tests) < 0 || free_and_strdup(&in->checkpoint, p->checkpoint) < 0)
                return -ENOMEM;

        /* One line a checkpoint, here: the list is the run's, not the thread's. */
        f = open_memstream(&in->steps, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; checkpoints && i < json_object_array_length(checkpoints); i++) {
                json_object *c = json_object_array_get_idx(checkpoints, i);
                const char *commit = NULL, *subject = NULL;
                uint64_t step = 0;
                (void) json_get_string(c, "commit", &commit);
                (void) json_get_string(c, "subject", &subject);
                (void) json_get_uint64(c, "step", &step);
                fprintf(f, "- step %llu, %.12s: %s\n", (unsigned long long) step, strempty(commit), strempty(subject));
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(in);
        return 0;
}

int summary_text(const SummaryInput *in, char **ret, size_t *ret_size) {
        _cleanup_free_ char *events = NULL;
        FILE *f;
        char *text = NULL;
        size_t size = 0;

        (void) read_file_at(in->dir_fd, TASK_EVENTS_FILE, 16 * 1024 * 1024, &events, NULL);

        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "# agentfab task %s\n\n", in->id);
        /* The requirement, as the commits name it (Agentfab-Ref:, Agentfab-Requirement:). */
        if (in->reference)
                fprintf(f, "Reference: %s\n\n", in->reference);
        fprintf(f, "Requirement: v%u%s\n\n", in->requirement,
                in->requirement > 1 ? " (amended while the task ran: see the journal's amended entries)" : "");
        fprintf(f, "## Goal\n\n%s\n\n", strempty(in->goal));
        if (!isempty(in->acceptance))
                fprintf(f, "## Acceptance criteria\n\n%s\n\n", in->acceptance);
        if (in->environment)
                fprintf(f, "## Environment\n\n%s\n\n", in->environment);
        if (!isempty(in->agent_summary))
                fprintf(f, "## What the agent says it did\n\n%s\n\n", in->agent_summary);
        if (!isempty(in->plan))
                fprintf(f, "## Plan\n\n%s\n\n", in->plan);

        fprintf(f, "## Steps\n\n%s", strempty(in->steps));

        fprintf(f, "\n## Files changed\n\n```\n%s```\n\n", strempty(in->diffstat));
        fprintf(f, "## Tests\n\n");
        if (isempty(in->test_command))
                fprintf(f, "No test command was given.\n\n");
        else if (in->verified)
                fprintf(f, "`%s`: %s (exit status %i), run by agentfabd itself on the final tree, in the task's "
                        "sandbox; recorded in commit %.12s, the delivered tip.%s\n\n", in->test_command,
                        strempty(in->last_tests), in->last_test_exit, strempty(in->checkpoint),
                        streq_ptr(in->last_tests, "fail") ?
                        " What fails failed before the task too and is not a test the goal or the acceptance criteria "
                        "name (finish's rule, agentfabd(8)); the delivered tip's message names it." : "");
        else
                fprintf(f, "`%s`: %s (exit status %i)\n\n", in->test_command, strempty(in->last_tests),
                        in->last_test_exit);

        /* The review stage's findings (a secret's value is never among them). */
        _cleanup_free_ char *review = NULL;
        if (review_stage_markdown(in->dir_fd, &review) >= 0 && review)
                fprintf(f, "%s\n", review);

        /* Breakers and decisions, from the task's own history; what was
         * left out of the branch is gathered on the way. */
        _cleanup_free_ char *left_text = NULL;
        size_t left_size = 0;
        FILE *lf = open_memstream(&left_text, &left_size);
        if (!lf) {
                fclose(f);
                free(text);
                return -ENOMEM;
        }
        fprintf(f, "## Breakers and approvals\n\n");
        bool any = false, approved = false;
        unsigned left_out = 0;
        for (char *line = events, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                _cleanup_json_ json_object *e = NULL;
                const char *type = NULL, *what = NULL, *reason = NULL, *comment = NULL;
                uint64_t uid = UINT64_MAX, usec = 0;

                nl = strchr(line, '\n');
                if (json_parse_strict(line, nl ? (size_t) (nl - line) : strlen(line), &e) < 0)
                        continue;
                (void) json_get_string(e, "type", &type);
                (void) json_get_uint64(e, "uid", &uid);
                (void) json_get_uint64(e, "usec", &usec);
                if (streq_ptr(type, "left-out")) {
                        const char *paths = NULL;
                        (void) json_get_string(e, "paths", &paths);
                        if (paths && left_out < SUMMARY_LEFT_OUT_MAX)
                                fprintf(lf, "- %s\n", paths);
                        left_out++;
                        continue;
                }
                if (streq_ptr(type, "breaker")) {
                        (void) json_get_string(e, "breaker", &what);
                        (void) json_get_string(e, "reason", &reason);
                        fprintf(f, "- breaker **%s**: %s\n", strempty(what), strempty(reason));
                        any = true;
                } else if (streq_ptr(type, "request")) {
                        (void) json_get_string(e, "request", &what);
                        (void) json_get_string(e, "comment", &comment);
                        if (!streq_ptr(what, "approve") && !streq_ptr(what, "reject"))
                                continue;
                        time_t when = (time_t) (usec / USEC_PER_SEC);
                        struct tm tm;
                        char ts[64] = "";
                        if (gmtime_r(&when, &tm))
                                strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S UTC", &tm);
                        /* In a worker thread: getpwuid() is the loop's. */
                        struct passwd pwbuf, *pw = NULL;
                        char pwtext[1024];
                        if (uid != UINT64_MAX && getpwuid_r((uid_t) uid, &pwbuf, pwtext, sizeof(pwtext), &pw) != 0)
                                pw = NULL;
                        fprintf(f, "- %s by %s (uid %llu) at %s%s%s\n", streq(what, "approve") ? "approved" : "rejected",
                                pw ? pw->pw_name : "?", (unsigned long long) uid, ts,
                                comment ? ": " : "", strempty(comment));
                        if (streq(what, "approve"))
                                approved = true;
                        any = true;
                }
        }
        if (!any)
                fprintf(f, "None.\n");

        fprintf(f, "\n## Budget used\n\n- steps: %u\n- model tokens: %llu\n- commands: %llu\n- wall clock: %llu s\n",
                in->step, (unsigned long long) in->tokens, (unsigned long long) in->commands,
                (unsigned long long) (in->wall_usec / USEC_PER_SEC));
        fprintf(f, "- resources: %s\n", in->resources);
        if (in->model_calls != TASK_RESOURCE_UNKNOWN)
                fprintf(f, "- model calls: %llu (prompt tokens the server had cached: %llu)\n",
                        (unsigned long long) in->model_calls,
                        (unsigned long long) (in->tokens_cached == TASK_RESOURCE_UNKNOWN ? 0 : in->tokens_cached));

        fprintf(f, "\n## Needs human confirmation\n\n");
        bool needs = false;
        if (isempty(in->test_command)) {
                fprintf(f, "- There is no test command: nothing checked the change automatically.\n");
                needs = true;
        }
        if (approved) {
                fprintf(f, "- A breaker stopped this task and a person let it go on: review those steps above all.\n");
                needs = true;
        }
        if (isempty(in->acceptance)) {
                fprintf(f, "- No acceptance criteria were given: check that the change does what was meant.\n");
                needs = true;
        }
        if (left_out > 0) {
                fprintf(f, "- Files were left out of the branch and stay in the workspace only (below): check that "
                        "none of them belongs to the change. `journalctl AGENTFAB_TASK=%s AGENTFAB_EVENT=left-out` "
                        "names them all.\n", in->id);
                needs = true;
        }
        if (!needs)
                fprintf(f, "- Review the diff as you would any contribution.\n");

        if (fclose(lf) != 0) {
                fclose(f);
                free(text);
                return -ENOMEM;
        }
        if (left_out > 0) {
                fprintf(f, "\n## Left out of the branch\n\nBuild output, binaries, what the tests wrote and what git "
                        "cannot record stay in the workspace, not on the branch (step by step%s):\n\n%s",
                        left_out > SUMMARY_LEFT_OUT_MAX ? ", the first steps" : "", strempty(left_text));
        }

        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        /* File names, subjects, the goal and the model's words: none of it
         * may reach a terminal or a pull request as a control sequence. */
        utf8_sanitize(text, size);
        char *shown = text_escape_controls(text);
        free(text);
        if (!shown)
                return -ENOMEM;
        *ret = shown;
        *ret_size = strlen(shown);
        return 0;
}

int summary_write(const SummaryInput *in) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = summary_text(in, &text, &size);
        if (r < 0)
                return r;
        return write_file_atomic(in->dir_fd, TASK_SUMMARY_FILE, text, size, 0600);
}

/* The pull request's body: the summary as written, bounded (forges refuse
 * very long bodies) and valid UTF-8 (it goes into JSON). */
int summary_pull_request_body(int dir_fd, const char *id, char **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = read_file_at(dir_fd, TASK_SUMMARY_FILE, 16u * 1024u * 1024u, &text, &size);
        if (r < 0)
                return r;
        if (size > FORGE_BODY_MAX - 256) {
                size = FORGE_BODY_MAX - 256;
                text[size] = '\0';
                utf8_sanitize(text, size);
                char *cut = NULL;
                if (asprintf(&cut, "%s\n\n*(The summary is cut here: \"agentfabctl summary %s\" shows all of it.)*\n",
                             text, id) < 0)
                        return -ENOMEM;
                *ret = cut;
                return 0;
        }
        utf8_sanitize(text, size);
        *ret = TAKE_PTR(text);
        return 0;
}
