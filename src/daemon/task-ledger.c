/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "conversation.h"
#include "json-util.h"
#include "ledger.h"
#include "string-util.h"
#include "task-ledger.h"
#include "task-store.h"

static int task_ledger_open(Task *t, Ledger **ret) {
        _cleanup_close_ int dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        return ledger_open(dir_fd, t->branch, ret);
}

int task_ledger_export(Task *t, const char *format, int *ret_fd, sd_bus_error *error) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!streq(format, "bundle") && !streq(format, "mbox") && !streq(format, "diff"))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown export format '%s': use bundle, mbox or diff.", format);
        if (!t->progress.checkpoint && !t->progress.head)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_BAD_STATE, "Task '%s' has no commits yet.", t->id);

        r = task_ledger_open(t, &l);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot open the ledger of task '%s': %m", t->id);

        /* A memfd holds the export, so that the caller reads it at its own
         * pace and the daemon never blocks on a slow reader. */
        fd = memfd_create("agentfab-export", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = streq(format, "bundle") ? ledger_export_bundle(l, fd) :
                streq(format, "mbox") ? ledger_export_mbox(l, fd) : ledger_export_diff(l, fd);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot export task '%s': %m", t->id);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int task_ledger_base_commit(Task *t, char ret[static 41]) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        int r;

        r = task_ledger_open(t, &l);
        if (r < 0)
                return r;
        return ledger_base(l, ret);
}

int task_ledger_checkpoints(Task *t, json_object **ret) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        int r;

        r = task_ledger_open(t, &l);
        if (r < 0)
                return r;
        return ledger_checkpoints(l, ret);
}

int task_ledger_commits(Task *t, json_object **ret) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        int r;

        r = task_ledger_open(t, &l);
        if (r < 0)
                return r;
        return ledger_commits(l, TASK_LEDGER_COMMITS_MAX, ret);
}

int task_ledger_reset_to(Task *t, const char *rev, uid_t uid, char ret_commit[static 41], char ret_undone[static 41],
                   sd_bus_error *error) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        _cleanup_json_ json_object *list = NULL;
        _cleanup_free_ char *text = NULL;
        char base[41], found[41] = "";
        unsigned found_step = 0;
        size_t n = rev ? strlen(rev) : 0;
        int r;

        /* A commit id of the branch, abbreviated to no less than 7 digits, or "base". */
        if (!rev || (!streq(rev, "base") && (n < 7 || n > 40 || strspn(rev, "0123456789abcdef") != n)))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "'%s' is neither 'base' nor a commit id of 7 to 40 lowercase hex digits.", strempty(rev));

        r = task_ledger_open(t, &l);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot open the ledger of task '%s': %m", t->id);
        r = ledger_base(l, base);
        if (r >= 0)
                r = ledger_checkpoints(l, &list);
        /* The tip that goes off the branch, for the journal: its objects stay. */
        if (r >= 0)
                r = ledger_head(l, ret_undone);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot read the checkpoints of task '%s': %m", t->id);

        if (streq(rev, "base") || strneq(base, rev, n))
                memcpy(found, base, sizeof(found));
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *c = json_object_array_get_idx(list, i);
                const char *commit;
                uint64_t step;

                if (json_get_string(c, "commit", &commit) < 0 || json_get_uint64(c, "step", &step) < 0 ||
                    streq(rev, "base") || !strneq(commit, rev, n))
                        continue;
                if (found[0] && !streq(found, commit))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "'%s' is ambiguous among the checkpoints of task '%s'.", rev, t->id);
                strncpy(found, commit, sizeof(found) - 1);
                found_step = (unsigned) step;
        }
        if (!found[0])
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "'%s' is not the base nor a checkpoint of task '%s' (see its Checkpoints).", rev, t->id);

        /* Resume goes on from here; the model hears what is gone. */
        TaskProgress *p = &t->progress;
        if (free_and_strdup(&p->checkpoint, found) < 0 || free_and_strdup(&p->head, found) < 0)
                return -ENOMEM;
        /* A delivery's record of its tests may be gone from the branch now. */
        p->verified = false;
        /* And its review was of another tree. */
        p->reviewed = false;
        if (found_step > 0)
                r = asprintf(&text, "A human (uid %u) reset the workspace and the branch to the checkpoint of step %u "
                             "(commit %s): everything you did after it is undone. Continue from there.",
                             (unsigned) uid, found_step, found);
        else
                r = asprintf(&text, "A human (uid %u) reset the workspace and the branch to where the task started "
                             "(commit %s): everything you did is undone. Start again from there.", (unsigned) uid, found);
        if (r < 0)
                return -ENOMEM;
        r = conversation_append_user(t, text);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot tell the model about the reset of task '%s': %m", t->id);
        /* Acknowledged first: should the reset itself fail, a resume makes
         * the workspace match this checkpoint anyway. */
        r = task_save(t);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot save task '%s': %m", t->id);
        r = ledger_reset(l, found);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot reset the workspace of task '%s' to %s: %m", t->id, found);
        memcpy(ret_commit, found, 41);
        return found_step;
}
