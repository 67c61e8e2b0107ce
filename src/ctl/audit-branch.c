/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <git2.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-branch.h"
#include "macro.h"
#include "string-util.h"

/* As many commits as the daemon lists for a branch (task-branch.c). */
#define AUDIT_BRANCH_COMMITS_MAX 100000U

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_reference_iterator *, git_reference_iterator_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_revwalk *, git_revwalk_free);

static const char *git_message(void) {
        const git_error *e = git_error_last();
        return e && e->message ? e->message : "unknown error";
}

static void commits_free(char **c, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(c[i]);
        free(c);
}

/* The tip: the ref of the highest epoch. A takeover's host publishes
 * under its own epoch, so the highest one with a ref is the branch as the
 * last host to publish had it; an old host's refs stop where its epoch
 * did. */
static int find_tip(git_repository *repo, const char *prefix, git_oid *ret_tip, uint64_t *ret_epoch) {
        _cleanup_(git_reference_iterator_freep) git_reference_iterator *it = NULL;
        _cleanup_free_ char *glob = NULL;
        const char *name;
        bool found = false;
        int r;

        if (asprintf(&glob, "%s/*", prefix) < 0)
                return -ENOMEM;
        if (git_reference_iterator_glob_new(&it, repo, glob) < 0)
                return -EIO;
        while ((r = git_reference_next_name(&name, it)) == 0) {
                const char *n = name + strlen(prefix) + 1;
                char *end;
                unsigned long long e;

                if (n[0] < '0' || n[0] > '9')
                        continue;   /* base, or not an epoch */
                errno = 0;
                e = strtoull(n, &end, 10);
                if (errno != 0 || *end != '\0' || (found && e <= *ret_epoch))
                        continue;
                if (git_reference_name_to_id(ret_tip, repo, name) < 0)
                        return -EIO;
                *ret_epoch = e;
                found = true;
        }
        if (r != GIT_ITEROVER)
                return -EIO;
        return found ? 0 : -ENOENT;
}

int audit_branch_from_repository(const char *path, const char *id, char ***ret, size_t *ret_n, char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_free_ char *prefix = NULL, *base_ref = NULL;
        char **commits = NULL;
        size_t n = 0;
        uint64_t epoch = 0;
        git_oid tip, base, oid;
        int r;

        if (git_libgit2_init() < 0)
                return error_set(ret_error, -EIO, "Cannot start libgit2.");
        if (asprintf(&prefix, "refs/agentfab/%s", id) < 0 || asprintf(&base_ref, "%s/base", prefix) < 0)
                return -ENOMEM;
        if (git_repository_open_ext(&repo, path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
                return error_set(ret_error, -EIO, "Cannot open repository '%s': %s", path, git_message());
        r = find_tip(repo, prefix, &tip, &epoch);
        if (r == -ENOENT)
                return error_set(ret_error, r, "Repository '%s' has no %s/EPOCH: the fleet published no step of task %s there.",
                                 path, prefix, id);
        if (r < 0)
                return error_set(ret_error, r, "Cannot read the refs of repository '%s': %s", path, git_message());
        if (git_reference_name_to_id(&base, repo, base_ref) < 0)
                return error_set(ret_error, -ENOENT, "Repository '%s' has no %s: %s", path, base_ref, git_message());

        if (git_revwalk_new(&w, repo) < 0 || git_revwalk_sorting(w, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE) < 0 ||
            git_revwalk_push(w, &tip) < 0 || git_revwalk_hide(w, &base) < 0)
                return error_set(ret_error, -EIO, "Cannot walk %s/%" PRIu64 " in '%s': %s", prefix, epoch, path, git_message());
        while ((r = git_revwalk_next(&oid, w)) == 0) {
                char **a;

                if (n >= AUDIT_BRANCH_COMMITS_MAX) {
                        commits_free(commits, n);
                        return error_set(ret_error, -E2BIG, "Task %s has more than %u commits.", id, AUDIT_BRANCH_COMMITS_MAX);
                }
                a = reallocarray(commits, n + 2, sizeof(char *));
                if (!a) {
                        commits_free(commits, n);
                        return -ENOMEM;
                }
                commits = a;
                commits[n] = malloc(GIT_OID_HEXSZ + 1);
                if (!commits[n]) {
                        commits_free(commits, n);
                        return -ENOMEM;
                }
                git_oid_tostr(commits[n++], GIT_OID_HEXSZ + 1, &oid);
                commits[n] = NULL;
        }
        if (r != GIT_ITEROVER) {
                commits_free(commits, n);
                return error_set(ret_error, -EIO, "Cannot walk %s/%" PRIu64 " in '%s': %s", prefix, epoch, path, git_message());
        }
        if (!commits) {
                commits = calloc(1, sizeof(char *));   /* no commit past the base: an empty list */
                if (!commits)
                        return -ENOMEM;
        }
        *ret = commits;
        *ret_n = n;
        return 0;
}
