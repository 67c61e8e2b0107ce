/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>

#include "ledger-internal.h"
#include "string-util.h"

/* A host of a fleet publishes each acknowledged checkpoint to the fleet's
 * shared repository, under a ref of the task and the epoch of its claim,
 * so that another host can take the task over from there. An ssh://
 * repository is reached as an ssh:// source is (ledger-ssh.c): with the
 * host's own key and the known hosts it was given, nothing of the daemon
 * user's. */

static bool publish_ref_ok(const char *ref) {
        return strneq(ref, "refs/agentfab/", 14) && git_reference_is_valid_name(ref);
}

int ledger_publish(Ledger *l, const char *url, const LedgerOptions *o, const char *commit, const char *ref,
                   const char *base_ref, char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        SshAuth ssh;
        bool is_ssh;
        git_reference *local = NULL;
        _cleanup_free_ char *spec = NULL, *base_spec = NULL;
        git_push_options po;
        git_oid oid;
        int r;

        assert(l);
        assert(url);
        assert(commit);
        assert(ref);

        if (!publish_ref_ok(ref))
                return error_set(ret_error, -EINVAL, "Refusing to publish to '%s': only refs under refs/agentfab/ are.", ref);
        if (base_ref && !publish_ref_ok(base_ref))
                return error_set(ret_error, -EINVAL, "Refusing to publish to '%s': only refs under refs/agentfab/ are.",
                                 base_ref);
        if (git_oid_fromstr(&oid, commit) < 0)
                return error_set(ret_error, -EINVAL, "Not a commit id: '%s'", commit);
        r = ledger_ssh_prepare(&ssh, url, o, ret_error);
        if (r < 0)
                return r;
        is_ssh = r > 0;
        /* A push sends a ref, not a commit id: the same ref here names the
         * checkpoint, and keeps it from a garbage collection meanwhile. */
        r = git_reference_create(&local, l->repo, ref, &oid, 1, "agentfab: publish");
        if (r < 0)
                return error_set(ret_error, ledger_git_errno(r), "Cannot name checkpoint %s: %s", commit,
                                 ledger_git_message());
        git_reference_free(local);
        /* The base goes with it: a host that takes the task over starts its
         * ledger from there, whatever the source repository's branch is
         * now. */
        if (base_ref) {
                r = git_reference_create(&local, l->repo, base_ref, &l->base, 1, "agentfab: publish");
                if (r < 0)
                        return error_set(ret_error, ledger_git_errno(r), "Cannot name the base: %s", ledger_git_message());
                git_reference_free(local);
                if (asprintf(&base_spec, "+%s:%s", base_ref, base_ref) < 0)
                        return -ENOMEM;
        }

        /* Forced: the ref is this host's for this epoch alone, and a
         * rejected step moves the checkpoint back. */
        if (asprintf(&spec, "+%s:%s", ref, ref) < 0)
                return -ENOMEM;
        (void) git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
        po.pb_parallelism = 1;
        if (is_ssh)
                ledger_ssh_set_callbacks(&po.callbacks, &ssh);
        if (git_remote_create_anonymous(&remote, l->repo, url) < 0)
                return error_set(ret_error, -EINVAL, "Invalid URL '%s': %s", url, ledger_git_message());
        char *specs[] = { spec, base_spec };
        git_strarray refspecs = { specs, base_spec ? 2 : 1 };
        r = git_remote_push(remote, &refspecs, &po);
        if (r < 0)
                return error_set(ret_error, ledger_ssh_errno(&ssh, ledger_git_errno(r)), "Cannot publish to '%s': %s", url,
                                 ledger_ssh_message(&ssh));
        return 0;
}

/* Where the fetched refs of a task go here: under their own names, which
 * nothing else in a ledger uses. */
static int adopt_refspec(const char *prefix, char **ret) {
        return asprintf(ret, "+%s/*:%s/*", prefix, prefix) < 0 ? -ENOMEM : 0;
}

int ledger_adopt(Ledger *l, const char *url, const LedgerOptions *o, const char *prefix, const char *checkpoint,
                 char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        SshAuth ssh;
        bool is_ssh;
        _cleanup_free_ char *spec = NULL, *base_ref = NULL;
        git_reference *ref = NULL;
        git_fetch_options fo;
        git_oid base, cp, tip;
        int r;

        assert(l);
        assert(url);
        assert(prefix);
        assert(checkpoint);

        if (!strneq(prefix, "refs/agentfab/", 14) || strchr(prefix, '*') || !git_reference_is_valid_name(prefix))
                return error_set(ret_error, -EINVAL, "Refusing to fetch '%s': only refs under refs/agentfab/ are.", prefix);
        if (git_oid_fromstr(&cp, checkpoint) < 0)
                return error_set(ret_error, -EINVAL, "Not a commit id: '%s'", checkpoint);
        r = ledger_ssh_prepare(&ssh, url, o, ret_error);
        if (r < 0)
                return r;
        is_ssh = r > 0;
        r = adopt_refspec(prefix, &spec);
        if (r < 0)
                return r;
        if (asprintf(&base_ref, "%s/base", prefix) < 0)
                return -ENOMEM;

        (void) git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
        fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
        fo.prune = GIT_FETCH_NO_PRUNE;
        if (is_ssh)
                ledger_ssh_set_callbacks(&fo.callbacks, &ssh);
        if (git_remote_create_anonymous(&remote, l->repo, url) < 0)
                return error_set(ret_error, -EINVAL, "Invalid URL '%s': %s", url, ledger_git_message());
        char *specs[] = { spec };
        git_strarray refspecs = { specs, 1 };
        r = git_remote_fetch(remote, &refspecs, &fo, "agentfab: take over");
        if (r < 0)
                return error_set(ret_error, ledger_ssh_errno(&ssh, ledger_git_errno(r)),
                                 "Cannot fetch the task's checkpoints from '%s': %s", url, ledger_ssh_message(&ssh));

        /* SECURITY: only what the fleet published for this task, and only a
         * checkpoint that grew from the base published with it. */
        r = git_reference_name_to_id(&base, l->repo, base_ref);
        if (r < 0)
                return error_set(ret_error, -ENOENT, "'%s' has no %s: the task's base was never published.", url, base_ref);
        _cleanup_(git_commit_freep) git_commit *c = NULL;
        if (git_commit_lookup(&c, l->repo, &cp) < 0)
                return error_set(ret_error, -ENOENT, "'%s' does not have the task's checkpoint %s.", url, checkpoint);
        if (!git_oid_equal(&cp, &base) && git_graph_descendant_of(l->repo, &cp, &base) != 1)
                return error_set(ret_error, -EBADMSG, "Checkpoint %s does not descend from the task's base.", checkpoint);

        r = ledger_tip(l, &tip);
        if (r < 0)
                return error_set(ret_error, r, "Cannot read the branch: %s", strerror(-r));
        r = git_reference_create(&ref, l->repo, LEDGER_BASE_REF, &base, 1, "agentfab: take over");
        if (r < 0)
                return error_set(ret_error, ledger_git_errno(r), "Cannot set the base: %s", ledger_git_message());
        git_reference_free(ref);
        l->base = base;
        /* The workspace is reset to it when the agent resumes (the
         * ordinary resume path): here the branch only moves. */
        r = git_reference_create_matching(&ref, l->repo, l->ref, &cp, 1, &tip, "agentfab: take over");
        if (r < 0)
                return error_set(ret_error, ledger_git_errno(r), "Cannot move the branch: %s", ledger_git_message());
        git_reference_free(ref);
        return 0;
}

