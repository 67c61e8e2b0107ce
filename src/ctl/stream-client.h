/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* The daemon's stream socket (socket_path, else $AGENTFAB_SOCKET, else the
 * default): asks for the task's "events" or "output", following it or not.
 * Returns the connected fd, or minus an exit code with the error printed. */
int stream_client_connect(const char *socket_path, const char *id, const char *stream, bool follow);
/* Prints what comes, for people or (json) as the daemon's JSON lines,
 * until the end or an error: returns an exit code. */
int stream_client_follow(int fd, bool json);
