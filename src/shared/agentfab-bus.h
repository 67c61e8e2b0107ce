/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Names of the public D-Bus API, shared by agentfabd and agentfabctl. */

#define AGENTFAB_BUS_NAME          "org.agentfab.Factory1"
#define AGENTFAB_FACTORY_PATH      "/org/agentfab/Factory1"
#define AGENTFAB_FACTORY_INTERFACE "org.agentfab.Factory1"
#define AGENTFAB_TASK_PATH_PREFIX  "/org/agentfab/Factory1/task"
#define AGENTFAB_TASK_INTERFACE    "org.agentfab.Task1"

#define AGENTFAB_ERROR_INVALID_SPEC   "org.agentfab.Error.InvalidSpec"
#define AGENTFAB_ERROR_NO_SUCH_TASK   "org.agentfab.Error.NoSuchTask"
#define AGENTFAB_ERROR_BAD_STATE      "org.agentfab.Error.BadState"
#define AGENTFAB_ERROR_QUOTA_EXCEEDED "org.agentfab.Error.QuotaExceeded"
#define AGENTFAB_ERROR_STATE_BROKEN   "org.agentfab.Error.StateBroken"
#define AGENTFAB_ERROR_CANNOT_FREEZE  "org.agentfab.Error.CannotFreeze"
#define AGENTFAB_ERROR_REPOSITORY_UNREADABLE "org.agentfab.Error.RepositoryUnreadable"

#define AGENTFAB_DEFAULT_SOCKET "/run/agentfab/agentfab.sock"

/* Task ids are 12 lower-case hex digits: short enough to type, safe in object
 * paths, file names and journal matches. */
#define AGENTFAB_TASK_ID_LEN 12
