/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#define AGENTFAB_CONFIG_FILE "/etc/agentfab/agentfab.conf"

typedef struct Config {
        uint64_t idle_timeout_usec;     /* [Daemon] IdleTimeoutSec= */
        unsigned max_tasks;             /* [Daemon] MaxTasks= : unfinished tasks of all users */
        unsigned max_tasks_per_user;    /* [Daemon] MaxTasksPerUser= : unfinished tasks per uid */
        unsigned max_stream_clients;    /* [Daemon] MaxStreamClients= */
} Config;

void config_init(Config *c);

/* Reads path, then path.d/ *.conf in lexical order; later settings win. A
 * missing file is not an error; a malformed line is logged and skipped. */
int config_load(Config *c, const char *path);

/* Parses one file's text; exposed for tests. */
int config_parse(Config *c, const char *text, const char *filename);
