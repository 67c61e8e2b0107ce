/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "agentfab-bus.h"

/* A task's id: AGENTFAB_TASK_ID_LEN lower-case hex digits, the name of its
 * directory, its branch and its scope. The daemon, the launcher and the CLI
 * all hold a name to this before they use it in a path or a unit. */
bool task_id_is_valid(const char *id);
