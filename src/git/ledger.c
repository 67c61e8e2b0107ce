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

#include "fs-util.h"
#include "io-util.h"
#include "json-util.h"
#include "known-hosts.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

void ledger_library_init(void) {
        static bool initialized = false;

        if (initialized)
                return;
        initialized = true;

        (void) git_libgit2_init();

        /* The daemon's own ~/.gitconfig and /etc/gitconfig must not change what
         * a ledger does (e.g. a credential helper or a url.insteadOf rewrite). */
        (void) git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_GLOBAL, "");
        (void) git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, "");
        (void) git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_SYSTEM, "");

        /* A step is acknowledged only once its commit, every object it needs
         * and its ref are on the disk. libgit2 then fsyncs each loose object
         * before renaming it into place (so that no object ever exists under
         * its name with torn contents, which a later step would take for
         * present and never write again) and the fan-out directory after;
         * likewise packs and refs. What it leaves out, ledger-sync.c adds. */
        (void) git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);

        /* SECURITY: owner validation (safe.directory) is left as it is. A local
         * source is never opened as a repository: its objects are read through
         * plain odb backends and its refs by hand (see import_local()), so none
         * of its configuration is ever read and nothing of it can run. The
         * ledger itself belongs to the daemon and passes the check. Only a
         * file:// URL goes through libgit2's local transport, which does open
         * the source as a repository and is therefore subject to the check. */
}

const char *ledger_git_message(void) {
        const git_error *e = git_error_last();
        return e && e->message ? e->message : "unknown error";
}

int ledger_git_errno(int error) {
        switch (error) {
        case 0:
                return 0;
        case GIT_ENOTFOUND:
                return -ENOENT;
        case GIT_EEXISTS:
                return -EEXIST;
        case GIT_EAMBIGUOUS:
        case GIT_EINVALIDSPEC:
                return -EINVAL;
        case GIT_EBAREREPO:
                return -ENOTDIR;
        case GIT_EUNBORNBRANCH:
                return -ENOENT;
        case GIT_ELOCKED:
                return -EBUSY;
        case GIT_EUSER:
                return -ECANCELED;
        case GIT_EAUTH:
                return -EACCES;
        case GIT_ECERTIFICATE:
                return -EPERM;
        case GIT_ENONFASTFORWARD:
        case GIT_EMODIFIED:
        case GIT_ECONFLICT:
                return -ESTALE;
        default:
                return -EIO;
        }
}

int ledger_write_all(int fd, const void *data, size_t size) {
        return loop_write(fd, data, size);
}

