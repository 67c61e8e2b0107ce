/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "agent.h"
#include "agentfab-bus.h"
#include "bus-server.h"
#include "fs-util.h"
#include "string-util.h"
#include "task-job.h"

/* GetSummary(): summary.md of a delivered task is read and escaped in the
 * task's job queue, as an export is, since a long task's summary runs to
 * megabytes; the call is answered from there. */

#define SUMMARY_READ_MAX (4u * 1024u * 1024u)

typedef struct SummaryReadJob {
        int dir_fd;
        sd_bus_message *message;
        char *shown;
} SummaryReadJob;

static void summary_read_job_free(void *p) {
        SummaryReadJob *j = p;

        if (!j)
                return;
        safe_close(j->dir_fd);
        sd_bus_message_unref(j->message);
        free(j->shown);
        free(j);
}

static int summary_read_job_run(void *p) {
        _cleanup_free_ char *text = NULL;
        SummaryReadJob *j = p;
        int r;

        r = read_file_at(j->dir_fd, TASK_SUMMARY_FILE, SUMMARY_READ_MAX, &text, NULL);
        if (r < 0)
                return r;
        /* Written escaped; a summary of an older version may not be. */
        utf8_sanitize(text, strlen(text));
        j->shown = text_escape_controls(text);
        return j->shown ? 0 : -ENOMEM;
}

static int summary_reply_error(sd_bus_message *message, Task *t, int r) {
        if (r == -ENOENT)
                return sd_bus_reply_method_errorf(message, AGENTFAB_ERROR_BAD_STATE,
                                                  "Task '%s' has no summary: it is %s, and only a delivered task has one.",
                                                  t->id, task_state_to_string(t->state));
        return sd_bus_reply_method_errnof(message, r, "Failed to read the summary of task '%s': %m", t->id);
}

static void on_summary_read(Task *t, int r, void *p, void *userdata) {
        SummaryReadJob *j = p;

        (void) userdata;
        if (!t) {
                (void) sd_bus_reply_method_errorf(j->message, SD_BUS_ERROR_FAILED,
                                                  "The task went away while its summary was being read.");
                return;
        }
        if (r < 0) {
                (void) summary_reply_error(j->message, t, r);
                return;
        }
        (void) sd_bus_reply_method_return(j->message, "s", j->shown);
}

int task_bus_reply_summary(Task *t, sd_bus_message *message) {
        SummaryReadJob *j;
        int r;

        j = calloc(1, sizeof(SummaryReadJob));
        if (!j)
                return -ENOMEM;
        j->dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (j->dir_fd < 0) {
                r = -errno;
                summary_read_job_free(j);
                return summary_reply_error(message, t, r);
        }
        j->message = sd_bus_message_ref(message);
        r = task_job_enqueue(t, "summary", summary_read_job_run, on_summary_read, summary_read_job_free, j, NULL, NULL);
        if (r < 0) {
                summary_read_job_free(j);
                return r;
        }
        return 1;
}
