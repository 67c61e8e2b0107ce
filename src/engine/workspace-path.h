/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Paths the model names are untrusted. Every one of them is resolved below
 * the workspace directory fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), so that neither "..", nor an
 * absolute symlink, nor a /proc magic link, nor a mount point leads out.
 *
 * Errors (negative errno) and what they mean here:
 *   -EINVAL        empty path
 *   -ENAMETOOLONG  longer than PATH_MAX, or a component longer than NAME_MAX
 *   -EXDEV         absolute, contains "..", or resolution would leave the
 *                  workspace (a symlink pointing out, a mount point)
 *   -EPERM         inside .git/ at the top (the factory owns the repository);
 *                  for writes also when a symlink leads there
 *   -ELOOP         the final component is a symlink and we write, or a loop
 *   anything else  from the file system (-ENOENT, -ENOTDIR, -EISDIR, ...) */

/* Checks a path syntactically, before the file system is touched. */
int workspace_path_check(const char *path);

/* Returns the path with "." components, repeated and trailing slashes removed;
 * "." for the workspace top. The path must pass workspace_path_check(). */
int workspace_path_normalize(const char *path, char **ret);

/* Opens path below ws_fd. O_CLOEXEC is always added. When flags ask for
 * writing (O_WRONLY, O_RDWR, O_CREAT or O_TRUNC) the final component is
 * opened with O_NOFOLLOW, so that a symlink is never written through, and
 * with O_CREAT missing parent directories are created (mode 0755), each one
 * with mkdirat() on a parent that was itself opened beneath the workspace. */
int workspace_open(int ws_fd, const char *path, int flags, mode_t mode, int *ret_fd);

/* Opens the directory that contains path (creating it and its parents when
 * create is true) and returns the final component's name, for callers that
 * work with *at() calls on the entry itself (atomic replace, lstat). Paths
 * naming the workspace top itself give -EISDIR. */
int workspace_open_parent(int ws_fd, const char *path, bool create, int *ret_dir_fd, char **ret_name);

/* Returns 1 if dir_fd is the workspace's top .git directory or below it
 * (reached through a symlink, say), 0 if not. */
int workspace_dir_in_git(int ws_fd, int dir_fd);

/* Turns an error of the functions above into one sentence for the model, such
 * as "path '../x' escapes the workspace" or "no such file 'x'". Returns error
 * (so that callers can "return workspace_path_error(...)"), or -ENOMEM. */
int workspace_path_error(const char *path, int error, char **ret_message);
