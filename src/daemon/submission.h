/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A SubmitTask() whose repository came as an fd (a directory or a bundle):
 * the task's own repository is made from it in a worker thread, in the
 * task's hidden ".new-ID" directory, while the loop serves everybody else;
 * the call is answered, and the task appears, only once that is done. */

#include <systemd/sd-bus.h>

#include "manager.h"
#include "task.h"

/* Takes t (its spec's repository_fd open) and the call to answer. */
int submission_start(Manager *m, sd_bus_message *message, Task *t, sd_bus_error *error);

/* Submissions still importing, of uid (UID_INVALID: of everybody). */
unsigned submissions_of(Manager *m, uid_t uid);
bool submission_has_id(Manager *m, const char *id);

/* At shutdown: the threads finish on their own; their ".new-ID"
 * directories are removed at the next start. The calls go unanswered. */
void submissions_abandon(Manager *m);
