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

/* A local source repository, read by hand beneath its directory: its refs
 * (loose and packed, symbolic ones bounded) and a check of its objects,
 * before libgit2 is let at it. */

/* Bounds on the source's refs we read by hand. */
#define REF_FILE_MAX (64U * 1024U)
#define PACKED_REFS_MAX (64U * 1024U * 1024U)
#define SYMREF_DEPTH_MAX 5

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
                return ledger_oid_from_hex(line, ret) < 0 ? -EBADMSG : 0;
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
        return ledger_oid_from_hex(data, ret) < 0 ? -EBADMSG : 0;
}

int source_resolve(git_repository *repo, int git_fd, int common_fd, const char *base, git_oid *ret) {
        static const char *const patterns[] = { "%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s" };
        git_oid id;
        int r;

        if (ledger_oid_from_hex(base, &id) >= 0) {
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
bool source_head_unborn(int git_fd) {
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
int source_check_objects(int objects_fd, char **ret_error) {
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
                        r = error_set(ret_error, -ELOOP, "The object directory contains a symlink 'objects/%s'.", de->d_name);
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
                                r = error_set(ret_error, -ELOOP, "The object directory contains a symlink 'objects/%s/%s'.",
                                                     de->d_name, e->d_name);
                                break;
                        }
                }
                closedir(sub);
        }
        closedir(d);
        return r;
}

int source_open(const char *source, int source_fd, int *ret_git_fd, int *ret_common_fd, int *ret_objects_fd) {
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
