/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* The branch of task id as a fleet's Remote= repository has it (or a
 * mirror of it: "git clone --mirror"), for `audit --verify --repo=` where
 * no daemon knows the task: from refs/agentfab/ID/base (left out) to the
 * tip refs/agentfab/ID/N of the highest epoch N, oldest first, as the
 * daemon's ListCommits() lists a branch. Returns 0 with ret a NULL-ended
 * array of commit ids and ret_n their number, or a negative errno with
 * ret_error saying why. */
int audit_branch_from_repository(const char *path, const char *id, char ***ret, size_t *ret_n, char **ret_error);
