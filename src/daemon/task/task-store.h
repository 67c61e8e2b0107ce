/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "task.h"

/* Task records on disk: tasks/<id>/state.json, one JSON object, replaced
 * atomically on every change; tasks/<id>/events.jsonl, the task's event
 * history, one JSON object per line, appended. */

#define TASK_STATE_FILE       "state.json"
#define TASK_EVENTS_FILE      "events.jsonl"
#define TASK_LOG_FILE         "output.log"
#define TASK_STATE_VERSION    1
#define TASK_STATE_FILE_MAX   (1024 * 1024)

json_object *task_to_json(const Task *t);

/* Fills t from a parsed state file; on failure returns -EBADMSG (or
 * -EPROTONOSUPPORT for another version) and a message for the Reason. */
int task_from_json(Task *t, json_object *j, char **ret_error);

/* Writes the state file of an existing task directory (after a state
 * change still being written in a thread, task-save.h). */
int task_save(Task *t);
/* The state file's text for t as it is in memory; NULL: out of memory. */
char *task_state_text(const Task *t);

/* Makes the directory of a new task and its first state file, durably, in
 * one step that a crash cannot leave half done: everything is built in
 * ".new-<id>" and renamed into place. */
int task_create(Task *t);
/* The same in two halves, for a task whose directory is filled first (its
 * repository imported): begin makes the hidden ".new-ID" directory and
 * returns its fd, commit writes the state file into it and renames it to
 * ID, abort removes it. task_store_clean() removes what a crash left. */
int task_create_begin(Task *t, int *ret_dir_fd);
int task_create_commit(Task *t, int dir_fd);
void task_create_abort(Task *t);

/* Reads tasks/<id>. A record that cannot be read still yields a task,
 * marked broken and failed with the reason, so it is visible and nothing is
 * lost; only out-of-memory and a missing directory are errors. */
int task_load(int tasks_fd, const char *id, Task **ret);

/* Removes leftovers of creations a crash interrupted. */
void task_store_clean(int tasks_fd);

int task_append_event(Task *t, json_object *event);

/* A JSON file the agent keeps in the task's directory (the review's
 * findings, the reviewer's verdict), of at most max bytes: -ENOENT if it
 * is not there, or t has no directory. The _at() form reads it in the
 * task's directory dir_fd. */
int task_read_json(Task *t, const char *name, size_t max, json_object **ret);
int task_read_json_at(int dir_fd, const char *name, size_t max, json_object **ret);