char *ledger_one_line(const char *s, size_t max) {
        _cleanup_free_ char *t = strdup(strempty(s));
        if (!t)
                return NULL;

        for (char *c = t; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        *c = ' ';
        utf8_sanitize(t, strlen(t));
        utf8_blank_c1(t);

        /* Trim, so that "subject\n" and "subject" give the same line. */
        char *start = t;
        while (*start == ' ')
                start++;
        size_t n = strlen(start);
        while (n > 0 && start[n - 1] == ' ')
                start[--n] = '\0';

        return strshorten_line(start, max);
}

int ledger_oid_from_hex(const char *hex, git_oid *ret) {
        if (!hex || strlen(hex) != GIT_OID_HEXSZ)
                return -EINVAL;
        for (const char *c = hex; *c; c++)
                if (!isxdigit((unsigned char) *c))
                        return -EINVAL;
        return git_oid_fromstr(ret, hex) < 0 ? -EINVAL : 0;
}

int ledger_branch_to_ref(const char *branch, char **ret) {
        int valid = 0;

        if (isempty(branch) || strlen(branch) > 200)
                return -EINVAL;

        _cleanup_free_ char *ref = NULL;
        if (asprintf(&ref, "refs/heads/%s", branch) < 0)
                return -ENOMEM;
        if (git_reference_name_is_valid(&valid, ref) < 0 || !valid)
                return -EINVAL;
        *ret = TAKE_PTR(ref);
        return 0;
}

Ledger *ledger_free(Ledger *l) {
        if (!l)
                return NULL;
        ledger_submodules_free(l->subs, l->n_subs);
        ledger_stage_free(l);
        git_repository_free(l->repo);
        free(l->branch);
        free(l->ref);
        safe_close(l->workspace_fd);
        free(l);
        return NULL;
}

int ledger_workspace_fd(Ledger *l) {
        assert(l);
        return l->workspace_fd;
}

const char *ledger_branch(Ledger *l) {
        assert(l);
        return l->branch;
}

int ledger_base(Ledger *l, char ret[static 41]) {
        assert(l);
        git_oid_tostr(ret, GIT_OID_HEXSZ + 1, &l->base);
        return 0;
}

int ledger_tip(Ledger *l, git_oid *ret) {
        int r = git_reference_name_to_id(ret, l->repo, l->ref);
        return r < 0 ? ledger_git_errno(r) : 0;
}

int ledger_head(Ledger *l, char ret[static 41]) {
        git_oid id;
        int r;

        assert(l);

        r = ledger_tip(l, &id);
        if (r < 0)
                return r;
        git_oid_tostr(ret, GIT_OID_HEXSZ + 1, &id);
        return 0;
}

int ledger_walk_new(Ledger *l, git_revwalk **ret) {
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        git_oid tip;
        int r;

        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;
        if (git_revwalk_new(&w, l->repo) < 0 ||
            git_revwalk_sorting(w, GIT_SORT_TOPOLOGICAL | GIT_SORT_REVERSE) < 0 ||
            git_revwalk_push(w, &tip) < 0 ||
            git_revwalk_hide(w, &l->base) < 0)
                return -EIO;
        *ret = TAKE_PTR(w);
        return 0;
}

/* Makes a Ledger of repo (the caller's until success) with workspace_fd
 * (always taken) as its work tree; -EBADF: none yet (a submodule whose
 * directory the sandbox removed: ledger_submodule_attach() comes later). */
int ledger_attach_fd(git_repository *repo, int workspace_fd, const char *branch, Ledger **ret) {
        _cleanup_close_ int fd = workspace_fd;
        _cleanup_(ledger_freep) Ledger *l = NULL;
        char path[64];

        l = calloc(1, sizeof(Ledger));
        if (!l)
                return -ENOMEM;
        l->workspace_fd = -EBADF;
        l->max_bytes = UINT64_MAX;

        l->branch = strdup(branch);
        if (!l->branch || ledger_branch_to_ref(branch, &l->ref) < 0)
                return l->branch ? -EINVAL : -ENOMEM;

        /* The workspace has no .git: the link from work tree to repository
         * exists only in this process, so the sandbox cannot reach the
         * history through it. */
        if (fd >= 0) {
                (void) snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                if (git_repository_set_workdir(repo, path, 0) < 0)
                        return -EIO;
        }
        l->workspace_fd = TAKE_FD(fd);

        _cleanup_(git_config_freep) git_config *cfg = NULL;
        int64_t v;
        if (git_repository_config(&cfg, repo) >= 0 && git_config_get_int64(&v, cfg, "agentfab.maxbytes") >= 0 && v >= 0)
                l->max_bytes = (uint64_t) v;

        /* HEAD names the task's branch, for git in the sandbox (which reads
         * the ledger as it is): written only when it names another. */
        _cleanup_(git_reference_freep) git_reference *head = NULL;
        if (git_reference_lookup(&head, repo, "HEAD") < 0 || git_reference_type(head) != GIT_REFERENCE_SYMBOLIC ||
            !streq_ptr(git_reference_symbolic_target(head), l->ref))
                (void) git_repository_set_head(repo, l->ref);

        /* The repository is the caller's until here, also on failure. */
        l->repo = repo;
        *ret = TAKE_PTR(l);
        return 0;
}

int ledger_attach(int task_dir_fd, git_repository *repo, const char *branch, Ledger **ret) {
        int fd = openat(task_dir_fd, "workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return ledger_attach_fd(repo, fd, branch, ret);
}

/* Opens path (relative, checked) below dir_fd as a directory. SECURITY: the
 * sandbox owns everything below the workspace; symlinks and ".." are
 * refused by the kernel on the whole way. */
int ledger_open_beneath_dir(int dir_fd, const char *path) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

int ledger_submodule_attach(Ledger *parent, LedgerSubmodule *s) {
        char path[64];

        assert(parent);
        assert(s && s->ledger);

        if (parent->workspace_fd < 0)
                return -ENOENT;
        _cleanup_close_ int fd = ledger_open_beneath_dir(parent->workspace_fd, s->path);
        if (fd < 0)
                return fd;
        /* The new directory takes the old one's fd number, so the work tree
         * path libgit2 has stays right (setting it again leaks in 1.5). */
        if (s->ledger->workspace_fd >= 0)
                return dup3(fd, s->ledger->workspace_fd, O_CLOEXEC) < 0 ? -errno : 0;
        s->ledger->workspace_fd = TAKE_FD(fd);
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d", s->ledger->workspace_fd);
        return git_repository_set_workdir(s->ledger->repo, path, 0) < 0 ? -EIO : 0;
}
int ledger_submodule_git_path(Ledger *parent, const char *name, char **ret) {
        const char *p = git_repository_path(parent->repo);
        if (!p)
                return -EIO;
        return asprintf(ret, "%s%smodules/%s", p, p[strlen(p) - 1] == '/' ? "" : "/", name) < 0 ? -ENOMEM : 0;
}

int ledger_base_tree(Ledger *l, git_tree **ret) {
        _cleanup_(git_commit_freep) git_commit *c = NULL;

        if (git_commit_lookup(&c, l->repo, &l->base) < 0 || git_commit_tree(ret, c) < 0)
                return -EBADMSG;
        return 0;
}

int ledger_destroy(int task_dir_fd) {
        int r, k;

        assert(task_dir_fd >= 0);

        r = rm_rf_at(task_dir_fd, "workspace");
        k = rm_rf_at(task_dir_fd, "ledger.git");
        return r < 0 ? r : k;
}

/* Only the daemon ever opens a ledger, one Ledger per task: a lock file
 * found on open is what a crash in the middle of a write left. git_dir ends
 * with a slash. */
static void remove_stale_locks(const char *git_dir, const char *ref) {
        static const char *const names[] = { "index.lock", "HEAD.lock", "packed-refs.lock" };
        _cleanup_free_ char *ref_lock = NULL;

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, "%s%s", git_dir, names[i]) >= 0)
                        (void) unlink(p);
        }
        if (asprintf(&ref_lock, "%s%s.lock", git_dir, ref) >= 0)
                (void) unlink(ref_lock);
}

