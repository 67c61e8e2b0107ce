/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "agentfab-bus.h"
#include "exec-session.h"
#include "factory.h"
#include "string-util.h"
#include "task-job.h"
#include "task-save.h"
#include "task-store.h"
#include "task.h"
#include "time-util.h"

uint64_t now_usec(void) {
        return clock_now_usec(CLOCK_REALTIME);
}

int task_id_generate(char ret[static AGENTFAB_TASK_ID_LEN + 1]) {
        uint8_t b[AGENTFAB_TASK_ID_LEN / 2];

        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
                return -errno ?: -EIO;
        for (size_t i = 0; i < sizeof(b); i++)
                snprintf(ret + 2 * i, 3, "%02x", b[i]);
        return 0;
}

int task_new(Task **ret, const char *id) {
        _cleanup_(task_freep) Task *t = NULL;

        if (!task_id_is_valid(id))
                return -EINVAL;

        t = calloc(1, sizeof(Task));
        if (!t)
                return -ENOMEM;
        t->tasks_fd = -EBADF;
        t->owner = UID_INVALID;
        t->state = TASK_QUEUED;
        task_spec_init(&t->spec);
        t->progress.baseline_passed = -1;
        t->progress.paused_from = TASK_RUNNING;
        task_resources_init(&t->progress.resources);
        t->id = strdup(id);
        t->reason = strdup("");
        if (!t->id || !t->reason || asprintf(&t->branch, "agentfab/%s", id) < 0)
                return -ENOMEM;

        *ret = TAKE_PTR(t);
        return 0;
}

void task_progress_done(TaskProgress *p) {
        free(p->checkpoint);
        free(p->head);
        free(p->plan);
        free(p->last_tests);
        free(p->breaker);
        free(p->breaker_commit);
        free(p->summary);
        free(p->diff_shown);
        free(p->pull_request);
        free(p->environment_identity);
        strv_free(p->allowed_hosts);
        strv_free(p->approvals);
        free(p->test_windows);
        strv_free(p->written);
        strv_free(p->kept);
        free(p->keep_pending);
        free(p->keep_reason);
        free(p->kept_note);
        strv_free(p->baseline_failures);
        *p = (TaskProgress) { .baseline_passed = -1, .paused_from = TASK_RUNNING };
        task_resources_init(&p->resources);
}

int task_progress_add_test_window(TaskProgress *p, uint64_t start, uint64_t end) {
        if (end < start)
                return -EINVAL;
        /* Full: the two oldest become one, so that everything they covered
         * is still covered. */
        if (p->n_test_windows >= TASK_TEST_WINDOWS_MAX) {
                p->test_windows[1] = p->test_windows[3];
                memmove(p->test_windows + 2, p->test_windows + 4, (p->n_test_windows - 2) * 2 * sizeof(uint64_t));
                p->n_test_windows--;
        }
        uint64_t *w = reallocarray(p->test_windows, p->n_test_windows + 1, 2 * sizeof(uint64_t));
        if (!w)
                return -ENOMEM;
        p->test_windows = w;
        w[2 * p->n_test_windows] = start;
        w[2 * p->n_test_windows + 1] = end;
        p->n_test_windows++;
        return 0;
}

static int strv_add_bounded(char ***l, const char *s, size_t max) {
        size_t n = 0;

        for (char **i = *l; i && *i; i++, n++)
                if (streq(*i, s))
                        return 0;
        if (n >= max)
                return -E2BIG;
        return strv_extend(l, s);
}

int task_progress_add_written(TaskProgress *p, const char *path) {
        return strv_add_bounded(&p->written, path, TASK_WRITTEN_MAX);
}

int task_progress_add_kept(TaskProgress *p, const char *path) {
        return strv_add_bounded(&p->kept, path, TASK_KEPT_MAX);
}

Task *task_free(Task *t) {
        if (!t)
                return NULL;
        task_jobs_free(t);
        task_save_detach(t);
        json_object_put(t->checkpoints);
        free(t->checkpoints_key);
        task_progress_done(&t->progress);
        task_spec_done(&t->spec);
        /* Closed, not thawed: at shutdown a frozen sandbox stays frozen, its
         * connection kept in systemd's fd store for the next instance. */
        sandbox_session_free(t->sandbox);
        free(t->fdstore_name);
        sd_event_source_disable_unref(t->release_timer);
        free(t->id);
        free(t->reason);
        free(t->branch);
        free(t);
        return NULL;
}

char *task_object_path(const Task *t) {
        char *p;
        if (asprintf(&p, AGENTFAB_TASK_PATH_PREFIX "/%s", t->id) < 0)
                return NULL;
        return p;
}

int task_set_state(Task *t, TaskState state, const char *reason, uid_t caller, sd_bus_error *error) {
        _cleanup_free_ char *old_reason = NULL;
        TaskState old_state = t->state;
        uint64_t old_updated = t->updated_usec;
        int r;

        if (t->broken)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_STATE_BROKEN,
                                         "Task '%s' has an unreadable state file and is read-only.", t->id);
        if (!task_state_transition_allowed(t->state, state))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE,
                                         "Task '%s' is %s; it cannot become %s.",
                                         t->id, task_state_to_string(t->state), task_state_to_string(state));
        r = task_settle_progress(t);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot read back the state file of task '%s': %m", t->id);

        old_reason = TAKE_PTR(t->reason);
        t->reason = strdup(strempty(reason));
        if (!t->reason) {
                t->reason = TAKE_PTR(old_reason);
                return -ENOMEM;
        }
        t->state = state;
        t->updated_usec = now_usec();

        /* Durable first: a state that a client or the journal was told about
         * must be the state found after a crash. */
        r = task_save(t);
        if (r < 0) {
                free(t->reason);
                t->reason = TAKE_PTR(old_reason);
                t->state = old_state;
                t->updated_usec = old_updated;
                return sd_bus_error_set_errnof(error, r, "Failed to save task '%s': %m", t->id);
        }

        task_state_changed(t, old_state, caller);
        return 0;
}

unsigned task_requirement_version(const Task *t) {
        return MAX(t->progress.requirement, 1u);
}

void task_fail_unsaved(Task *t, const char *reason, int error) {
        TaskState old_state = t->state;
        char *r = NULL;

        /* The state file cannot be written (the file system is full or
         * failing), so task_set_state() refused. The task must stop all the
         * same, and say why, rather than look busy while nothing happens: it
         * is failed in memory, while the file keeps the last acknowledged
         * checkpoint. Resume() writes the file again once it can; a restarted
         * daemon finds the task at work there and goes on from that
         * checkpoint, as after a crash. */
        if (asprintf(&r, "%s (the state file could not be written: %s)", strempty(reason), strerror(-error)) < 0)
                r = NULL;
        if (r) {
                free(t->reason);
                t->reason = r;
        }
        t->state = TASK_FAILED;
        t->updated_usec = now_usec();
        t->progress_unsaved = true;
        task_state_changed(t, old_state, UID_INVALID);
}
