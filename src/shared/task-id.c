/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "task-id.h"

bool task_id_is_valid(const char *id) {
        if (!id || strlen(id) != AGENTFAB_TASK_ID_LEN)
                return false;
        for (const char *c = id; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}
