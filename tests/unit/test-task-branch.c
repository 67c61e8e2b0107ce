/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Checkpoints property's list is read from the ledger once for each
 * tip of the branch: asked again at the same tip, the list kept is the
 * answer, with no ledger opened; at another tip it is read again. */
#include <errno.h>

#include "string-util.h"
#include "tap.h"
#include "task-branch.h"
#include "task.h"

int main(void) {
        _cleanup_(task_freep) Task *t = NULL;
        json_object *list = NULL;
        char *key;

        if (task_new(&t, "0123456789ab") < 0)
                return 1;
        t->tasks_fd = -EBADF;   /* any read of the disk fails */
        t->progress.head = strdup("1111111111111111111111111111111111111111");
        t->progress.checkpoint = strdup("1111111111111111111111111111111111111111");
        t->checkpoints = json_object_new_array();
        t->checkpoints_key = task_branch_checkpoints_key(t);
        CHECK(t->checkpoints_key, "a key");

        CHECK(task_branch_checkpoints(t, &list) >= 0 && list == t->checkpoints, "the same tip: the list kept, no ledger opened");
        json_object_put(list);
        list = NULL;

        key = task_branch_checkpoints_key(t);
        free(t->progress.head);
        t->progress.head = strdup("2222222222222222222222222222222222222222");
        char *other = task_branch_checkpoints_key(t);
        CHECK(!streq_ptr(key, other), "another tip, another key");
        free(key);
        free(other);
        CHECK(task_branch_checkpoints(t, &list) < 0 && !list, "another tip: the ledger is read again (here it cannot be)");

        free(t->progress.head);
        t->progress.head = strdup("1111111111111111111111111111111111111111");
        free(t->progress.checkpoint);
        t->progress.checkpoint = strdup("3333333333333333333333333333333333333333");
        CHECK(task_branch_checkpoints(t, &list) < 0, "the same tip with another checkpoint: read again");
        return tap_done();
}
