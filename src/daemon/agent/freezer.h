/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "agent.h"
#include "task.h"

/* Pausing that frees the machine: a paused task, or one that waits for
 * approval, has its whole sandbox frozen (every process of its scope, in
 * the middle of a command too: no CPU, memory kept) through the launcher.
 * While frozen the command's timeout and the task's wall-clock budget
 * stand still. A frozen sandbox's connection waits in systemd's fd store,
 * so it outlives a restart of the daemon; after MaxPausedSec= a frozen
 * sandbox that runs no command is torn down, releasing its memory, and a
 * resume makes a new one from the last checkpoint.
 *
 * A paused task keeps its agent (and so its command in flight); a task that
 * waits for approval has none, and its frozen sandbox waits on the task
 * (Task.sandbox, "parked") for the next agent to take it. */





/* The agent of a task that now waits for approval ends: its sandbox is
 * frozen and kept, or ended if it cannot be frozen. Takes *s. */
void freezer_park(Task *t, SandboxSession **s);

/* For the agent that takes the task up again: the parked sandbox, thawed
 * (NULL if there is none, or it could not be thawed, or was running a
 * command when frozen: then it is ended). */
SandboxSession *freezer_take_parked(Task *t);

/* Before a frozen sandbox of an ending agent is closed: thaw it, or its
 * PID 1 would never see the connection close. */
void freezer_thaw_for_end(Task *t, SandboxSession *s);




/* A task at work keeps its running sandbox's connection in the fd store
 * between commands, so that a restarted daemon takes it up again instead of
 * making a new one (freezer_adopt_stored()); a command going out takes it
 * out again. Called whenever the agent has its sandbox ready: once stored,
 * again is nothing. Not for a sandbox with a network, nor with
 * AGENTFAB_NO_REATTACH=1 in the environment. */
void freezer_store_running(Task *t, SandboxSession *s);

/* s ends while the daemon goes on: its entry in the fd store, if it has
 * one, goes first (systemd's copy would keep the sandbox alive). */
void freezer_forget_session(Task *t, SandboxSession *s);