/* Attaches the ledgers of the submodules that ledger_create() fetched: the
 * same list, read again from base's .gitmodules. */
static int submodules_open(Ledger *l, unsigned depth) {
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        int r;

        r = ledger_base_tree(l, &tree);
        if (r < 0)
                return r;
        if (ledger_submodules_read(l->repo, tree, NULL, &l->subs, &l->n_subs, NULL) < 0)
                return -EBADMSG;
        if (l->n_subs > 0 && depth > LEDGER_SUBMODULE_DEPTH_MAX)
                return -EBADMSG;

        for (size_t i = 0; i < l->n_subs; i++) {
                LedgerSubmodule *s = &l->subs[i];
                _cleanup_(git_repository_freep) git_repository *repo = NULL;
                _cleanup_free_ char *git_path = NULL, *dir = NULL;
                git_oid tip;

                r = ledger_submodule_git_path(l, s->name, &git_path);
                if (r < 0)
                        return r;
                if (asprintf(&dir, "%s/", git_path) < 0)
                        return -ENOMEM;
                remove_stale_locks(dir, l->ref);
                if (git_repository_open_ext(&repo, git_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                        return log_debug_errno(-EBADMSG, "Cannot open the ledger of submodule '%s': %s", s->name, ledger_git_message());

                /* Its directory may be gone (the task removed it): attached again when it is back. */
                int fd = l->workspace_fd >= 0 ? ledger_open_beneath_dir(l->workspace_fd, s->path) : -EBADF;
                r = ledger_attach_fd(repo, fd < 0 ? -EBADF : fd, l->branch, &s->ledger);
                if (r < 0)
                        return r;
                repo = NULL;
                if (git_reference_name_to_id(&s->ledger->base, s->ledger->repo, LEDGER_BASE_REF) < 0 ||
                    !git_oid_equal(&s->ledger->base, &s->commit))
                        return -EBADMSG;
                r = ledger_tip(s->ledger, &tip);
                if (r < 0)
                        return r;
                r = submodules_open(s->ledger, depth + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

int ledger_open(int task_dir_fd, const char *branch, Ledger **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(ledger_freep) Ledger *l = NULL;
        char path[64];
        int r;

        assert(task_dir_fd >= 0);
        assert(ret);

        ledger_library_init();

        _cleanup_free_ char *ref = NULL;
        if (ledger_branch_to_ref(branch, &ref) < 0)
                return -EINVAL;

        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d/ledger.git/", task_dir_fd);
        remove_stale_locks(path, ref);
        if (git_repository_open_ext(&repo, path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                return log_debug_errno(-ENOENT, "Cannot open ledger: %s", ledger_git_message());

        r = ledger_attach(task_dir_fd, repo, branch, &l);
        if (r < 0)
                return r;
        repo = NULL;

        if (git_reference_name_to_id(&l->base, l->repo, LEDGER_BASE_REF) < 0)
                return -EBADMSG;
        git_oid tip;
        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;

        _cleanup_(git_config_freep) git_config *cfg = NULL;
        int submodules = 0;
        if (git_repository_config(&cfg, l->repo) >= 0 && git_config_get_bool(&submodules, cfg, "agentfab.submodules") >= 0 &&
            submodules) {
                r = submodules_open(l, 1);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(l);
        return 0;
}

