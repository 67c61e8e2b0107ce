/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2/sys/mempack.h>

#include "fs-util.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* The delivery's push of the task's branch, with a token from a credential
 * and nothing of the daemon user's own git setup. */

typedef struct PushState {
        const char *token;
        unsigned attempts;
        char *rejected;
} PushState;

static int push_credentials_cb(git_credential **out, const char *url, const char *username_from_url,
                               unsigned int allowed_types, void *payload) {
        PushState *s = payload;

        /* One try: a wrong token must not loop. */
        if (!s->token || s->attempts++ > 0 || !(allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT))
                return GIT_PASSTHROUGH;
        return git_credential_userpass_plaintext_new(out, username_from_url ?: "x-access-token", s->token);
}

static int push_update_cb(const char *refname, const char *status, void *data) {
        PushState *s = data;

        if (status && !s->rejected)
                s->rejected = strdup(status);
        return 0;
}

static bool branch_pushable(const char *branch) {
        static const char *const refused[] = { "main", "master", "head", "default", "trunk", "develop", "release", "production" };

        if (!strneq(branch, "agentfab/", 9) || isempty(branch + 9))
                return false;
        /* Even below agentfab/, nothing that reads like a shared branch. */
        const char *last = strrchr(branch, '/') + 1;
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (strcasecmp(last, refused[i]) == 0)
                        return false;
        return true;
}

int ledger_push(Ledger *l, const char *url, const char *credential_token, char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        git_push_options po;
        (void) git_push_options_init(&po, GIT_PUSH_OPTIONS_VERSION);
        _cleanup_free_ char *spec = NULL;
        PushState s = { .token = credential_token };
        int r;

        assert(l);
        assert(url);

        if (!branch_pushable(l->branch))
                return error_set(ret_error, -EPERM, "Refusing to push branch '%s': only branches under agentfab/ are pushed.",
                                        l->branch);
        /* No "+": never a forced update. */
        if (asprintf(&spec, "%s:%s", l->ref, l->ref) < 0)
                return -ENOMEM;

        po.callbacks.credentials = push_credentials_cb;
        po.callbacks.push_update_reference = push_update_cb;
        po.callbacks.payload = &s;
        po.pb_parallelism = 1;

        if (git_remote_create_anonymous(&remote, l->repo, url) < 0)
                return error_set(ret_error, -EINVAL, "Invalid URL '%s': %s", url, ledger_git_message());

        char *specs[] = { spec };
        git_strarray refspecs = { specs, 1 };
        r = git_remote_push(remote, &refspecs, &po);
        if (r < 0) {
                free(s.rejected);
                return error_set(ret_error, ledger_git_errno(r), "Cannot push to '%s': %s", url, ledger_git_message());
        }
        if (s.rejected) {
                r = error_set(ret_error, -ESTALE, "'%s' refused branch '%s': %s", url, l->branch, s.rejected);
                free(s.rejected);
                return r;
        }
        return 0;
}

