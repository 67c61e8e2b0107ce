/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* A pkttyagent for our own process while we wait for a call that may need
 * an administrator's password: only with ask_password and on a terminal.
 * Returns when the agent is registered (or gone); close kills it. */
void polkit_agent_open(bool ask_password);
void polkit_agent_close(void);
