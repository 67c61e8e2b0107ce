/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A SubmitTask() is finished in a worker thread, while the loop serves
 * everybody else: a local repository is checked there (with the caller's
 * rights as well as ours), one that came as an fd (a directory or a bundle)
 * is imported into the task's hidden ".new-ID" directory, and the record is
 * made durable (its state file fsynced, the directory renamed into place).
 * The call is answered, and the task appears, only once that is done. */

#include <systemd/sd-bus.h>

#include "bus-server.h"
#include "repository.h"
#include "task.h"

/* Takes t and the call to answer. With caller, t's repository is a local
 * path to check first (repository_check()), and replaced by its canonical
 * form. */
int submission_start(BusServer *bs, sd_bus_message *message, Task *t, const Caller *caller, sd_bus_error *error);

/* Submissions still importing, of uid (UID_INVALID: of everybody). */
unsigned submissions_of(BusServer *bs, uid_t uid);
bool submission_has_id(BusServer *bs, const char *id);

/* At shutdown: the threads finish on their own; their ".new-ID"
 * directories are removed at the next start. The calls go unanswered. */
void submissions_abandon(BusServer *bs);
