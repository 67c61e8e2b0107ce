/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>

#include "json-util.h"
#include "ledger-internal.h"
#include "string-util.h"

/* The evidence side of the ledger: commits that record what was checked
 * about a tree without changing it, and the list of every commit on the
 * branch that an audit compares with the journal. */

int ledger_record(Ledger *l, const Checkpoint *c, char ret_commit[static 41], char **ret_error) {
        _cleanup_(git_commit_freep) git_commit *parent = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        _cleanup_free_ char *msg = NULL;
        git_oid tip, id;
        int r;

        assert(l);
        assert(c);

        if (isempty(c->task_id))
                return error_set(ret_error, -EINVAL, "Record without a task id.");
        if (c->tests && !streq(c->tests, "pass") && !streq(c->tests, "fail") && !streq(c->tests, "not-run"))
                return error_set(ret_error, -EINVAL, "Invalid test result '%s'.", c->tests);

        r = ledger_tip(l, &tip);
        if (r < 0)
                return error_set(ret_error, r, "Branch '%s' is gone.", l->branch);
        if (git_commit_lookup(&parent, l->repo, &tip) < 0 || git_commit_tree(&tree, parent) < 0)
                return error_set(ret_error, -EBADMSG, "Cannot read the tip of '%s': %s", l->branch,
                                        ledger_git_message());

        r = ledger_build_message(c, &msg);
        if (r < 0)
                return error_set(ret_error, r, "Cannot build the commit message: %s", strerror(-r));
        r = ledger_make_signature(&sig);
        if (r < 0)
                return error_set(ret_error, r, "Cannot make a signature: %s", ledger_git_message());

        /* The tip's own tree: what was checked is exactly what the parent
         * holds. Passing the ref makes libgit2 check that its tip is still
         * the parent. */
        const git_commit *parents[] = { parent };
        if (git_commit_create(&id, l->repo, l->ref, sig, sig, NULL, msg, tree, 1, parents) < 0)
                return error_set(ret_error, -ESTALE, "Cannot commit on '%s': %s", l->branch, ledger_git_message());
        /* On the disk before the delivery goes on (ledger_checkpoint()). */
        r = ledger_sync(l);
        if (r < 0)
                return error_set(ret_error, r, "Cannot make the commit on '%s' durable: %s", l->branch, strerror(-r));

        git_oid_tostr(ret_commit, GIT_OID_HEXSZ + 1, &id);
        return 0;
}

int ledger_commits(Ledger *l, size_t max, json_object **ret) {
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

                if (json_object_array_length(a) >= max)
                        return -E2BIG;
                if (git_commit_lookup(&c, l->repo, &id) < 0)
                        return -EBADMSG;
                git_oid_tostr(hex, sizeof(hex), &id);
                e = json_object_new_object();
                if (!e || json_add_string(e, "commit", hex) < 0 ||
                    json_add_string(e, "subject", strempty(git_commit_summary(c))) < 0)
                        return -ENOMEM;

                /* Whatever the message says, the commit is listed: one
                 * without our trailers is exactly what an audit must see. */
                if (ledger_parse_trailers(git_commit_message(c), &t) >= 0 &&
                    json_object_object_get_ex(t, "Agentfab-Step", &step)) {
                        if (json_object_is_type(step, json_type_array))
                                step = json_object_array_get_idx(step, 0);
                        if (safe_atou64(json_object_get_string(step), &n) >= 0 && json_add_uint64(e, "step", n) < 0)
                                return -ENOMEM;
                }
                if (json_object_array_add(a, e) < 0)
                        return -ENOMEM;
                e = NULL;
        }
        if (r != GIT_ITEROVER)
                return -EIO;

        *ret = TAKE_PTR(a);
        return 0;
}
