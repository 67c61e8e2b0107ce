/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A state change asked for over the bus (Cancel()) whose state file is
 * written and fsynced in a worker thread, so that the loop does not wait
 * for the disk: under load that is tens of milliseconds a call, for every
 * other caller too.
 *
 * The state file stays the single point of truth. Nothing changes in
 * memory, and nobody is told, until the file holds the new state: the
 * change is applied and the call answered when the thread is done. A crash
 * before that finds the old state or the new one, never a mix, and the
 * caller was told neither. Meanwhile the task's other writes of its state
 * file (task_save()) wait for the thread's first, so that the newest is the
 * last to land; if one came in between, or the task's state moved, the
 * change is made again on the loop from what memory holds then. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "task.h"

/* Makes t's state `state`, as task_set_state() does, and answers message
 * (an empty return, or the error), which may be NULL. Returns 1 if the
 * write is under way in a thread; otherwise the change was made (or
 * refused) on the loop like task_set_state(), whose result is returned
 * (<= 0, error set), and message is not answered. */
int task_set_state_async(Task *t, sd_event *e, TaskState state, const char *reason, uid_t caller,
                         sd_bus_message *message, sd_bus_error *error);

/* Whether a state change of t is being written. */
bool task_save_pending(const Task *t);

/* Waits until the thread's write of t's state file, if any, has landed. */
void task_save_wait(Task *t);

/* From task_free(): the thread finishes on its own data; the caller is
 * told the task went away. */
void task_save_detach(Task *t);
