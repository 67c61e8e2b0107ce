/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* The client end of agentfab-launcher's protocol: one request line (with
 * up to three fds) on a fresh connection, answered by JSON lines. */

/* The launcher's own replies ("ready", "error", "reaped") are short. */
#define LAUNCHER_REPLY_MAX (64 * 1024)
#define LAUNCHER_ERROR_MAX 256

/* Connects to the launcher's socket at path; connect() and the sends are
 * bounded by timeout_usec (a full backlog, a launcher that does not read). */
int launcher_connect(const char *path, uint64_t timeout_usec, int *ret);
/* Sends the request line with the fds of pass (those >= 0, in order). */
/* What may come with a request: the workspace, the cache, the history and
 * the proxy channel, in this order (those the request names). */
#define LAUNCHER_FDS_MAX 4
int launcher_send(int fd, const char *line, const int pass[static LAUNCHER_FDS_MAX]);
/* Reads until buf holds a whole line, at most until deadline (CLOCK_MONOTONIC,
 * usec). Returns the line's length (without the newline, which becomes NUL);
 * what follows it stays in buf, *len counts all. */
int launcher_read_line(int fd, char *buf, size_t max, size_t *len, uint64_t deadline);
/* For an error reply: the launcher's message as one safe, bounded line in
 * *ret_error (when not NULL). Always returns -EREMOTEIO. */
int launcher_reply_error(json_object *j, char **ret_error);
