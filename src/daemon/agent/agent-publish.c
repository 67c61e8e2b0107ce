/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "agent.h"
#include "agent-run.h"
#include "json-util.h"
#include "string-util.h"

static agent_publish_t publisher;
static void *publisher_userdata;
static uint64_t last_cookie;

void agent_set_publisher(agent_publish_t publish, void *userdata) {
        publisher = publish;
        publisher_userdata = userdata;
}

bool agent_publishing(void) {
        return publisher != NULL;
}

/* The messages the database may lack: from the first this run has not
 * seen published (all of them after a restart: an ack rewrites lines it
 * holds, never adds them twice) to the last the state file holds. */
static int publish_lines(AgentRun *run, char ***ret, size_t *ret_n) {
        size_t n = json_object_array_length(run->messages), from = MIN((size_t) run->published, n);
        _cleanup_strv_free_ char **l = NULL;

        l = calloc(n - from + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = from; i < n; i++) {
                l[i - from] = strdup(json_to_line(json_object_array_get_idx(run->messages, i)));
                if (!l[i - from])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        *ret_n = n - from;
        return (int) from;
}

void agent_publish_step(AgentRun *run, StepCommit *c, void (*done)(AgentRun *run, StepCommit *c)) {
        _cleanup_strv_free_ char **lines = NULL;
        size_t n_lines = 0;
        int from, r;

        if (!publisher)
                return done(run, c);

        from = publish_lines(run, &lines, &n_lines);
        if (from < 0)
                return agent_fail(run, "Out of memory.");
        if (c) {
                run->publishing = step_commit_steal(c);
                if (!run->publishing)
                        return agent_fail(run, "Out of memory.");
        }
        run->publishing_done = done;
        run->publish_cookie = ++last_cookie;
        run->phase = PHASE_SAVE;

        AgentPublish p = {
                .cookie = run->publish_cookie,
                .step = run->task->progress.step,
                .commit = run->publishing && run->publishing->committed ? run->publishing->commit : NULL,
                .first_message = (unsigned) from,
                .lines = lines,
                .n_lines = n_lines,
        };
        r = publisher(run->task, &p, publisher_userdata);
        if (r < 0) {
                run->publish_cookie = 0;
                run->phase = PHASE_IDLE;
                return agent_fail(run, "Cannot publish step %u to the fleet: %s", p.step, strerror(-r));
        }
}

void agent_published(Task *t, uint64_t cookie, int r) {
        AgentRun *run = t ? t->run : NULL;
        _cleanup_(step_commit_freep) StepCommit *c = NULL;
        void (*done)(AgentRun *run, StepCommit *c);

        if (!run || cookie == 0 || run->publish_cookie != cookie)
                return;
        c = TAKE_PTR(run->publishing);
        done = TAKE_PTR(run->publishing_done);
        run->publish_cookie = 0;
        run->phase = PHASE_IDLE;
        if (r == -ESTALE)
                /* Another host holds the task: the publisher stops it
                 * here, and nothing follows from a step that does not
                 * count. */
                return;
        if (r < 0)
                return agent_fail(run, "Cannot publish step %u to the fleet: %s", t->progress.step, strerror(-r));
        run->published = (unsigned) json_object_array_length(run->messages);
        if (t->state == TASK_PAUSED) {
                /* As a step acknowledged while paused (agent-state.c): what
                 * follows from it waits for the resume. */
                if (!c)
                        return;
                run->held = TAKE_PTR(c);
                run->held_done = done;
                run->phase = PHASE_LEDGER;
                return;
        }
        done(run, c);
}
