/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "workspace-path.h"

/* SECURITY: the resolve flags for every open of a model-supplied path. */
#define WORKSPACE_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int openat2_beneath(int dir_fd, const char *path, int flags, mode_t mode) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC),
                /* openat2() refuses a mode without O_CREAT/O_TMPFILE. */
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = WORKSPACE_RESOLVE,
        };

        /* RESOLVE_BENEATH may answer -EAGAIN when a rename raced with the
         * lookup; retrying a few times is what the man page suggests. */
        for (unsigned attempt = 0;; attempt++) {
                long fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
                if (fd >= 0)
                        return (int) fd;
                if (errno == EINTR || (errno == EAGAIN && attempt < 8))
                        continue;
                return -errno;
        }
}

/* Returns the next component of *p that names something, skipping "" and ".". */
static int path_next_component(const char **p, const char **ret_start, size_t *ret_len) {
        const char *s = *p;

        for (;;) {
                s += strspn(s, "/");
                if (*s == '\0') {
                        *p = s;
                        return 0;
                }
                size_t l = strcspn(s, "/");
                if (l == 1 && s[0] == '.') {
                        s += l;
                        continue;
                }
                *ret_start = s;
                *ret_len = l;
                *p = s + l;
                return 1;
        }
}

int workspace_path_check(const char *path) {
        const char *p, *c;
        size_t l;
        bool first = true;

        if (isempty(path))
                return -EINVAL;
        if (strlen(path) >= PATH_MAX)
                return -ENAMETOOLONG;
        /* SECURITY: absolute paths and ".." are refused outright, even when
         * ".." would stay inside: the model gets a clear answer instead of a
         * path that works or not depending on symlinks. */
        if (path[0] == '/')
                return -EXDEV;

        p = path;
        while (path_next_component(&p, &c, &l) > 0) {
                if (l == 2 && strneq(c, "..", 2))
                        return -EXDEV;
                if (l > NAME_MAX)
                        return -ENAMETOOLONG;
                /* SECURITY: the repository metadata belongs to the factory
                 * (hooks, config with filter drivers). Compared without case,
                 * for case-insensitive file systems. */
                if (first && l == 4 && strncasecmp(c, ".git", 4) == 0)
                        return -EPERM;
                first = false;
        }

        return 0;
}

int workspace_path_normalize(const char *path, char **ret) {
        const char *p, *c;
        size_t l, n = 0;
        int r;

        r = workspace_path_check(path);
        if (r < 0)
                return r;

        _cleanup_free_ char *s = malloc(strlen(path) + 2);
        if (!s)
                return -ENOMEM;

        p = path;
        while (path_next_component(&p, &c, &l) > 0) {
                if (n > 0)
                        s[n++] = '/';
                memcpy(s + n, c, l);
                n += l;
        }
        if (n == 0)
                s[n++] = '.';
        s[n] = '\0';

        *ret = TAKE_PTR(s);
        return 0;
}

static bool flags_write(int flags) {
        return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC));
}

