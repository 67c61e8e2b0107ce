/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "review-stage.h"
#include "agent-loop.h"
#include "agent-run.h"
#include "forge.h"
#include "fs-util.h"
#include "json-util.h"
#include "string-util.h"
#include "summary.h"
#include "task-store.h"

int summary_text(AgentRun *run, const char *diffstat, json_object *checkpoints, char **ret, size_t *ret_size) {
        _cleanup_free_ char *events = NULL;
        Task *t = run->task;
        TaskProgress *p = &t->progress;
        FILE *f;
        char *text = NULL;
        size_t size = 0;

        (void) read_file_at(run->dir_fd, TASK_EVENTS_FILE, 16 * 1024 * 1024, &events, NULL);

        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "# agentfab task %s\n\n", t->id);
        /* The requirement, as the commits name it (Agentfab-Ref:, Agentfab-Requirement:). */
        if (t->spec.reference)
                fprintf(f, "Reference: %s\n\n", t->spec.reference);
        fprintf(f, "Requirement: v%u%s\n\n", task_requirement_version(t),
                task_requirement_version(t) > 1 ? " (amended while the task ran: see the journal's amended entries)" : "");
        fprintf(f, "## Goal\n\n%s\n\n", t->spec.goal);
        if (!isempty(t->spec.acceptance))
                fprintf(f, "## Acceptance criteria\n\n%s\n\n", t->spec.acceptance);
        if (p->environment_identity)
                fprintf(f, "## Environment\n\n%s\n\n", p->environment_identity);
        if (!isempty(p->summary))
                fprintf(f, "## What the agent says it did\n\n%s\n\n", p->summary);
        if (!isempty(p->plan))
                fprintf(f, "## Plan\n\n%s\n\n", p->plan);

        fprintf(f, "## Steps\n\n");
        for (size_t i = 0; checkpoints && i < json_object_array_length(checkpoints); i++) {
                json_object *c = json_object_array_get_idx(checkpoints, i);
                const char *commit = NULL, *subject = NULL;
                uint64_t step = 0;
                (void) json_get_string(c, "commit", &commit);
                (void) json_get_string(c, "subject", &subject);
                (void) json_get_uint64(c, "step", &step);
                fprintf(f, "- step %llu, %.12s: %s\n", (unsigned long long) step, strempty(commit), strempty(subject));
        }

        fprintf(f, "\n## Files changed\n\n```\n%s```\n\n", strempty(diffstat));
        fprintf(f, "## Tests\n\n");
        if (isempty(t->spec.test_command))
                fprintf(f, "No test command was given.\n\n");
        else if (p->verified)
                fprintf(f, "`%s`: %s (exit status %i), run by agentfabd itself on the final tree, in the task's "
                        "sandbox; recorded in commit %.12s, the delivered tip.\n\n", t->spec.test_command,
                        strempty(p->last_tests), p->last_test_exit, strempty(p->checkpoint));
        else
                fprintf(f, "`%s`: %s (exit status %i)\n\n", t->spec.test_command, strempty(p->last_tests),
                        p->last_test_exit);

        /* The review stage's findings (a secret's value is never among them). */
        _cleanup_free_ char *review = NULL;
        if (review_stage_markdown(t, &review) >= 0 && review)
                fprintf(f, "%s\n", review);

        /* Breakers and decisions, from the task's own history. */
        fprintf(f, "## Breakers and approvals\n\n");
        bool any = false, approved = false;
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
                        struct passwd *pw = uid != UINT64_MAX ? getpwuid((uid_t) uid) : NULL;
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
                p->step, (unsigned long long) p->tokens, (unsigned long long) p->commands,
                (unsigned long long) (p->wall_usec / USEC_PER_SEC));

        fprintf(f, "\n## Needs human confirmation\n\n");
        bool needs = false;
        if (isempty(t->spec.test_command)) {
                fprintf(f, "- There is no test command: nothing checked the change automatically.\n");
                needs = true;
        }
        if (approved) {
                fprintf(f, "- A breaker stopped this task and a person let it go on: review those steps above all.\n");
                needs = true;
        }
        if (isempty(t->spec.acceptance)) {
                fprintf(f, "- No acceptance criteria were given: check that the change does what was meant.\n");
                needs = true;
        }
        if (!needs)
                fprintf(f, "- Review the diff as you would any contribution.\n");

        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        *ret_size = size;
        return 0;
}

/* The pull request's body: the summary as written, bounded (forges refuse
 * very long bodies) and valid UTF-8 (it goes into JSON). */
int summary_pull_request_body(AgentRun *run, char **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = read_file_at(run->dir_fd, TASK_SUMMARY_FILE, 16u * 1024u * 1024u, &text, &size);
        if (r < 0)
                return r;
        if (size > FORGE_BODY_MAX - 256) {
                size = FORGE_BODY_MAX - 256;
                text[size] = '\0';
                utf8_sanitize(text, size);
                char *cut = NULL;
                if (asprintf(&cut, "%s\n\n*(The summary is cut here: \"agentfabctl summary %s\" shows all of it.)*\n",
                             text, run->task->id) < 0)
                        return -ENOMEM;
                *ret = cut;
                return 0;
        }
        utf8_sanitize(text, size);
        *ret = TAKE_PTR(text);
        return 0;
}

int summary_read(Task *t, char **ret) {
        _cleanup_close_ int dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        return read_file_at(dir_fd, TASK_SUMMARY_FILE, 4 * 1024 * 1024, ret, NULL);
}
