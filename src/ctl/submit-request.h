/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* What `agentfabctl submit` asks for: the strings go to SubmitTask() as
 * they are (NULL: not sent), limits as NAME=VALUE words (limit-word.h). */
typedef struct SubmitRequest {
        const char *repo;
        const char *goal;
        const char *acceptance;
        const char *test_command;
        const char *coverage_report;
        const char *base;
        const char *model;
        const char *replay;
        const char *reference;
        const char *push_url;
        const char *forge;
        const char *forge_repository;
        const char *pull_request_base;
        const char *environment;
        bool submodules;
        char **limits;
} SubmitRequest;

/* Submits the task: a local repository goes as a path and an open
 * directory, or as a bundle of its history when the daemon cannot read it.
 * Prints the new task's id (or JSON) and returns an exit code. */
int submit_task(sd_bus *bus, const SubmitRequest *req, bool ask_password, bool json);
/* The same without printing the id: the new task's id and object path in
 * *ret_id and *ret_path; errors printed, and quiet leaves out the note on a
 * repository sent as a bundle. Returns an exit code. */
int submit_task_get_id(sd_bus *bus, const SubmitRequest *req, bool ask_password, bool quiet, char **ret_id,
                       char **ret_path);
