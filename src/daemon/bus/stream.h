/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "task.h"

/* The stream socket: what is too big or too chatty for D-Bus. A client
 * connects, sends one JSON request line
 *
 *     {"task": "<id>", "stream": "events" | "output", "follow": true}
 *
 * and reads JSON lines back: the history so far, then (with follow) live
 * events until the task ends, then {"type":"end"}. Errors are one line
 * {"type":"error","error":"<D-Bus error name>","message":"..."}. Who may
 * follow a task is decided as on the bus: its owner and root, others only
 * with polkit's org.agentfab.manage (never interactive here). */

typedef struct BusServer BusServer;
typedef struct StreamServer StreamServer;

#define STREAM_REQUEST_MAX   4096
#define STREAM_OUTBUF_MAX    (8u * 1024u * 1024u)
#define STREAM_HISTORY_MAX   (16u * 1024u * 1024u)
/* Of a command log, at most its last this many bytes are sent as history:
 * well within STREAM_OUTBUF_MAX, whatever the commands wrote. */
#define STREAM_LOG_TAIL_MAX  (2u * 1024u * 1024u)

/* Takes listen_fd, the socket passed by systemd, or (-EBADF) binds socket_path. */
int stream_server_new(StreamServer **ret, BusServer *bs, const char *socket_path, int listen_fd);
StreamServer *stream_server_free(StreamServer *s);

unsigned stream_server_clients(StreamServer *s);

/* Sends an event of task t to everyone following its events. */
void stream_server_task_event(StreamServer *s, Task *t, json_object *event);
/* Sends command output of task t to everyone following its output. */
void stream_server_task_output(StreamServer *s, Task *t, const char *data, size_t size);