int ledger_open_published(int dir_fd, const char *url, const LedgerOptions *o, const char *prefix, const char *tip_ref,
                          const char *branch, Ledger **ret, char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        SshAuth ssh;
        bool is_ssh;
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        _cleanup_free_ char *spec = NULL, *base_ref = NULL, *ref = NULL;
        git_repository_init_options io;
        git_reference *made = NULL;
        git_fetch_options fo;
        git_oid base, tip;
        char path[64];
        int r;

        assert(dir_fd >= 0);
        assert(url);
        assert(prefix);
        assert(tip_ref);
        assert(ret);

        ledger_library_init();
        if (!strneq(prefix, "refs/agentfab/", 14) || strchr(prefix, '*') || !git_reference_is_valid_name(prefix) ||
            !strneq(tip_ref, prefix, strlen(prefix)) || !git_reference_is_valid_name(tip_ref))
                return error_set(ret_error, -EINVAL, "Refusing to fetch '%s': only refs under refs/agentfab/ are.", tip_ref);
        if (ledger_branch_to_ref(branch, &ref) < 0)
                return error_set(ret_error, -EINVAL, "Invalid branch name '%s'.", strempty(branch));
        r = ledger_ssh_prepare(&ssh, url, o, ret_error);
        if (r < 0)
                return r;
        is_ssh = r > 0;
        r = adopt_refspec(prefix, &spec);
        if (r < 0)
                return r;
        if (asprintf(&base_ref, "%s/base", prefix) < 0)
                return -ENOMEM;

        if (mkdirat(dir_fd, "ledger.git", 0700) < 0 || mkdirat(dir_fd, "workspace", 0700) < 0)
                return error_set(ret_error, -errno, "Cannot make the ledger directories: %m");
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d/ledger.git", dir_fd);
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT;
        if (git_repository_init_ext(&repo, path, &io) < 0)
                return error_set(ret_error, -EIO, "Cannot initialize a ledger: %s", ledger_git_message());

        (void) git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
        fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
        if (is_ssh)
                ledger_ssh_set_callbacks(&fo.callbacks, &ssh);
        if (git_remote_create_anonymous(&remote, repo, url) < 0)
                return error_set(ret_error, -EINVAL, "Invalid URL '%s': %s", url, ledger_git_message());
        char *specs[] = { spec };
        git_strarray refspecs = { specs, 1 };
        r = git_remote_fetch(remote, &refspecs, &fo, "agentfab: view");
        if (r < 0)
                return error_set(ret_error, ledger_ssh_errno(&ssh, ledger_git_errno(r)),
                                 "Cannot fetch the task's branch from '%s': %s", url, ledger_ssh_message(&ssh));
        if (git_reference_name_to_id(&base, repo, base_ref) < 0)
                return error_set(ret_error, -ENOENT, "'%s' has no %s: the task published nothing yet.", url, base_ref);
        if (git_reference_name_to_id(&tip, repo, tip_ref) < 0)
                return error_set(ret_error, -ENOENT, "'%s' has no %s.", url, tip_ref);
        if (!git_oid_equal(&tip, &base) && git_graph_descendant_of(repo, &tip, &base) != 1)
                return error_set(ret_error, -EBADMSG, "%s does not descend from the task's base.", tip_ref);
        if (git_reference_create(&made, repo, LEDGER_BASE_REF, &base, 1, "agentfab: view") < 0)
                return error_set(ret_error, -EIO, "Cannot set the base: %s", ledger_git_message());
        git_reference_free(made);
        if (git_reference_create(&made, repo, ref, &tip, 1, "agentfab: view") < 0)
                return error_set(ret_error, -EIO, "Cannot set the branch: %s", ledger_git_message());
        git_reference_free(made);
        git_repository_free(TAKE_PTR(repo));
        r = ledger_open(dir_fd, branch, ret);
        if (r < 0)
                return error_set(ret_error, r, "Cannot open the fetched ledger: %s", strerror(-r));
        return 0;
}
