/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "buf.h"
#include "fs-util.h"
#include "json-util.h"
#include "known-hosts.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* How deep a workspace scan goes. */

/* The ledger's history: checkpoint commits (their messages and trailers),
 * resets of the workspace to one of them, and the list of them. */

static char *body_sanitize(const char *body) {
        size_t n = strlen(body);

        if (n > LEDGER_BODY_MAX)
                n = LEDGER_BODY_MAX;
        char *t = strndup(body, n);
        if (!t)
                return NULL;
        for (char *c = t; *c; c++)
                if (((unsigned char) *c < ' ' && *c != '\n' && *c != '\t') || *c == 127)
                        *c = ' ';
        utf8_sanitize(t, strlen(t));
        utf8_blank_c1(t);
        while (n > 0 && strchr(" \t\n", t[n - 1]))
                t[--n] = '\0';
        return t;
}

int ledger_build_message(const Checkpoint *c, char **ret) {
        _cleanup_free_ char *subject = NULL, *body = NULL, *task = NULL, *model = NULL, *test_command = NULL,
                *user = NULL, *reference = NULL;
        _cleanup_(buf_done) Buf msg = {};
        const char *tests = c->tests ?: "not-run";
        int r;

        subject = ledger_one_line(c->subject, LEDGER_SUBJECT_MAX);
        task = ledger_one_line(c->task_id, LEDGER_TRAILER_VALUE_MAX);
        model = ledger_one_line(c->model ?: "unknown", LEDGER_TRAILER_VALUE_MAX);
        test_command = ledger_one_line(c->test_command, LEDGER_TRAILER_VALUE_MAX);
        user = ledger_one_line(c->user_name ?: "unknown", LEDGER_TRAILER_VALUE_MAX);
        body = c->body ? body_sanitize(c->body) : strdup("");
        reference = c->reference ? ledger_one_line(c->reference, LEDGER_TRAILER_VALUE_MAX) : NULL;
        if (!subject || !task || !model || !test_command || !user || !body || (c->reference && !reference))
                return -ENOMEM;
        if (isempty(subject) && free_and_strdup(&subject, "Checkpoint") < 0)
                return -ENOMEM;

        r = buf_printf(&msg, "%s\n\n", subject);
        if (r >= 0 && !isempty(body))
                r = buf_printf(&msg, "%s\n\n", body);
        if (r >= 0)
                r = buf_printf(&msg, "Agentfab-Task: %s\n", task);
        /* Step 0 is no step of the model's: a record of evidence (ledger_record()). */
        if (r >= 0 && c->step > 0)
                r = buf_printf(&msg, "Agentfab-Step: %u\n", c->step);
        if (r >= 0)
                r = buf_printf(&msg, "Agentfab-Model: %s\n", model);
        if (r >= 0 && !isempty(reference))
                r = buf_printf(&msg, "Agentfab-Ref: %s\n", reference);
        if (r >= 0 && c->requirement > 0)
                r = buf_printf(&msg, "Agentfab-Requirement: v%u\n", c->requirement);
        size_t k = 0;
        for (char **i = c->commands; r >= 0 && i && *i && k < LEDGER_COMMANDS_MAX; i++, k++) {
                _cleanup_free_ char *cmd = ledger_one_line(*i, LEDGER_TRAILER_VALUE_MAX);
                r = cmd ? buf_printf(&msg, "Agentfab-Command: %s\n", cmd) : -ENOMEM;
        }
        if (r >= 0) {
                if (streq(tests, "not-run"))
                        r = buf_printf(&msg, "Agentfab-Tests: not-run\n");
                else if (c->have_test_count)
                        r = buf_printf(&msg, "Agentfab-Tests: %s (%s, exit %i, %u test%s)\n", tests, test_command,
                                       c->test_exit, c->test_count, c->test_count == 1 ? "" : "s");
                else
                        r = buf_printf(&msg, "Agentfab-Tests: %s (%s, exit %i)\n", tests, test_command, c->test_exit);
        }
        if (r >= 0 && c->environment) {
                _cleanup_free_ char *environment = ledger_one_line(c->environment, LEDGER_TRAILER_VALUE_MAX);
                r = environment ? buf_printf(&msg, "Agentfab-Environment: %s\n", environment) : -ENOMEM;
        }
        k = 0;
        for (char **i = c->trailers; r >= 0 && i && *i; i++, k++) {
                _cleanup_free_ char *line = ledger_one_line(*i, LEDGER_TRAILER_VALUE_MAX + 64);
                const char *colon;

                if (!line)
                        return -ENOMEM;
                /* Only our own keys, so that nothing passes for another
                 * trailer git or a forge knows (Signed-off-by:, Co-authored-by:). */
                colon = strstr(line, ": ");
                if (k >= LEDGER_TRAILERS_MAX || !strneq(line, "Agentfab-", 9) || !colon || colon == line + 9 ||
                    strspn(line + 9, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-") != (size_t) (colon - line - 9))
                        return -EINVAL;
                r = buf_printf(&msg, "%s\n", line);
        }
        if (r >= 0)
                r = buf_printf(&msg, "Agentfab-Submitter: %s (uid %u)\n", user, (unsigned) c->uid);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(msg.s);
        return 0;
}

int ledger_make_signature(git_signature **ret) {
        char host[HOST_NAME_MAX + 1] = "localhost";
        char email[HOST_NAME_MAX + 32];

        if (gethostname(host, sizeof(host)) < 0 || isempty(host))
                strcpy(host, "localhost");
        host[sizeof(host) - 1] = '\0';
        for (char *c = host; *c; c++)
                if (!isalnum((unsigned char) *c) && *c != '-' && *c != '.')
                        *c = '-';
        (void) snprintf(email, sizeof(email), "agentfab@%s", host);
        return git_signature_now(ret, "agentfab", email) < 0 ? -EIO : 0;
}

int ledger_checkpoint(Ledger *l, const Checkpoint *c, char ret_commit[static 41], char **ret_error) {
        _cleanup_(git_commit_freep) git_commit *parent = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        _cleanup_free_ char *msg = NULL;
        git_oid tip, tree_id, id;
        int r;

        assert(l);
        assert(c);

        if (isempty(c->task_id))
                return error_set(ret_error, -EINVAL, "Checkpoint without a task id.");
        if (c->tests && !streq(c->tests, "pass") && !streq(c->tests, "fail") && !streq(c->tests, "not-run"))
                return error_set(ret_error, -EINVAL, "Invalid test result '%s'.", c->tests);

        r = ledger_tip(l, &tip);
        if (r < 0)
                return error_set(ret_error, r, "Branch '%s' is gone.", l->branch);
        if (git_commit_lookup(&parent, l->repo, &tip) < 0)
                return error_set(ret_error, -EBADMSG, "Cannot read the tip of '%s': %s", l->branch, ledger_git_message());

        /* Submodules first, each in its own ledger with the same message:
         * the superproject's commit then moves their gitlinks. */
        if (l->n_subs > 0) {
                _cleanup_(git_index_freep) git_index *index = NULL;

                if (git_repository_index(&index, l->repo) < 0 || git_index_read(index, 0) < 0)
                        return error_set(ret_error, -EIO, "Cannot read the index: %s", ledger_git_message());
                for (size_t i = 0; i < l->n_subs; i++) {
                        LedgerSubmodule *sub = &l->subs[i];
                        const git_index_entry *e = git_index_get_bypath(index, sub->path, 0);
                        _cleanup_free_ char *sub_error = NULL;
                        char sub_commit[GIT_OID_HEXSZ + 1];

                        sub->have_staged = false;
                        /* Removed or replaced by the task: the scan records what stands there. */
                        if (!e || e->mode != GIT_FILEMODE_COMMIT || ledger_submodule_attach(l, sub) < 0)
                                continue;
                        r = ledger_checkpoint(sub->ledger, c, sub_commit, &sub_error);
                        if (r < 0)
                                return error_set(ret_error, r, "In submodule '%s': %s", sub->path,
                                                        sub_error ?: strerror(-r));
                        r = ledger_tip(sub->ledger, &sub->staged);
                        if (r < 0)
                                return error_set(ret_error, r, "Branch of submodule '%s' is gone.", sub->path);
                        sub->have_staged = true;
                }
        }

        /* What ledger_changes() staged for this step is committed as it is
         * (with tracking on and nothing reported since); else the
         * workspace is staged now. With submodules, always now: their new
         * commits move the gitlinks. */
        r = ledger_stage(l, l->n_subs > 0, ret_error);
        if (r < 0)
                return r;
        tree_id = l->staged_tree;

        if (git_oid_equal(&tree_id, git_commit_tree_id(parent)))
                return 0;

        r = ledger_build_message(c, &msg);
        if (r < 0)
                return error_set(ret_error, r, "Cannot build the commit message: %s", strerror(-r));
        r = ledger_make_signature(&sig);
        if (r < 0)
                return error_set(ret_error, r, "Cannot make a signature: %s", ledger_git_message());
        if (git_tree_lookup(&tree, l->repo, &tree_id) < 0)
                return error_set(ret_error, -EIO, "Cannot read the new tree: %s", ledger_git_message());

        const git_commit *parents[] = { parent };
        uint64_t t0 = TRACE_BEGIN();
        /* Passing the ref makes libgit2 check that its tip is still parent. */
        if (git_commit_create(&id, l->repo, l->ref, sig, sig, NULL, msg, tree, 1, parents) < 0)
                return error_set(ret_error, -ESTALE, "Cannot commit on '%s': %s", l->branch, ledger_git_message());
        TRACE_END("commit", t0);
        /* Its objects and its ref are on the disk (libgit2 fsynced each);
         * so is any directory made for them, before the caller
         * acknowledges the step. */
        r = ledger_sync(l);
        if (r < 0)
                return error_set(ret_error, r, "Cannot make the commit on '%s' durable: %s", l->branch, strerror(-r));

        git_oid_tostr(ret_commit, GIT_OID_HEXSZ + 1, &id);
        return 1;
}

int ledger_parse_trailers(const char *message, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *m = NULL;

        assert(ret);

        o = json_object_new_object();
        m = strdup(strempty(message));
        if (!o || !m)
                return -ENOMEM;

        /* The trailers are the last paragraph, and never the first (that is the subject). */
        size_t n = strlen(m);
        while (n > 0 && strchr(" \t\n\r", m[n - 1]))
                m[--n] = '\0';
        char *last = NULL;
        for (char *p = strstr(m, "\n\n"); p; p = strstr(p + 1, "\n\n"))
                last = p;
        if (!last) {
                *ret = TAKE_PTR(o);
                return 0;
        }

        for (char *line = last + 2, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';

                size_t k = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-");
                if (k == 0 || line[k] != ':')
                        continue;
                line[k] = '\0';
                char *value = line + k + 1;
                value += strspn(value, " \t");
                size_t vl = strlen(value);
                while (vl > 0 && strchr(" \t\r", value[vl - 1]))
                        value[--vl] = '\0';

                json_object *v = json_object_new_string(value), *existing;
                if (!v)
                        return -ENOMEM;
                if (!json_object_object_get_ex(o, line, &existing)) {
                        if (json_object_object_add(o, line, v) < 0) {
                                json_object_put(v);
                                return -ENOMEM;
                        }
                        continue;
                }
                if (!json_object_is_type(existing, json_type_array)) {
                        json_object *a = json_object_new_array();
                        if (!a || json_object_array_add(a, json_object_get(existing)) < 0) {
                                json_object_put(a);
                                json_object_put(v);
                                return -ENOMEM;
                        }
                        json_object_object_add(o, line, a);
                        existing = a;
                }
                if (json_object_array_add(existing, v) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }
        }

        *ret = TAKE_PTR(o);
        return 0;
}

int ledger_checkpoints(Ledger *l, json_object **ret) {
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_json_ json_object *a = NULL;
        git_oid id;
        int r;

        assert(l);
        assert(ret);

        r = ledger_walk_new(l, &w);
        if (r < 0)
                return r;
        a = json_object_new_array();
        if (!a)
                return -ENOMEM;

        while ((r = git_revwalk_next(&id, w)) == 0) {
                _cleanup_(git_commit_freep) git_commit *c = NULL;
                _cleanup_json_ json_object *t = NULL, *e = NULL;
                json_object *step;
                uint64_t n;
                char hex[GIT_OID_HEXSZ + 1];

                if (git_commit_lookup(&c, l->repo, &id) < 0)
                        return -EBADMSG;
                r = ledger_parse_trailers(git_commit_message(c), &t);
                if (r < 0)
                        return r;
                if (!json_object_object_get_ex(t, "Agentfab-Step", &step))
                        continue;
                if (json_object_is_type(step, json_type_array))
                        step = json_object_array_get_idx(step, 0);
                if (safe_atou64(json_object_get_string(step), &n) < 0)
                        continue;

                git_oid_tostr(hex, sizeof(hex), &id);
                e = json_object_new_object();
                if (!e || json_add_uint64(e, "step", n) < 0 || json_add_string(e, "commit", hex) < 0 ||
                    json_add_string(e, "subject", strempty(git_commit_summary(c))) < 0 ||
                    json_object_array_add(a, e) < 0)
                        return -ENOMEM;
                e = NULL;
        }
        if (r != GIT_ITEROVER)
                return -EIO;

        *ret = TAKE_PTR(a);
        return 0;
}

