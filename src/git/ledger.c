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
#include "json-util.h"
#include "known-hosts.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* Bounds on the source's refs we read by hand, and on a workspace scan. */
#define REF_FILE_MAX (64U * 1024U)
#define PACKED_REFS_MAX (64U * 1024U * 1024U)
#define SYMREF_DEPTH_MAX 5
#define SCAN_DEPTH_MAX 128

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

int ledger_set_error(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                char *m = NULL;

                va_start(ap, fmt);
                if (vasprintf(&m, fmt, ap) < 0)
                        m = NULL;
                va_end(ap);
                free(*ret_error);
                *ret_error = m;
        }
        return r;
}

int ledger_write_all(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

char *ledger_one_line(const char *s, size_t max) {
        _cleanup_free_ char *t = strdup(strempty(s));
        if (!t)
                return NULL;

        for (char *c = t; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        *c = ' ';
        utf8_sanitize(t, strlen(t));

        /* Trim, so that "subject\n" and "subject" give the same line. */
        char *start = t;
        while (*start == ' ')
                start++;
        size_t n = strlen(start);
        while (n > 0 && start[n - 1] == ' ')
                start[--n] = '\0';

        return strshorten_line(start, max);
}

static int oid_from_hex(const char *hex, git_oid *ret) {
        if (!hex || strlen(hex) != GIT_OID_HEXSZ)
                return -EINVAL;
        for (const char *c = hex; *c; c++)
                if (!isxdigit((unsigned char) *c))
                        return -EINVAL;
        return git_oid_fromstr(ret, hex) < 0 ? -EINVAL : 0;
}

static int branch_to_ref(const char *branch, char **ret) {
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

/* ---- import of the source ---- */

typedef struct ImportSize {
        uint64_t checkout;      /* bytes the checkout of base writes */
        uint64_t max;
        bool too_big;
} ImportSize;

typedef struct TreeSum {
        git_odb *odb;
        uint64_t total, max;
        int error;
} TreeSum;

static int tree_sum_cb(const char *root, const git_tree_entry *e, void *userdata) {
        TreeSum *s = userdata;
        size_t size;
        git_object_t type;

        if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
                return 0;       /* Trees are walked into; gitlinks are never fetched. */
        if (git_odb_read_header(&size, &type, s->odb, git_tree_entry_id(e)) < 0) {
                s->error = -EBADMSG;
                return -1;
        }
        s->total += size;
        if (s->total > s->max) {
                s->error = -EFBIG;
                return -1;
        }
        return 0;
}

/* Sums what checking out tree writes, stopping as soon as it exceeds max. */
static int tree_size(git_repository *repo, git_tree *tree, uint64_t max, uint64_t *ret) {
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        TreeSum s = { .max = max };

        if (git_repository_odb(&odb, repo) < 0)
                return -EIO;
        s.odb = odb;
        if (git_tree_walk(tree, GIT_TREEWALK_PRE, tree_sum_cb, &s) < 0 && s.error == 0)
                s.error = -EIO;
        *ret = s.total;
        return s.error;
}

/* Counts the pack as it is made; libgit2 1.5's git_packbuilder_write()
 * reports garbage byte counts, so the pack is fed to an indexer by hand. */
typedef struct PackSink {
        git_indexer *indexer;
        git_indexer_progress stats;
        uint64_t written;
        ImportSize *size;
} PackSink;

static bool import_too_big(ImportSize *s, uint64_t bytes) {
        return s->max != UINT64_MAX && bytes > s->max - MIN(s->checkout, s->max);
}

static int pack_sink_cb(void *buf, size_t size, void *payload) {
        PackSink *p = payload;

        p->written += size;
        if (import_too_big(p->size, p->written)) {
                p->size->too_big = true;
                return -1;
        }
        return git_indexer_append(p->indexer, buf, size, &p->stats) < 0 ? -1 : 0;
}

static int pack_progress_cb(const git_indexer_progress *stats, void *payload) {
        ImportSize *s = payload;

        if (import_too_big(s, stats->received_bytes)) {
                s->too_big = true;
                return -1;
        }
        return 0;
}

static bool ref_name_safe(const char *name) {
        int valid = 0;

        if (streq(name, "HEAD"))
                return true;
        return strneq(name, "refs/", 5) && git_reference_name_is_valid(&valid, name) >= 0 && valid;
}

/* Reads a small regular file below dir_fd. SECURITY: symlinks anywhere on
 * the way and ".." out of dir_fd are refused by the kernel, so a source
 * cannot make the daemon read files its owner could not. */
static int read_beneath(int dir_fd, const char *path, size_t max, char **ret) {
        struct open_how how = {
                .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        struct stat st;
        size_t n = 0;

        _cleanup_close_ int fd = (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;

        _cleanup_free_ char *buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (n < (size_t) st.st_size) {
                ssize_t k = read(fd, buf + n, (size_t) st.st_size - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

static int packed_ref_lookup(int common_fd, const char *name, git_oid *ret) {
        _cleanup_free_ char *data = NULL;
        int r;

        r = read_beneath(common_fd, "packed-refs", PACKED_REFS_MAX, &data);
        if (r < 0)
                return r == -ENOENT ? -ENOENT : r;

        for (char *line = data, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (line[0] == '#' || line[0] == '^' || strlen(line) < GIT_OID_HEXSZ + 2 || line[GIT_OID_HEXSZ] != ' ')
                        continue;
                if (!streq(line + GIT_OID_HEXSZ + 1, name))
                        continue;
                line[GIT_OID_HEXSZ] = '\0';
                return oid_from_hex(line, ret) < 0 ? -EBADMSG : 0;
        }
        return -ENOENT;
}

/* Resolves one ref of the source by reading its files: loose ref (symbolic
 * or not), then packed-refs. HEAD of a linked worktree lives in its own git
 * directory, everything else in the common one. */
static int source_ref_lookup(int git_fd, int common_fd, const char *name, unsigned depth, git_oid *ret) {
        _cleanup_free_ char *data = NULL;
        int r;

        if (depth > SYMREF_DEPTH_MAX || !ref_name_safe(name))
                return -ENOENT;

        r = read_beneath(streq(name, "HEAD") ? git_fd : common_fd, name, REF_FILE_MAX, &data);
        if (r == -ENOENT || r == -ENOTDIR || r == -EISDIR || r == -EBADFD)
                return streq(name, "HEAD") ? -ENOENT : packed_ref_lookup(common_fd, name, ret);
        if (r < 0)
                return r;

        data[strcspn(data, "\r\n")] = '\0';
        if (strneq(data, "ref: ", 5))
                return source_ref_lookup(git_fd, common_fd, data + 5, depth + 1, ret);
        return oid_from_hex(data, ret) < 0 ? -EBADMSG : 0;
}

static int source_resolve(git_repository *repo, int git_fd, int common_fd, const char *base, git_oid *ret) {
        static const char *const patterns[] = { "%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s" };
        git_oid id;
        int r;

        if (oid_from_hex(base, &id) >= 0) {
                *ret = id;
                return 0;
        }

        /* An abbreviated commit id, as people copy them from git log. */
        size_t n = strlen(base);
        if (n >= 7 && n < GIT_OID_HEXSZ && strspn(base, "0123456789abcdef") == n) {
                _cleanup_(git_odb_freep) git_odb *odb = NULL;
                git_oid prefix;

                if (git_repository_odb(&odb, repo) < 0 || git_oid_fromstrn(&prefix, base, n) < 0)
                        return -EIO;
                if (git_odb_exists_prefix(ret, odb, &prefix, n) == 0)
                        return 0;
        }

        for (size_t i = 0; i < ELEMENTSOF(patterns); i++) {
                _cleanup_free_ char *name = NULL;

                if (asprintf(&name, patterns[i], base) < 0)
                        return -ENOMEM;
                r = source_ref_lookup(git_fd, common_fd, name, 0, ret);
                if (r != -ENOENT)
                        return r;
        }
        return -ENOENT;
}

/* HEAD is a symbolic ref (to a branch that, since HEAD did not resolve,
 * has no commit): a repository made with git init and nothing committed. */
static bool source_head_unborn(int git_fd) {
        _cleanup_free_ char *head = NULL;

        if (read_beneath(git_fd, "HEAD", REF_FILE_MAX, &head) < 0)
                return false;
        return strneq(head, "ref: refs/heads/", 16);
}

static int same_owner(int a, int b) {
        struct stat sa, sb;

        if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0)
                return -errno;
        return sa.st_uid == sb.st_uid ? 0 : -EPERM;
}

/* Follows a pointer file (".git" of a linked worktree: "gitdir: X";
 * "commondir" of its git directory: "X") relative to dir_fd. SECURITY: the
 * target must belong to the owner of the directory that points to it, so a
 * repository cannot borrow somebody else's history that only the daemon can
 * read. */
static int open_pointer(int dir_fd, const char *name, const char *prefix, int *ret) {
        _cleanup_free_ char *data = NULL;
        int r;

        r = read_beneath(dir_fd, name, REF_FILE_MAX, &data);
        if (r < 0)
                return r;
        data[strcspn(data, "\r\n")] = '\0';
        if (!strneq(data, prefix, strlen(prefix)) || isempty(data + strlen(prefix)))
                return -ENOTDIR;

        _cleanup_close_ int fd = openat(dir_fd, data + strlen(prefix), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = same_owner(dir_fd, fd);
        if (r < 0)
                return r;
        *ret = TAKE_FD(fd);
        return 0;
}

/* SECURITY: libgit2 reads objects by path, following symlinks, so none may
 * be in the object directory: a link to another repository's objects would
 * hand over whatever of it the caller can name. (The owner can still race
 * us; the integrator may run the import with the submitter's fsuid.) */
static int check_objects(int objects_fd, char **ret_error) {
        DIR *d = xopendirat(objects_fd, ".", 0);
        if (!d)
                return -errno;

        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = -errno;
                        break;
                }
                if (S_ISLNK(st.st_mode)) {
                        r = ledger_set_error(ret_error, -ELOOP, "The object directory contains a symlink 'objects/%s'.", de->d_name);
                        break;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;

                DIR *sub = xopendirat(dirfd(d), de->d_name, O_NOFOLLOW);
                if (!sub) {
                        r = -errno;
                        break;
                }
                for (struct dirent *e; (e = readdir(sub));) {
                        struct stat est;

                        if (fstatat(dirfd(sub), e->d_name, &est, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISLNK(est.st_mode)) {
                                r = ledger_set_error(ret_error, -ELOOP, "The object directory contains a symlink 'objects/%s/%s'.",
                                                     de->d_name, e->d_name);
                                break;
                        }
                }
                closedir(sub);
        }
        closedir(d);
        return r;
}

static int open_source(const char *source, int source_fd, int *ret_git_fd, int *ret_common_fd, int *ret_objects_fd) {
        _cleanup_close_ int dir_fd = -EBADF, git_fd = -EBADF, common_fd = -EBADF, objects_fd = -EBADF;
        struct stat st;
        int r;

        if (source_fd >= 0)
                dir_fd = fcntl(source_fd, F_DUPFD_CLOEXEC, 3);
        else
                dir_fd = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return -errno;

        if (fstatat(dir_fd, ".git", &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                if (S_ISDIR(st.st_mode)) {
                        git_fd = openat(dir_fd, ".git", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        if (git_fd < 0)
                                return -errno;
                } else if (S_ISREG(st.st_mode)) {
                        /* A linked worktree (or a submodule's checkout). */
                        r = open_pointer(dir_fd, ".git", "gitdir: ", &git_fd);
                        if (r < 0)
                                return r;
                } else
                        return -ENOTDIR;
        } else if (errno != ENOENT)
                return -errno;
        else if (faccessat(dir_fd, "objects", F_OK, AT_SYMLINK_NOFOLLOW) >= 0 &&
                 faccessat(dir_fd, "HEAD", F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                git_fd = TAKE_FD(dir_fd);       /* A bare repository. */
        else
                return -ENOTDIR;

        /* A linked worktree keeps its objects and refs in the common directory. */
        r = open_pointer(git_fd, "commondir", "", &common_fd);
        if (r == -ENOENT) {
                common_fd = fcntl(git_fd, F_DUPFD_CLOEXEC, 3);
                if (common_fd < 0)
                        return -errno;
        } else if (r < 0)
                return r;

        objects_fd = openat(common_fd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (objects_fd < 0)
                return errno == ENOENT ? -ENOTDIR : -errno;

        *ret_git_fd = TAKE_FD(git_fd);
        *ret_common_fd = TAKE_FD(common_fd);
        *ret_objects_fd = TAKE_FD(objects_fd);
        return 0;
}

static int peel_commit(git_repository *repo, const git_oid *id, git_oid *ret) {
        _cleanup_(git_object_freep) git_object *o = NULL, *peeled = NULL;

        if (git_object_lookup(&o, repo, id, GIT_OBJECT_ANY) < 0)
                return -ENOENT;
        if (git_object_peel(&peeled, o, GIT_OBJECT_COMMIT) < 0)
                return -EMEDIUMTYPE;
        git_oid_cpy(ret, git_object_id(peeled));
        return 0;
}

static int check_checkout_size(git_repository *repo, const git_oid *base, uint64_t max, const char *source,
                               uint64_t *ret, char **ret_error) {
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        int r;

        if (git_commit_lookup(&commit, repo, base) < 0 || git_commit_tree(&tree, commit) < 0)
                return ledger_set_error(ret_error, -EBADMSG, "Base commit of '%s' cannot be read: %s",
                                        source, ledger_git_message());
        r = tree_size(repo, tree, max, ret);
        if (r == -EFBIG)
                return ledger_set_error(ret_error, r,
                                        "Repository '%s' is too big: checking it out needs more than the limit of %" PRIu64 " bytes.",
                                        source, max);
        if (r < 0)
                return ledger_set_error(ret_error, r, "Base commit of '%s' is incomplete: %s", source, ledger_git_message());
        return 0;
}

/* Copies every object reachable from base out of a local repository into the
 * ledger. SECURITY: the source is never opened as a repository: its object
 * directory is attached to the ledger's object database as a read-only
 * alternate (never written to: libgit2 writes only to non-alternate
 * backends), its refs are read as files. So none of its config (filters,
 * hooks path, fsmonitor, alternates of its own), index or work tree is ever
 * looked at, and the only thing written is a new pack in the ledger. The
 * source's own info/alternates are not followed: it could name object
 * directories its owner cannot read but the daemon can. */
static int import_local(const char *ledger_path, int git_fd, int common_fd, int objects_fd, const char *what,
                        const char *base, const git_oid *commit, uint64_t max, git_oid *ret_base, uint64_t *ret_used,
                        char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        git_odb_backend *loose = NULL, *pack = NULL;
        char objects[PATH_MAX];
        git_oid id;
        int r;

        r = check_objects(objects_fd, ret_error);
        if (r < 0)
                return ret_error && *ret_error ? r : ledger_set_error(ret_error, r, "Cannot read the objects of '%s': %s", what, strerror(-r));

        if (git_repository_open_ext(&repo, ledger_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0 ||
            git_repository_odb(&odb, repo) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot open the new ledger: %s", ledger_git_message());

        /* Reached through the fd, so that a directory the daemon cannot reach
         * by path (a private home) works when the submitter handed it over. */
        (void) snprintf(objects, sizeof(objects), "/proc/self/fd/%d", objects_fd);
        if (git_odb_backend_pack(&pack, objects) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot read the packs of '%s': %s", what, ledger_git_message());
        if (git_odb_add_alternate(odb, pack, 2) < 0) {
                pack->free(pack);
                return ledger_set_error(ret_error, -EIO, "Cannot attach '%s': %s", what, ledger_git_message());
        }
        if (git_odb_backend_loose(&loose, objects, -1, 0, 0, 0) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot read the objects of '%s': %s", what, ledger_git_message());
        if (git_odb_add_alternate(odb, loose, 1) < 0) {
                loose->free(loose);
                return ledger_set_error(ret_error, -EIO, "Cannot attach '%s': %s", what, ledger_git_message());
        }

        if (commit) {
                /* A gitlink: exactly that commit, no ref is looked at. */
                if (peel_commit(repo, commit, ret_base) < 0 || !git_oid_equal(ret_base, commit)) {
                        char hex[GIT_OID_HEXSZ + 1];
                        git_oid_tostr(hex, sizeof(hex), commit);
                        return ledger_set_error(ret_error, -ENOENT, "Commit %s of %s is missing from its repository.", hex, what);
                }
        } else {
                r = source_resolve(repo, git_fd, common_fd, base ?: "HEAD", &id);
                if (r == -ENOENT && streq(base ?: "HEAD", "HEAD") && source_head_unborn(git_fd))
                        return ledger_set_error(ret_error, r, "Repository '%s' has no commit yet: commit something first "
                                                "(or name an existing commit with --base).", what);
                if (r < 0)
                        return ledger_set_error(ret_error, r, "'%s' does not name a commit in '%s'.", base ?: "HEAD", what);
                r = peel_commit(repo, &id, ret_base);
                if (r < 0)
                        return ledger_set_error(ret_error, r, "'%s' does not name a commit in '%s'.", base ?: "HEAD", what);
        }

        ImportSize size = { .max = max };
        r = check_checkout_size(repo, ret_base, max, what, &size.checkout, ret_error);
        if (r < 0)
                return r;

        /* Delta search is what makes copying slow (seconds for a few
         * thousand files) and buys little on a local disk: a window memory
         * of one byte keeps libgit2's delta window at a single object. The
         * setting is dropped again after the copy, so that delivery packs
         * (bundles, pushes) are compressed as usual. */
        _cleanup_(git_config_freep) git_config *cfg = NULL;
        if (git_repository_config(&cfg, repo) < 0 || git_config_set_int64(cfg, "pack.windowMemory", 1) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot configure the ledger: %s", ledger_git_message());

        _cleanup_(git_packbuilder_freep) git_packbuilder *pb = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *walk = NULL;
        if (git_packbuilder_new(&pb, repo) < 0 || git_revwalk_new(&walk, repo) < 0 ||
            git_revwalk_push(walk, ret_base) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot walk the history of '%s': %s", what, ledger_git_message());
        /* One thread: the machine is shared with the sandboxes. */
        (void) git_packbuilder_set_threads(pb, 1);
        if (git_packbuilder_insert_walk(pb, walk) < 0)
                return ledger_set_error(ret_error, -EBADMSG, "History of '%s' is incomplete: %s", what, ledger_git_message());

        _cleanup_free_ char *pack_dir = NULL;
        if (asprintf(&pack_dir, "%s/objects/pack", ledger_path) < 0)
                return -ENOMEM;
        git_indexer_options xo;
        (void) git_indexer_options_init(&xo, GIT_INDEXER_OPTIONS_VERSION);
        PackSink sink = { .size = &size };
        if (git_indexer_new(&sink.indexer, pack_dir, 0, NULL, &xo) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot write into the ledger: %s", ledger_git_message());
        r = git_packbuilder_foreach(pb, pack_sink_cb, &sink) < 0 ? -EIO : 0;
        if (r >= 0 && git_indexer_commit(sink.indexer, &sink.stats) < 0)
                r = -EIO;
        git_indexer_free(sink.indexer);
        (void) git_config_delete_entry(cfg, "pack.windowMemory");
        if (size.too_big)
                return ledger_set_error(ret_error, -EFBIG,
                                        "Repository '%s' is too big: its history and checkout exceed the limit of %" PRIu64 " bytes.",
                                        what, max);
        if (r < 0)
                return ledger_set_error(ret_error, r, "Cannot copy the history of '%s': %s", what, ledger_git_message());
        *ret_used = size.checkout + sink.written;
        return 0;
}

typedef struct SshAuth SshAuth;

typedef struct FetchPayload {
        ImportSize size;
        uint64_t received;
        SshAuth *ssh;           /* ssh:// only */
} FetchPayload;

static int fetch_progress_cb(const git_indexer_progress *stats, void *payload) {
        FetchPayload *p = payload;

        p->received = stats->received_bytes;
        return pack_progress_cb(stats, &p->size);
}

#define FETCH_PREFIX "refs/agentfab/source/"

static int delete_fetch_refs(git_repository *repo) {
        git_reference_iterator *it = NULL;
        git_reference *ref;
        int r = 0;

        if (git_reference_iterator_glob_new(&it, repo, FETCH_PREFIX "*") < 0)
                return -EIO;
        while (git_reference_next(&ref, it) == 0) {
                if (git_reference_delete(ref) < 0 && r == 0)
                        r = -EIO;
                git_reference_free(ref);
        }
        git_reference_iterator_free(it);
        return r;
}

/* ---- ssh:// ---- */

#define SSH_HOST_MAX 255U
#define SSH_USER_MAX 64U
#define SSH_REASON_MAX 512U

typedef struct SshAuth {
        char host[SSH_HOST_MAX + 1];
        char user[SSH_USER_MAX + 1];
        unsigned port;
        const char *key;
        const char *known_hosts;
        unsigned key_tries;
        char reason[SSH_REASON_MAX];    /* why the connection was given up, for the task's error */
        int reason_errno;
} SshAuth;

static bool source_is_ssh(const char *url) {
        return url && strneq(url, "ssh://", 6);
}

/* ssh://[user@]host[:port]/path, host possibly "[v6 address]"; what libgit2
 * connects to, parsed here too so the host key is checked for the port we
 * know (libgit2's certificate callback is told the host only). */
static int ssh_auth_parse(const char *url, SshAuth *a) {
        const char *p = url + 6, *end, *at, *h, *he;
        size_t n;

        end = p + strcspn(p, "/");
        at = memchr(p, '@', (size_t) (end - p));
        strcpy(a->user, "git");
        if (at) {
                n = (size_t) (at - p);
                /* SECURITY: a password in the URL is refused here as well as in the spec. */
                if (n == 0 || n > SSH_USER_MAX || memchr(p, ':', n))
                        return -EINVAL;
                memcpy(a->user, p, n);
                a->user[n] = '\0';
                p = at + 1;
        }
        if (*p == '[') {
                h = p + 1;
                he = memchr(h, ']', (size_t) (end - h));
                if (!he)
                        return -EINVAL;
                p = he + 1;
        } else {
                h = p;
                he = p + strcspn(p, ":/");
                if (he > end)
                        he = end;
                p = he;
        }
        n = (size_t) (he - h);
        if (n == 0 || n > SSH_HOST_MAX)
                return -EINVAL;
        memcpy(a->host, h, n);
        a->host[n] = '\0';
        /* A name or an address as it is, nothing libgit2 would decode first:
         * the host key is checked for the host we connect to. */
        for (const char *c = a->host; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr(".-_:", *c))
                        return -EINVAL;
        a->port = 22;
        if (*p == ':') {
                unsigned long v = 0;

                for (p++; p < end; p++) {
                        if (!isdigit((unsigned char) *p) || v > 65535)
                                return -EINVAL;
                        v = v * 10 + (unsigned long) (*p - '0');
                }
                if (v == 0 || v > 65535)
                        return -EINVAL;
                a->port = (unsigned) v;
        }
        return p == end && *end == '/' ? 0 : -EINVAL;
}

static int ssh_auth_fail(SshAuth *a, int r, int git_error, const char *fmt, ...) {
        va_list ap;

        if (!a) {
                git_error_set_str(GIT_ERROR_SSH, "no ssh settings for this connection");
                return git_error;
        }
        va_start(ap, fmt);
        (void) vsnprintf(a->reason, sizeof(a->reason), fmt, ap);
        va_end(ap);
        a->reason_errno = r;
        git_error_set_str(GIT_ERROR_SSH, a->reason);
        return git_error;
}

/* SECURITY: the host key must be in the known hosts we were given, for this
 * host and port; libgit2's own verdict (from the daemon user's
 * ~/.ssh/known_hosts, if any) counts for nothing. Unknown, changed and
 * revoked keys are all refused, right after the key exchange: before we
 * log in or ask for anything. */
static int ssh_certificate_cb(git_cert *cert, int valid, const char *host, void *payload) {
        SshAuth *a = ((FetchPayload *) payload)->ssh;
        const git_cert_hostkey *hk = (const git_cert_hostkey *) cert;

        (void) valid;
        (void) host;    /* The host we parsed from the URL is the one we connected to. */

        if (!a || cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2)
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE, "Unexpected kind of certificate for an ssh connection.");
        if (!(hk->type & GIT_CERT_SSH_RAW) || !hk->hostkey || hk->hostkey_len == 0)
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE, "The ssh host key of '%s' port %u cannot be read.", a->host, a->port);

        switch (known_hosts_check(a->known_hosts, a->host, a->port, hk->hostkey, hk->hostkey_len)) {
        case KNOWN_HOSTS_MATCH:
                return 0;
        case KNOWN_HOSTS_UNKNOWN:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE,
                                     "The ssh host key of '%s' port %u is unknown: no entry of the known hosts "
                                     "credential names that host and port. Nothing was fetched.", a->host, a->port);
        case KNOWN_HOSTS_MISMATCH:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE,
                                     "The ssh host key of '%s' port %u is unknown: it is not the key the known hosts "
                                     "list for that host and port (the key changed, or this is another host). "
                                     "Nothing was fetched.", a->host, a->port);
        case KNOWN_HOSTS_REVOKED:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE,
                                     "The ssh host key of '%s' port %u is revoked in the known hosts. Nothing was fetched.",
                                     a->host, a->port);
        default:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE, "The ssh host key of '%s' port %u cannot be checked.",
                                     a->host, a->port);
        }
}

/* libgit2 asks again after every refusal: the key is offered once. */
static int ssh_credentials_cb(git_credential **out, const char *url, const char *username_from_url,
                              unsigned allowed, void *payload) {
        SshAuth *a = ((FetchPayload *) payload)->ssh;

        (void) url;
        if (!a)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH, "No credentials for this URL.");
        if (allowed & GIT_CREDENTIAL_USERNAME)
                return git_credential_username_new(out, a->user);
        if (!(allowed & GIT_CREDENTIAL_SSH_MEMORY))
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH, "The ssh server '%s' port %u offers no public key authentication.",
                                     a->host, a->port);
        if (!a->key)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH,
                                     "The ssh server '%s' port %u asks for authentication, but no ssh key is configured "
                                     "([Git] SSHKeyCredential=).", a->host, a->port);
        if (a->key_tries++ > 0)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH,
                                     "Authentication as '%s' at ssh server '%s' port %u failed: the configured key was refused.",
                                     username_from_url ?: a->user, a->host, a->port);
        if (git_credential_ssh_key_memory_new(out, username_from_url ?: a->user, NULL, a->key, NULL) < 0)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH, "The configured ssh key cannot be used: %s", ledger_git_message());
        return 0;
}

/* Fetches from a URL into the ledger. Only libgit2's transports run: no
 * helper program, no hooks; the daemon's git config is cut off (see
 * ledger_library_init()), so no credential helper or URL rewrite applies. */
static int import_url(git_repository *repo, const char *url, const char *base, const LedgerOptions *o, uint64_t max,
                      git_oid *ret_base, uint64_t *ret_used, char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        git_remote_callbacks cbs;
        (void) git_remote_init_callbacks(&cbs, GIT_REMOTE_CALLBACKS_VERSION);
        git_fetch_options fo;
        (void) git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
        _cleanup_git_buf_ git_buf head = { 0 };
        FetchPayload p = { .size = { .max = max } };
        char *specs[] = { (char *) "+refs/heads/*:" FETCH_PREFIX "heads/*", (char *) "+refs/tags/*:" FETCH_PREFIX "tags/*" };
        git_strarray refspecs = { specs, ELEMENTSOF(specs) };
        git_oid id;
        int r;

        /* A remote's HEAD is its default branch. */
        if (base && streq(base, "HEAD"))
                base = NULL;

        cbs.transfer_progress = fetch_progress_cb;
        cbs.payload = &p;

        SshAuth ssh = {};
        if (source_is_ssh(url)) {
                /* SECURITY: never an ssh connection whose host key cannot be checked. */
                if (!o || !o->ssh_known_hosts)
                        return ledger_set_error(ret_error, -EPERM,
                                                "ssh:// repositories need known hosts ([Git] SSHKnownHostsCredential=): "
                                                "not connecting to an unverifiable host.");
                if (ssh_auth_parse(url, &ssh) < 0)
                        return ledger_set_error(ret_error, -EINVAL, "Invalid ssh repository URL '%s'.", url);
                ssh.key = o->ssh_key;
                ssh.known_hosts = o->ssh_known_hosts;
                p.ssh = &ssh;
                cbs.certificate_check = ssh_certificate_cb;
                cbs.credentials = ssh_credentials_cb;
        }
        fo.callbacks = cbs;
        fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
        fo.update_fetchhead = 0;

        if (git_remote_create_anonymous(&remote, repo, url) < 0)
                return ledger_set_error(ret_error, -EINVAL, "Invalid repository URL '%s': %s", url, ledger_git_message());
        if (git_remote_connect(remote, GIT_DIRECTION_FETCH, &cbs, NULL, NULL) < 0) {
                if (ssh.reason[0])
                        return ledger_set_error(ret_error, ssh.reason_errno, "Cannot connect to '%s': %s", url, ssh.reason);
                return ledger_set_error(ret_error, -ECONNREFUSED, "Cannot connect to '%s': %s", url, ledger_git_message());
        }
        if (!base && git_remote_default_branch(&head, remote) < 0)
                return ledger_set_error(ret_error, -ENOENT, "'%s' has no default branch: %s", url, ledger_git_message());
        if (git_remote_download(remote, &refspecs, &fo) < 0) {
                if (p.size.too_big)
                        return ledger_set_error(ret_error, -EFBIG, "Repository '%s' is too big: it exceeds the limit of %" PRIu64 " bytes.",
                                                url, max);
                if (ssh.reason[0])
                        return ledger_set_error(ret_error, ssh.reason_errno, "Cannot fetch '%s': %s", url, ssh.reason);
                return ledger_set_error(ret_error, -EIO, "Cannot fetch '%s': %s", url, ledger_git_message());
        }
        if (git_remote_update_tips(remote, &cbs, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, NULL) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot record what was fetched from '%s': %s", url, ledger_git_message());
        (void) git_remote_disconnect(remote);

        r = -ENOENT;
        if (!base) {
                _cleanup_free_ char *name = NULL;
                if (!strneq(head.ptr, "refs/heads/", 11) || asprintf(&name, FETCH_PREFIX "heads/%s", head.ptr + 11) < 0)
                        return ledger_set_error(ret_error, -ENOENT, "'%s' has no usable default branch.", url);
                r = git_reference_name_to_id(&id, repo, name) < 0 ? -ENOENT : 0;
        } else if (oid_from_hex(base, &id) >= 0)
                r = 0;
        else {
                static const char *const patterns[] = { FETCH_PREFIX "heads/%s", FETCH_PREFIX "tags/%s" };
                for (size_t i = 0; i < ELEMENTSOF(patterns) && r < 0; i++) {
                        _cleanup_free_ char *name = NULL;
                        int valid = 0;

                        if (asprintf(&name, patterns[i], base) < 0)
                                return -ENOMEM;
                        if (git_reference_name_is_valid(&valid, name) < 0 || !valid)
                                continue;
                        r = git_reference_name_to_id(&id, repo, name) < 0 ? -ENOENT : 0;
                }
        }
        (void) delete_fetch_refs(repo);
        if (r >= 0)
                r = peel_commit(repo, &id, ret_base);
        if (r < 0)
                return ledger_set_error(ret_error, r, "'%s' does not name a commit in '%s'.", base ?: "HEAD", url);

        uint64_t checkout;
        r = check_checkout_size(repo, ret_base, max, url, &checkout, ret_error);
        if (r < 0)
                return r;
        /* While fetching, the checkout size was not known yet. */
        if (max != UINT64_MAX && checkout > max - MIN(max, p.received))
                return ledger_set_error(ret_error, -EFBIG, "Repository '%s' is too big: it exceeds the limit of %" PRIu64 " bytes.",
                                        url, max);
        *ret_used = checkout + p.received;
        return 0;
}

static bool source_is_url(const char *source) {
        return source && strstr(source, "://");
}

/* SECURITY: https and ssh only on the network (no plain http, no git://);
 * ssh only with the key and known hosts given in LedgerOptions, never the
 * daemon's own (no agent, no ~/.ssh); file:// is for tests and local mirrors. */
static bool url_allowed(const char *url) {
        return strneq(url, "https://", 8) || strneq(url, "ssh://", 6) || strneq(url, "file://", 7);
}

/* Makes a Ledger of repo (the caller's until success) with workspace_fd
 * (always taken) as its work tree; -EBADF: none yet (a submodule whose
 * directory the sandbox removed: ledger_submodule_attach() comes later). */
static int ledger_attach_fd(git_repository *repo, int workspace_fd, const char *branch, Ledger **ret) {
        _cleanup_close_ int fd = workspace_fd;
        _cleanup_(ledger_freep) Ledger *l = NULL;
        char path[64];

        l = calloc(1, sizeof(Ledger));
        if (!l)
                return -ENOMEM;
        l->workspace_fd = -EBADF;
        l->max_bytes = UINT64_MAX;

        l->branch = strdup(branch);
        if (!l->branch || branch_to_ref(branch, &l->ref) < 0)
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

        /* Caches that interpreters and test runners leave behind are not
         * the agent's work: untracked ones stay out of checkpoints, as if
         * every repository ignored them (tracked files are still recorded). */
        if (git_ignore_add_rule(repo, "__pycache__/\n*.py[co]\n.pytest_cache/\n.mypy_cache/\n.ruff_cache/\n") < 0)
                return -EIO;

        _cleanup_(git_config_freep) git_config *cfg = NULL;
        int64_t v;
        if (git_repository_config(&cfg, repo) >= 0 && git_config_get_int64(&v, cfg, "agentfab.maxbytes") >= 0 && v >= 0)
                l->max_bytes = (uint64_t) v;

        /* The repository is the caller's until here, also on failure. */
        l->repo = repo;
        *ret = TAKE_PTR(l);
        return 0;
}

static int ledger_attach(int task_dir_fd, git_repository *repo, const char *branch, Ledger **ret) {
        int fd = openat(task_dir_fd, "workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return ledger_attach_fd(repo, fd, branch, ret);
}

/* Opens path (relative, checked) below dir_fd as a directory. SECURITY: the
 * sandbox owns everything below the workspace; symlinks and ".." are
 * refused by the kernel on the whole way. */
static int open_beneath_dir(int dir_fd, const char *path) {
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
        _cleanup_close_ int fd = open_beneath_dir(parent->workspace_fd, s->path);
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

/* SECURITY: filters are off, so not even the built-in ones (ident, eol)
 * look at .gitattributes; libgit2 has no external filter or hook support at
 * all. Gitlinks become empty directories. */
static int checkout_base(Ledger *l, git_tree *tree, char **ret_error) {
        git_checkout_options co;
        (void) git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        co.checkout_strategy = GIT_CHECKOUT_FORCE;
        co.disable_filters = 1;
        co.dir_mode = 0755;
        if (git_checkout_tree(l->repo, (git_object *) tree, &co) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot check out the workspace: %s", ledger_git_message());
        return 0;
}

static int branch_create(git_repository *repo, const git_oid *base, const char *ref) {
        _cleanup_(git_reference_freep) git_reference *base_ref = NULL, *branch_ref = NULL;

        if (git_reference_create(&base_ref, repo, LEDGER_BASE_REF, base, 0, "agentfab: base") < 0 ||
            git_reference_create(&branch_ref, repo, ref, base, 0, "agentfab: create") < 0 ||
            git_repository_set_head(repo, ref) < 0)
                return -EIO;
        return 0;
}

static int submodule_git_path(Ledger *parent, const char *name, char **ret) {
        const char *p = git_repository_path(parent->repo);
        if (!p)
                return -EIO;
        return asprintf(ret, "%s%smodules/%s", p, p[strlen(p) - 1] == '/' ? "" : "/", name) < 0 ? -ENOMEM : 0;
}

/* What the fetch of submodules shares across all of them. */
typedef struct SubmoduleImport {
        const LedgerOptions *o;
        uint64_t max, used;     /* the bound for everything, and what the superproject and earlier submodules took */
        unsigned count;
        char **error;
} SubmoduleImport;

static int submodules_create(Ledger *l, SubmoduleImport *x, int src_git_fd, int src_common_fd, const char *url, unsigned depth);

/* Fetches one submodule into <parent ledger>/modules/<name> at exactly its
 * gitlink, checks it out into its directory and goes on with its own. */
static int submodule_create(Ledger *parent, LedgerSubmodule *s, SubmoduleImport *x, int src_git_fd, int src_common_fd,
                            unsigned depth) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_free_ char *git_path = NULL, *what = NULL, *rel = NULL;
        _cleanup_close_ int sub_git_fd = -EBADF, objects_fd = -EBADF;
        char hex[GIT_OID_HEXSZ + 1];
        uint64_t used = 0;
        git_oid id;
        int r;

        git_oid_tostr(hex, sizeof(hex), &s->commit);
        if (asprintf(&what, "submodule '%s' (path '%s')", s->name, s->path) < 0 || asprintf(&rel, "modules/%s", s->name) < 0)
                return -ENOMEM;
        r = submodule_git_path(parent, s->name, &git_path);
        if (r < 0)
                return r;

        /* Names may hold slashes (git uses the path as the name): MKPATH
         * makes the directories between, all our own. */
        git_repository_init_options io;
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT | GIT_REPOSITORY_INIT_MKPATH;
        io.mode = GIT_REPOSITORY_INIT_SHARED_UMASK;
        if (git_repository_init_ext(&repo, git_path, &io) < 0)
                return ledger_set_error(x->error, -EIO, "Cannot initialize the ledger of %s: %s", what, ledger_git_message());

        uint64_t left = x->max == UINT64_MAX ? UINT64_MAX : x->max - MIN(x->max, x->used);
        if (left == 0)
                r = -EFBIG;
        else if (!s->url) {
                /* Where git submodule update --init keeps it: modules/<name>
                 * of the git directory (of a linked worktree, or the common
                 * one). SECURITY: opened below the source's git directory,
                 * never through a symlink, never as a repository. */
                sub_git_fd = src_git_fd >= 0 ? open_beneath_dir(src_git_fd, rel) : -ENOENT;
                if (sub_git_fd == -ENOENT && src_common_fd >= 0 && src_common_fd != src_git_fd)
                        sub_git_fd = open_beneath_dir(src_common_fd, rel);
                if (sub_git_fd == -ENOENT)
                        return ledger_set_error(x->error, -ENOENT,
                                                "Submodule '%s' (path '%s') is not initialized in the repository: "
                                                "run git submodule update --init there first.", s->name, s->path);
                if (sub_git_fd < 0)
                        return ledger_set_error(x->error, sub_git_fd, "Cannot open the repository of %s: %s", what, strerror(-sub_git_fd));
                objects_fd = openat(sub_git_fd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (objects_fd < 0)
                        return ledger_set_error(x->error, -errno, "Cannot open the objects of %s: %m", what);

                git_repository_free(TAKE_PTR(repo));
                r = import_local(git_path, sub_git_fd, sub_git_fd, objects_fd, what, NULL, &s->commit, left, &id, &used, x->error);
                if (r >= 0 && git_repository_open_ext(&repo, git_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                        r = ledger_set_error(x->error, -EIO, "Cannot open the ledger of %s: %s", what, ledger_git_message());
        } else {
                r = import_url(repo, s->url, hex, x->o, left, &id, &used, x->error);
                if (r == -ENOENT)
                        r = ledger_set_error(x->error, r, "Commit %s of %s is missing from '%s'.", hex, what, s->url);
        }
        if (r == -EFBIG)
                return ledger_set_error(x->error, r,
                                        "Repository is too big: with %s, its history and checkout exceed the limit of %" PRIu64 " bytes.",
                                        what, x->max);
        if (r < 0)
                return r;
        x->used += used;

        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        if (git_commit_lookup(&commit, repo, &s->commit) < 0 || git_commit_tree(&tree, commit) < 0)
                return ledger_set_error(x->error, -EBADMSG, "The copied history of %s is incomplete: %s", what, ledger_git_message());
        if (branch_create(repo, &s->commit, parent->ref) < 0)
                return ledger_set_error(x->error, -EIO, "Cannot create the branch of %s: %s", what, ledger_git_message());

        int fd = open_beneath_dir(parent->workspace_fd, s->path);
        if (fd < 0)
                return ledger_set_error(x->error, fd, "Cannot open the directory of %s: %s", what, strerror(-fd));
        r = ledger_attach_fd(repo, fd, parent->branch, &s->ledger);
        if (r < 0)
                return ledger_set_error(x->error, r, "Cannot attach %s: %s", what, strerror(-r));
        repo = NULL;
        s->ledger->base = s->commit;
        s->ledger->max_bytes = parent->max_bytes;

        r = checkout_base(s->ledger, tree, x->error);
        if (r < 0)
                return r;
        return submodules_create(s->ledger, x, sub_git_fd, sub_git_fd, s->url, depth + 1);
}

static int base_tree(Ledger *l, git_tree **ret) {
        _cleanup_(git_commit_freep) git_commit *c = NULL;

        if (git_commit_lookup(&c, l->repo, &l->base) < 0 || git_commit_tree(ret, c) < 0)
                return -EBADMSG;
        return 0;
}

static int submodules_create(Ledger *l, SubmoduleImport *x, int src_git_fd, int src_common_fd, const char *url, unsigned depth) {
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        int r;

        r = base_tree(l, &tree);
        if (r < 0)
                return ledger_set_error(x->error, r, "Cannot read base: %s", ledger_git_message());
        r = ledger_submodules_read(l->repo, tree, url, &l->subs, &l->n_subs, x->error);
        if (r < 0)
                return r;
        if (l->n_subs > 0 && depth > LEDGER_SUBMODULE_DEPTH_MAX)
                return ledger_set_error(x->error, -ELOOP, "Submodules are nested more than %u deep: refused.", LEDGER_SUBMODULE_DEPTH_MAX);

        for (size_t i = 0; i < l->n_subs; i++) {
                if (++x->count > LEDGER_SUBMODULES_MAX)
                        return ledger_set_error(x->error, -E2BIG, "The repository has more than %u submodules: refused.",
                                                LEDGER_SUBMODULES_MAX);
                r = submodule_create(l, &l->subs[i], x, src_git_fd, src_common_fd, depth);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int create_internal(int task_dir_fd, const char *source, int source_fd, const char *base, const char *branch,
                           const LedgerOptions *o, uint64_t max, char **ret_error, Ledger **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_close_ int git_fd = -EBADF, common_fd = -EBADF, objects_fd = -EBADF;
        git_repository_init_options io;
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        _cleanup_free_ char *ref = NULL;
        bool url = source_is_url(source) && source_fd < 0;
        bool submodules = o && o->submodules;
        char ledger_path[64];
        uint64_t used = 0;
        git_oid base_id;
        int r;

        if (branch_to_ref(branch, &ref) < 0)
                return ledger_set_error(ret_error, -EINVAL, "Invalid branch name '%s'.", strempty(branch));

        if (mkdirat(task_dir_fd, "ledger.git", 0700) < 0 || mkdirat(task_dir_fd, "workspace", 0755) < 0)
                return ledger_set_error(ret_error, -errno, "Cannot make the ledger directories: %m");

        (void) snprintf(ledger_path, sizeof(ledger_path), "/proc/self/fd/%d/ledger.git", task_dir_fd);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT;
        io.mode = GIT_REPOSITORY_INIT_SHARED_UMASK;
        if (git_repository_init_ext(&repo, ledger_path, &io) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot initialize the ledger: %s", ledger_git_message());

        _cleanup_(git_config_freep) git_config *cfg = NULL;
        if (git_repository_config(&cfg, repo) < 0 ||
            (max != UINT64_MAX && git_config_set_int64(cfg, "agentfab.maxbytes", (int64_t) MIN(max, (uint64_t) INT64_MAX)) < 0) ||
            (submodules && git_config_set_bool(cfg, "agentfab.submodules", 1) < 0))
                return ledger_set_error(ret_error, -EIO, "Cannot configure the ledger: %s", ledger_git_message());

        if (url)
                r = import_url(repo, source, base, o, max, &base_id, &used, ret_error);
        else {
                /* Named as the submitter knows it, never as "/proc/self/fd/N". */
                const char *what = source ?: (o ? o->source_name : NULL) ?: "repository_fd";

                r = open_source(source, source_fd, &git_fd, &common_fd, &objects_fd);
                if (r < 0)
                        return ledger_set_error(ret_error, r, "'%s' is not a readable git repository: %s", what, strerror(-r));
                git_repository_free(TAKE_PTR(repo));
                r = import_local(ledger_path, git_fd, common_fd, objects_fd, what, base, NULL, max, &base_id, &used, ret_error);
                if (r >= 0 && git_repository_open_ext(&repo, ledger_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                        r = ledger_set_error(ret_error, -EIO, "Cannot open the ledger: %s", ledger_git_message());
        }
        if (r < 0)
                return r;

        /* Reopened without the source attached: this proves the copy is complete. */
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        if (git_commit_lookup(&commit, repo, &base_id) < 0 || git_commit_tree(&tree, commit) < 0)
                return ledger_set_error(ret_error, -EBADMSG, "The copied history is incomplete: %s", ledger_git_message());

        if (branch_create(repo, &base_id, ref) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot create branch '%s': %s", branch, ledger_git_message());

        _cleanup_(ledger_freep) Ledger *l = NULL;
        r = ledger_attach(task_dir_fd, repo, branch, &l);
        if (r < 0)
                return ledger_set_error(ret_error, r, "Cannot attach the workspace: %s", strerror(-r));
        repo = NULL;    /* Owned by l now. */
        l->base = base_id;
        l->max_bytes = max;

        r = checkout_base(l, tree, ret_error);
        if (r < 0)
                return r;

        if (submodules) {
                SubmoduleImport x = { .o = o, .max = max, .used = used, .error = ret_error };

                r = submodules_create(l, &x, git_fd, common_fd, url ? source : NULL, 1);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(l);
        return 0;
}

int ledger_create(int task_dir_fd, const char *source, int source_fd, const char *base, const char *branch,
                  const LedgerOptions *o, char **ret_error, Ledger **ret) {
        uint64_t max = o ? o->max_bytes : UINT64_MAX;
        int r;

        assert(task_dir_fd >= 0);
        assert(ret);

        ledger_library_init();

        if (!source && source_fd < 0)
                return ledger_set_error(ret_error, -EINVAL, "No source repository given.");
        if (source_fd < 0 && source_is_url(source) && !url_allowed(source))
                return ledger_set_error(ret_error, -EPROTONOSUPPORT, "Only https://, ssh:// and file:// URLs are supported, not '%s'.", source);
        if (max == 0)
                return ledger_set_error(ret_error, -EINVAL, "A size bound of 0 bytes admits nothing; UINT64_MAX means none.");
        if (faccessat(task_dir_fd, "ledger.git", F_OK, AT_SYMLINK_NOFOLLOW) >= 0 ||
            faccessat(task_dir_fd, "workspace", F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                return ledger_set_error(ret_error, -EEXIST, "The task directory already has a ledger.");

        r = create_internal(task_dir_fd, source, source_fd, base, branch, o, max, ret_error, ret);
        if (r < 0) {
                /* Nothing half-made stays behind. */
                (void) rm_rf_at(task_dir_fd, "ledger.git");
                (void) rm_rf_at(task_dir_fd, "workspace");
        }
        return r;
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

        r = base_tree(l, &tree);
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

                r = submodule_git_path(l, s->name, &git_path);
                if (r < 0)
                        return r;
                if (asprintf(&dir, "%s/", git_path) < 0)
                        return -ENOMEM;
                remove_stale_locks(dir, l->ref);
                if (git_repository_open_ext(&repo, git_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                        return log_debug_errno(-EBADMSG, "Cannot open the ledger of submodule '%s': %s", s->name, ledger_git_message());

                /* Its directory may be gone (the task removed it): attached again when it is back. */
                int fd = l->workspace_fd >= 0 ? open_beneath_dir(l->workspace_fd, s->path) : -EBADF;
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
        if (branch_to_ref(branch, &ref) < 0)
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

/* ---- checkpoints ---- */

static LedgerSubmodule *submodule_by_path(Ledger *l, const char *path) {
        for (size_t i = 0; i < l->n_subs; i++)
                if (streq(l->subs[i].path, path))
                        return &l->subs[i];
        return NULL;
}

static int append(char **s, size_t *n, const char *fmt, ...) _printf_(3, 4);
static int append(char **s, size_t *n, const char *fmt, ...) {
        _cleanup_free_ char *piece = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&piece, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        char *t = realloc(*s, *n + (size_t) k + 1);
        if (!t)
                return -ENOMEM;
        memcpy(t + *n, piece, (size_t) k + 1);
        *s = t;
        *n += (size_t) k;
        return 0;
}

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
        while (n > 0 && strchr(" \t\n", t[n - 1]))
                t[--n] = '\0';
        return t;
}

int ledger_build_message(const Checkpoint *c, char **ret) {
        _cleanup_free_ char *msg = NULL, *subject = NULL, *body = NULL, *task = NULL, *model = NULL,
                *test_command = NULL, *user = NULL, *reference = NULL;
        const char *tests = c->tests ?: "not-run";
        size_t n = 0;
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

        r = append(&msg, &n, "%s\n\n", subject);
        if (r >= 0 && !isempty(body))
                r = append(&msg, &n, "%s\n\n", body);
        if (r >= 0)
                r = append(&msg, &n, "Agentfab-Task: %s\n", task);
        /* Step 0 is no step of the model's: a record of evidence (ledger_record()). */
        if (r >= 0 && c->step > 0)
                r = append(&msg, &n, "Agentfab-Step: %u\n", c->step);
        if (r >= 0)
                r = append(&msg, &n, "Agentfab-Model: %s\n", model);
        if (r >= 0 && !isempty(reference))
                r = append(&msg, &n, "Agentfab-Ref: %s\n", reference);
        if (r >= 0 && c->requirement > 0)
                r = append(&msg, &n, "Agentfab-Requirement: v%u\n", c->requirement);
        size_t k = 0;
        for (char **i = c->commands; r >= 0 && i && *i && k < LEDGER_COMMANDS_MAX; i++, k++) {
                _cleanup_free_ char *cmd = ledger_one_line(*i, LEDGER_TRAILER_VALUE_MAX);
                r = cmd ? append(&msg, &n, "Agentfab-Command: %s\n", cmd) : -ENOMEM;
        }
        if (r >= 0) {
                if (streq(tests, "not-run"))
                        r = append(&msg, &n, "Agentfab-Tests: not-run\n");
                else if (c->have_test_count)
                        r = append(&msg, &n, "Agentfab-Tests: %s (%s, exit %i, %u test%s)\n", tests, test_command,
                                   c->test_exit, c->test_count, c->test_count == 1 ? "" : "s");
                else
                        r = append(&msg, &n, "Agentfab-Tests: %s (%s, exit %i)\n", tests, test_command, c->test_exit);
        }
        if (r >= 0 && c->environment) {
                _cleanup_free_ char *environment = ledger_one_line(c->environment, LEDGER_TRAILER_VALUE_MAX);
                r = environment ? append(&msg, &n, "Agentfab-Environment: %s\n", environment) : -ENOMEM;
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
                r = append(&msg, &n, "%s\n", line);
        }
        if (r >= 0)
                r = append(&msg, &n, "Agentfab-Submitter: %s (uid %u)\n", user, (unsigned) c->uid);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(msg);
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
                return ledger_set_error(ret_error, -EINVAL, "Checkpoint without a task id.");
        if (c->tests && !streq(c->tests, "pass") && !streq(c->tests, "fail") && !streq(c->tests, "not-run"))
                return ledger_set_error(ret_error, -EINVAL, "Invalid test result '%s'.", c->tests);

        r = ledger_tip(l, &tip);
        if (r < 0)
                return ledger_set_error(ret_error, r, "Branch '%s' is gone.", l->branch);
        if (git_commit_lookup(&parent, l->repo, &tip) < 0)
                return ledger_set_error(ret_error, -EBADMSG, "Cannot read the tip of '%s': %s", l->branch, ledger_git_message());

        /* Submodules first, each in its own ledger with the same message:
         * the superproject's commit then moves their gitlinks. */
        if (l->n_subs > 0) {
                _cleanup_(git_index_freep) git_index *index = NULL;

                if (git_repository_index(&index, l->repo) < 0 || git_index_read(index, 0) < 0)
                        return ledger_set_error(ret_error, -EIO, "Cannot read the index: %s", ledger_git_message());
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
                                return ledger_set_error(ret_error, r, "In submodule '%s': %s", sub->path,
                                                        sub_error ?: strerror(-r));
                        r = ledger_tip(sub->ledger, &sub->staged);
                        if (r < 0)
                                return ledger_set_error(ret_error, r, "Branch of submodule '%s' is gone.", sub->path);
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
                return ledger_set_error(ret_error, r, "Cannot build the commit message: %s", strerror(-r));
        r = ledger_make_signature(&sig);
        if (r < 0)
                return ledger_set_error(ret_error, r, "Cannot make a signature: %s", ledger_git_message());
        if (git_tree_lookup(&tree, l->repo, &tree_id) < 0)
                return ledger_set_error(ret_error, -EIO, "Cannot read the new tree: %s", ledger_git_message());

        const git_commit *parents[] = { parent };
        uint64_t t0 = TRACE_BEGIN();
        /* Passing the ref makes libgit2 check that its tip is still parent. */
        if (git_commit_create(&id, l->repo, l->ref, sig, sig, NULL, msg, tree, 1, parents) < 0)
                return ledger_set_error(ret_error, -ESTALE, "Cannot commit on '%s': %s", l->branch, ledger_git_message());
        TRACE_END("commit", t0);

        git_oid_tostr(ret_commit, GIT_OID_HEXSZ + 1, &id);
        return 1;
}

/* Removes every symlink below dir_fd that target does not have as a symlink
 * at the same place, without following any. */
static int remove_foreign_symlinks(Ledger *l, int dir_fd, git_tree *target, git_index *index, const char *prefix, unsigned depth) {
        if (depth > SCAN_DEPTH_MAX)
                return -ELOOP;

        DIR *d = xopendirat(dir_fd, ".", 0);
        if (!d)
                return -errno;

        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                _cleanup_free_ char *path = NULL;
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (asprintf(&path, "%s%s", prefix, de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                /* SECURITY: nothing named .git is ever tracked, and libgit2's
                 * checkout follows one (a "gitdir:" file, a FIFO even) when it
                 * looks at what it takes for a submodule: it goes first. */
                if (strcasecmp(de->d_name, ".git") == 0) {
                        r = S_ISDIR(st.st_mode) ? rm_rf_at(dirfd(d), de->d_name) :
                            unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT ? -errno : 0;
                        continue;
                }
                if (S_ISLNK(st.st_mode)) {
                        git_tree_entry *e = NULL;
                        bool keep = git_tree_entry_bypath(&e, target, path) == 0 &&
                                    git_tree_entry_filemode(e) == GIT_FILEMODE_LINK;
                        git_tree_entry_free(e);
                        if (keep)
                                continue;
                        if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                                r = -errno;
                        /* Gone from the baseline too: libgit2 trips over a
                         * baseline link that is missing from the work tree. */
                        (void) git_index_remove(index, path, 0);
                        continue;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                /* A fetched submodule's links are its own reset's business. */
                if (submodule_by_path(l, path))
                        continue;
                _cleanup_free_ char *dir = NULL;
                if (asprintf(&dir, "%s/", path) < 0) {
                        r = -ENOMEM;
                        break;
                }
                _cleanup_close_ int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (sub >= 0)
                        r = remove_foreign_symlinks(l, sub, target, index, dir, depth + 1);
        }
        closedir(d);
        return r;
}

/* Opens path below dir_fd as a directory, making what is missing of it;
 * never through a symlink. */
static int open_or_make_dir(int dir_fd, const char *path) {
        int fd = open_beneath_dir(dir_fd, path);
        if (fd != -ENOENT)
                return fd;

        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int cur = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -errno;
        for (char *c = p, *next; c; c = next) {
                next = strchr(c, '/');
                if (next)
                        *next++ = '\0';
                if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST)
                        return -errno;
                int n = openat(cur, c, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (n < 0)
                        return -errno;
                safe_close(cur);
                cur = n;
        }
        return TAKE_FD(cur);
}

typedef struct GitlinkReset {
        Ledger *ledger;
        int error;
} GitlinkReset;

/* Empties the directory of a gitlink that was not fetched: what the task
 * left there is untracked, and goes like any untracked file. */
static int clear_unfetched_cb(const char *root, const git_tree_entry *e, void *userdata) {
        GitlinkReset *g = userdata;
        _cleanup_free_ char *path = NULL;

        if (git_tree_entry_filemode(e) != GIT_FILEMODE_COMMIT)
                return 0;
        if (asprintf(&path, "%s%s", root, git_tree_entry_name(e)) < 0) {
                g->error = -ENOMEM;
                return -1;
        }
        if (submodule_by_path(g->ledger, path))
                return 0;
        _cleanup_close_ int fd = open_beneath_dir(g->ledger->workspace_fd, path);
        if (fd < 0)
                return 0;
        DIR *d = xopendirat(fd, ".", 0);
        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir(d));)
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && rm_rf_at(fd, de->d_name) < 0 && g->error == 0)
                        g->error = -EIO;
        closedir(d);
        return 0;
}

/* After the superproject's checkout: every fetched submodule back at the
 * gitlink of the target, the directories of the others empty. */
static int reset_gitlinks(Ledger *l, git_tree *tree) {
        GitlinkReset g = { .ledger = l };
        int r;

        if (git_tree_walk(tree, GIT_TREEWALK_PRE, clear_unfetched_cb, &g) < 0 && g.error == 0)
                g.error = -EIO;
        if (g.error < 0)
                return log_debug_errno(g.error, "Cannot empty the directories of submodules that were not fetched: %m");

        for (size_t i = 0; i < l->n_subs; i++) {
                LedgerSubmodule *s = &l->subs[i];
                git_tree_entry *e = NULL;
                char hex[GIT_OID_HEXSZ + 1];

                if (git_tree_entry_bypath(&e, tree, s->path) < 0)
                        continue;       /* Not in the target: nothing to restore. */
                bool gitlink = git_tree_entry_filemode(e) == GIT_FILEMODE_COMMIT;
                git_oid_tostr(hex, sizeof(hex), git_tree_entry_id(e));
                git_tree_entry_free(e);
                if (!gitlink)
                        continue;

                int fd = open_or_make_dir(l->workspace_fd, s->path);
                if (fd < 0)
                        return log_debug_errno(fd, "Cannot make the directory of submodule '%s': %m", s->path);
                safe_close(fd);
                r = ledger_submodule_attach(l, s);
                if (r >= 0)
                        r = ledger_reset(s->ledger, hex);
                if (r < 0)
                        return log_debug_errno(r, "Cannot reset submodule '%s' to %s: %m", s->path, hex);
        }
        return 0;
}

int ledger_reset(Ledger *l, const char *commit) {
        _cleanup_(git_commit_freep) git_commit *c = NULL, *tip_commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL, *tip_tree = NULL;
        _cleanup_(git_index_freep) git_index *index = NULL;
        _cleanup_(git_reference_freep) git_reference *ref = NULL;
        git_oid id, tip;
        int r;

        assert(l);

        if (oid_from_hex(commit, &id) < 0)
                return -EINVAL;
        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;

        /* Only the branch's own history since base: never anything the
         * sandbox could not have produced. */
        /* Whatever was staged is void now; the next stage scans. */
        ledger_stage_forget(l);

        if (!git_oid_equal(&id, &l->base) && !git_oid_equal(&id, &tip) &&
            !(git_graph_descendant_of(l->repo, &tip, &id) == 1 && git_graph_descendant_of(l->repo, &id, &l->base) == 1))
                return -ENXIO;

        if (git_commit_lookup(&c, l->repo, &id) < 0 || git_commit_tree(&tree, c) < 0 ||
            git_commit_lookup(&tip_commit, l->repo, &tip) < 0 || git_commit_tree(&tip_tree, tip_commit) < 0)
                return -EBADMSG;

        /* Start from the index of the tip, so that whatever a failed
         * checkpoint staged counts as untracked and goes too. */
        if (git_repository_index(&index, l->repo) < 0 || git_index_read_tree(index, tip_tree) < 0 || git_index_write(index) < 0)
                return log_debug_errno(-EIO, "Cannot reset the index: %s", ledger_git_message());

        /* SECURITY: libgit2's checkout writes through a symlink that stands
         * where the target has a directory (it wrote deep/er/f.txt into the
         * link's target in our test). So every symlink the target does not
         * have goes first: they would go anyway, and a symlink the target
         * has cannot stand where the target has a directory. The sandbox
         * must not run during a reset: it could plant a new link meanwhile. */
        r = remove_foreign_symlinks(l, l->workspace_fd, tree, index, "", 0);
        if (r < 0)
                return log_debug_errno(r, "Cannot clear symlinks from the workspace: %m");
        if (git_index_write(index) < 0)
                return log_debug_errno(-EIO, "Cannot write the index: %s", ledger_git_message());

        git_checkout_options co;
        (void) git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        co.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_REMOVE_UNTRACKED | GIT_CHECKOUT_REMOVE_IGNORED;
        co.disable_filters = 1;
        co.dir_mode = 0755;
        co.baseline_index = index;
        if (git_checkout_tree(l->repo, (git_object *) tree, &co) < 0)
                return log_debug_errno(-EIO, "Checkout failed: %s", ledger_git_message());

        if (git_index_read_tree(index, tree) < 0 || git_index_write(index) < 0)
                return log_debug_errno(-EIO, "Cannot write the index: %s", ledger_git_message());

        r = reset_gitlinks(l, tree);
        if (r < 0)
                return r;

        if (!git_oid_equal(&id, &tip) &&
            git_reference_create_matching(&ref, l->repo, l->ref, &id, 1, &tip, "agentfab: reset") < 0)
                return -ESTALE;
        return 0;
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