int workspace_dir_in_git(int ws_fd, int dir_fd) {
        struct stat ws, git, st;
        _cleanup_close_ int up_fd = -EBADF;
        int cur = dir_fd;

        if (fstat(ws_fd, &ws) < 0)
                return -errno;
        if (fstatat(ws_fd, ".git", &git, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        /* A ".git" file (worktrees, submodules) points elsewhere, outside. */
        if (!S_ISDIR(git.st_mode))
                return 0;
        if (fstat(dir_fd, &st) < 0)
                return -errno;

        /* Walk up until the workspace top: any ancestor that is .git counts.
         * st is what cur is: the fstat() of a level is that of the next
         * one's start (one open, one fstat and one close a level; write_file
         * walks this for each path, the fuzzer's paths are deep). */
        for (unsigned i = 0; i < PATH_MAX / 2; i++) {
                struct stat up_st;

                if (st.st_dev == git.st_dev && st.st_ino == git.st_ino)
                        return 1;
                if (st.st_dev == ws.st_dev && st.st_ino == ws.st_ino)
                        return 0;

                int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (up < 0)
                        return -errno;
                if (fstat(up, &up_st) < 0 || (up_st.st_dev == st.st_dev && up_st.st_ino == st.st_ino)) {
                        /* The root: not below the workspace at all. */
                        safe_close(up);
                        return 0;
                }
                safe_close(up_fd);
                cur = up_fd = up;
                st = up_st;
        }
        return 0;
}

int workspace_open_parent(int ws_fd, const char *path, bool create, int *ret_dir_fd, char **ret_name) {
        _cleanup_free_ char *norm = NULL, *name = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        char *slash;
        int r;

        r = workspace_path_normalize(path, &norm);
        if (r < 0)
                return r;
        if (streq(norm, "."))
                return -EISDIR;

        slash = strrchr(norm, '/');
        name = strdup(slash ? slash + 1 : norm);
        if (!name)
                return -ENOMEM;

        if (!slash) {
                dir_fd = openat2_beneath(ws_fd, ".", O_RDONLY | O_DIRECTORY, 0);
                if (dir_fd < 0)
                        return dir_fd;
        } else {
                *slash = '\0';
                dir_fd = openat2_beneath(ws_fd, norm, O_RDONLY | O_DIRECTORY, 0);
                if (dir_fd == -ENOENT && create) {
                        /* Create the missing parents one by one. Each prefix
                         * is looked up beneath the workspace again, so that a
                         * symlink planted in between cannot lead out; mkdirat()
                         * itself never follows a symlink at its final name. */
                        _cleanup_close_ int cur = openat2_beneath(ws_fd, ".", O_RDONLY | O_DIRECTORY, 0);
                        bool made = false;
                        if (cur < 0)
                                return cur;

                        for (char *c = norm;;) {
                                char *e = strchr(c, '/');
                                if (e)
                                        *e = '\0';

                                /* Below a directory made here, nothing is there yet. */
                                int fd = made ? -ENOENT : openat2_beneath(ws_fd, norm, O_RDONLY | O_DIRECTORY, 0);
                                if (fd == -ENOENT) {
                                        /* SECURITY: nothing is created in .git either. Once
                                         * one directory is made outside it, the ones below
                                         * are too: checked once, not by a walk up from each
                                         * level (quadratic in the depth of the path). */
                                        if (!made) {
                                                r = workspace_dir_in_git(ws_fd, cur);
                                                if (r < 0)
                                                        return r;
                                                if (r > 0)
                                                        return -EPERM;
                                        }
                                        if (mkdirat(cur, c, 0755) < 0 && errno != EEXIST)
                                                return -errno;
                                        /* A child of cur, and no symlink planted since. */
                                        fd = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                        if (fd < 0)
                                                return -errno;
                                        made = true;
                                }
                                if (fd < 0)
                                        return fd;
                                safe_close(cur);
                                cur = fd;

                                if (!e)
                                        break;
                                *e = '/';
                                c = e + 1;
                        }
                        dir_fd = TAKE_FD(cur);
                }
                if (dir_fd < 0)
                        return dir_fd;
        }

        /* SECURITY: a symlink planted by a command ("g -> .git") must not
         * open the way into .git for writes either. */
        r = workspace_dir_in_git(ws_fd, dir_fd);
        if (r < 0)
                return r;
        if (r > 0)
                return -EPERM;

        *ret_dir_fd = TAKE_FD(dir_fd);
        *ret_name = TAKE_PTR(name);
        return 0;
}

int workspace_open(int ws_fd, const char *path, int flags, mode_t mode, int *ret_fd) {
        int fd, r;

        r = workspace_path_check(path);
        if (r < 0)
                return r;

        if (!flags_write(flags))
                fd = openat2_beneath(ws_fd, path, flags, mode);
        else {
                _cleanup_free_ char *name = NULL;
                _cleanup_close_ int dir_fd = -EBADF;

                r = workspace_open_parent(ws_fd, path, flags & O_CREAT, &dir_fd, &name);
                if (r < 0)
                        return r;

                /* SECURITY: never write through a symlink, even one that
                 * stays inside: O_NOFOLLOW answers -ELOOP. */
                fd = openat2_beneath(dir_fd, name, flags | O_NOFOLLOW, mode);
        }
        if (fd < 0)
                return fd;

        *ret_fd = fd;
        return 0;
}

int workspace_path_error(const char *path, int error, char **ret_message) {
        _cleanup_free_ char *shown = NULL;
        char *m = NULL;
        int k;

        assert(error < 0);

        /* Quote at most a line of what the model sent. */
        shown = strshorten_line(strempty(path), 200);
        if (!shown)
                return -ENOMEM;

        switch (error) {
        case -EINVAL:
                k = isempty(path) ? asprintf(&m, "the path is empty; give a path relative to the workspace top")
                                  : asprintf(&m, "path '%s' is not valid", shown);
                break;
        case -ENAMETOOLONG:
                k = asprintf(&m, "path '%s' is too long", shown);
                break;
        case -EXDEV:
                if (path && path[0] == '/')
                        k = asprintf(&m, "path '%s' is absolute and escapes the workspace; "
                                     "give a path relative to the workspace top", shown);
                else if (workspace_path_check(path) == -EXDEV)
                        k = asprintf(&m, "path '%s' contains '..' and escapes the workspace; "
                                     "give a path relative to the workspace top without '..'", shown);
                else
                        k = asprintf(&m, "path '%s' escapes the workspace (through a symlink or mount point "
                                     "that leads outside)", shown);
                break;
        case -EPERM:
                if (workspace_path_check(path) == -EPERM)
                        k = asprintf(&m, "path '%s' is inside .git/, which the tools may not touch", shown);
                else
                        k = asprintf(&m, "path '%s' is not permitted: it leads into .git/ (which the tools may "
                                     "not touch), or the file system refuses it", shown);
                break;
        case -EACCES:
                k = asprintf(&m, "permission denied on '%s'", shown);
                break;
        case -ELOOP:
                k = asprintf(&m, "path '%s' is a symlink (or a symlink loop); "
                             "the tools do not write through symlinks", shown);
                break;
        case -ENOENT:
                k = asprintf(&m, "no such file '%s'", shown);
                break;
        case -ENOTDIR:
                k = asprintf(&m, "a component of '%s' is not a directory", shown);
                break;
        case -EISDIR:
                k = asprintf(&m, "'%s' is a directory", shown);
                break;
        case -EFBIG:
                k = asprintf(&m, "file '%s' is too big", shown);
                break;
        case -ENOSPC:
        case -EDQUOT:
                k = asprintf(&m, "no space left to write '%s'", shown);
                break;
        default:
                k = asprintf(&m, "cannot access '%s': %s", shown, strerror(-error));
        }
        if (k < 0)
                return -ENOMEM;

        *ret_message = m;
        return error;
}
