/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>

#include "ledger-internal.h"
#include "string-util.h"

/* A host of a fleet publishes each acknowledged checkpoint to the fleet's
 * shared repository, under a ref of the task and the epoch of its claim,
 * so that another host can take the task over from there. */

static bool publish_ref_ok(const char *ref) {
        return strneq(ref, "refs/agentfab/", 14) && git_reference_is_valid_name(ref);
}

int ledger_publish(Ledger *l, const char *url, const char *commit, const char *ref, char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        git_reference *local = NULL;
        _cleanup_free_ char *spec = NULL;
        git_push_options po;
        git_oid oid;
        int r;

        assert(l);
        assert(url);
        assert(commit);
        assert(ref);

        if (!publish_ref_ok(ref))
                return error_set(ret_error, -EINVAL, "Refusing to publish to '%s': only refs under refs/agentfab/ are.", ref);
        if (git_oid_fromstr(&oid, commit) < 0)
                return error_set(ret_error, -EINVAL, "Not a commit id: '%s'", commit);
        /* A push sends a ref, not a commit id: the same ref here names the
         * checkpoint, and keeps it from a garbage collection meanwhile. */
        r = git_reference_create(&local, l->repo, ref, &oid, 1, "agentfab: publish");
        if (r < 0)
                return error_set(ret_error, ledger_git_errno(r), "Cannot name checkpoint %s: %s", commit,
                                 ledger_git_message());
        git_reference_free(local);

        /* Forced: the ref is this host's for this epoch alone, and a
         * rejected step moves the checkpoint back. */
        if (asprintf(&spec, "+%s:%s", ref, ref) < 0)
                return -ENOMEM;
        (void) git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
        po.pb_parallelism = 1;
        if (git_remote_create_anonymous(&remote, l->repo, url) < 0)
                return error_set(ret_error, -EINVAL, "Invalid URL '%s': %s", url, ledger_git_message());
        char *specs[] = { spec };
        git_strarray refspecs = { specs, 1 };
        r = git_remote_push(remote, &refspecs, &po);
        if (r < 0)
                return error_set(ret_error, ledger_git_errno(r), "Cannot publish to '%s': %s", url, ledger_git_message());
        return 0;
}
