/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Journal MESSAGE_IDs, one per audit event kind. Made once with
 * "systemd-id128 new" and never changed: they are a public interface,
 * explained in agentfab.catalog. */

#define AGENTFAB_MESSAGE_TASK_SUBMITTED_STR "6fc338f3790045fabab518b11df77af7"
#define AGENTFAB_MESSAGE_TASK_STATE_STR     "45ab992dc7794c3ea4035c743608b5d8"
#define AGENTFAB_MESSAGE_TASK_REQUEST_STR   "9cf35886b8f34a36b9986944caf2f9fe"
#define AGENTFAB_MESSAGE_DENIED_STR         "cb26254e4387488080e48734aad9a9ab"
#define AGENTFAB_MESSAGE_TASK_BROKEN_STR    "59e7f27ab0d34329bc9a5e5aabb3519a"
#define AGENTFAB_MESSAGE_DAEMON_STARTED_STR "fcf63b81a9534b60aa990caaec84ca2b"
#define AGENTFAB_MESSAGE_DAEMON_IDLE_STR    "2aad8f8b9de344d8a42a8ae020459684"
