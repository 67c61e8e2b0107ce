/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-run.h"
#include "agent.h"
#include "conversation.h"
#include "fs-util.h"
#include "json-util.h"
#include "string-util.h"
#include "task-job.h"
#include "task-save.h"
#include "tools.h"

#define TREE_MAX_ENTRIES   300u
#define INSTRUCTIONS_MAX   (32u * 1024u)
#define KEEP_RECENT        6u   /* messages never elided at the end of the conversation */

/* Messages of the step in flight go to memory only; at the checkpoint they
 * are appended and counted. */
int conversation_add(AgentRun *run, json_object *message) {
        return json_object_array_add(run->messages, message) < 0 ? -ENOMEM : 0;
}

int conversation_unsaved_lines(AgentRun *run, char **ret, size_t *ret_size) {
        _cleanup_free_ char *lines = NULL;
        size_t size = 0, n = json_object_array_length(run->messages);
        FILE *f;

        f = open_memstream(&lines, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = run->task->progress.messages; i < n; i++)
                fprintf(f, "%s\n", json_to_line(json_object_array_get_idx(run->messages, i)));
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(lines);
        *ret_size = size;
        return 0;
}


/* Reading a long conversation (up to 64 MiB) and parsing it takes long:
 * it is done in the task's job queue, on data of its own. */
typedef struct LoadJob {
        int dir_fd;
        unsigned want;
        size_t size;               /* the bytes of the want messages */
        json_object *messages;
        conversation_loaded_t done;
} LoadJob;

static void load_job_free(void *p) {
        LoadJob *j = p;

        if (!j)
                return;
        safe_close(j->dir_fd);
        json_object_put(j->messages);
        free(j);
}

static int load_job_run(void *p) {
        LoadJob *j = p;
        _cleanup_free_ char *text = NULL;
        size_t size = 0, good = 0;
        int r;

        r = read_file_at(j->dir_fd, TASK_CONVERSATION_FILE, CONVERSATION_MAX, &text, &size);
        if (r == -ENOENT)
                return j->want == 0 ? 0 : -EBADMSG;
        if (r < 0)
                return r;

        r = conversation_parse(text, size, j->want, j->messages, &good);
        if (r < 0)
                return r;
        j->size = good;

        /* Whatever follows belongs to a step the state file never
         * acknowledged: cut it off, so it cannot count later. */
        if (good < size) {
                _cleanup_close_ int fd = openat(j->dir_fd, TASK_CONVERSATION_FILE, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || ftruncate(fd, (off_t) good) < 0 || fsync(fd) < 0)
                        return -errno;
        }
        return 0;
}

static void on_load_done(Task *t, int r, void *p, void *userdata) {
        LoadJob *j = p;
        AgentRun *run = userdata;

        if (!agent_job_ended(run, NULL))
                return;
        if (r >= 0) {
                run->messages = TAKE_PTR(j->messages);
                /* Known now if the state file did not say (an older one);
                 * its next write has it. */
                run->task->progress.conversation_size = j->size;
        }
        j->done(run, r);
}

int conversation_load(AgentRun *run, conversation_loaded_t done) {
        LoadJob *j;

        assert(!run->job && !run->messages);
        j = calloc(1, sizeof(LoadJob));
        if (!j)
                return -ENOMEM;
        *j = (LoadJob) {
                .dir_fd = fcntl(run->dir_fd, F_DUPFD_CLOEXEC, 3),
                .want = run->task->progress.messages,
                .messages = json_object_new_array(),
                .done = done,
        };
        if (j->dir_fd < 0 || !j->messages) {
                load_job_free(j);
                return -ENOMEM;
        }
        return agent_job_start(run, "conversation", load_job_run, on_load_done, load_job_free, j, NULL, PHASE_LEDGER);
}



/* What is sent to the model: the conversation, with the oldest tool outputs
 * replaced by a note while it is larger than the profile's context budget
 * (about 4 bytes a token). The system prompt, the goal and the latest
 * messages are never elided; the choice depends only on the conversation,
 * so a redone step sends the same request. */
json_object *conversation_for_model(AgentRun *run) {
        size_t n = json_object_array_length(run->messages), total = 0;
        uint64_t budget = run->profile->context_budget ? run->profile->context_budget * 4 : UINT64_MAX;
        _cleanup_json_ json_object *out = json_object_new_array();

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++)
                total += strlen(json_object_to_json_string(json_object_array_get_idx(run->messages, i)));

        for (size_t i = 0; i < n; i++) {
                json_object *m = json_object_array_get_idx(run->messages, i);
                const char *role = NULL;
                json_object *content;

                (void) json_get_string(m, "role", &role);
                if (total > budget && i >= 2 && i + KEEP_RECENT < n && streq_ptr(role, "tool") &&
                    json_object_object_get_ex(m, "content", &content) &&
                    json_object_get_string_len(content) > 200) {
                        _cleanup_json_ json_object *copy = NULL;
                        char note[128];
                        size_t len = (size_t) json_object_get_string_len(content);

                        if (json_object_deep_copy(m, &copy, NULL) < 0)
                                return NULL;
                        snprintf(note, sizeof(note), "[output of %zu bytes elided to fit the context budget]", len);
                        json_object_object_add(copy, "content", json_object_new_string(note));
                        total -= len - strlen(note);
                        if (json_object_array_add(out, TAKE_PTR(copy)) < 0)
                                return NULL;
                        continue;
                }
                if (json_object_array_add(out, json_object_get(m)) < 0)
                        return NULL;
        }
        return TAKE_PTR(out);
}

int conversation_system_prompt(AgentRun *run, char **ret) {
        _cleanup_free_ char *tree = NULL, *instructions = NULL;
        Task *t = run->task;
        int ws = ledger_workspace_fd(run->ledger);

        (void) workspace_tree(ws, TREE_MAX_ENTRIES, &tree);
        (void) workspace_agent_instructions(ws, INSTRUCTIONS_MAX, &instructions);

        if (asprintf(ret,
                     "You are agentfab's software engineering agent. You work on a git repository checked out at "
                     "/workspace, through the tools you are given. Commands run in a sandbox without network access.\n\n"
                     "# Goal\n%s\n\n"
                     "# Acceptance criteria\n%s\n\n"
                     "# Test command\n%s\n\n"
                     "# Files\n%s\n"
                     "%s%s%s"
                     "# Rules\n"
                     "- Work in small steps. Read before you edit. Keep changes to what the goal needs.\n"
                     "- Paths are relative to the workspace. Never try to leave it.\n"
                     "- Run the tests (run_tests) to check your work; call finish with a summary when the goal is met "
                     "and the tests pass. finish runs the tests again and is refused while they fail.\n"
                     "- Changes to protected paths (authentication, payment, migrations, CI configuration, lock files), "
                     "dependency manifests and deleting tests need a human's approval; avoid them unless the goal "
                     "requires them.\n",
                     t->spec.goal,
                     isempty(t->spec.acceptance) ? "(none given: the goal and the tests decide)" : t->spec.acceptance,
                     isempty(t->spec.test_command) ? "(none: there is no test command; say in your summary how you checked your work)" : t->spec.test_command,
                     strempty(tree),
                     instructions ? "# The repository's instructions for agents\n" : "",
                     strempty(instructions), instructions ? "\n\n" : "") < 0)
                return -ENOMEM;
        return 0;
}



