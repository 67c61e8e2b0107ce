/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Writes data to dir_fd/name atomically and durably: a temporary file in the
 * same directory, fsync, rename over name, fsync of the directory. After a
 * crash either the old or the new content is there, never a mix. */
int write_file_atomic(int dir_fd, const char *name, const void *data, size_t size, mode_t mode);

/* Reads a whole regular file below dir_fd, refusing more than max bytes
 * (-EFBIG) and anything that is not a regular file or is a symlink. The
 * result is NUL-terminated. */
int read_file_at(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_size);

/* Appends one line durably enough for a log: O_APPEND write of the whole buffer. */
/* Appends all of data to fd (opened O_APPEND), or nothing: a failed write is cut off. */
int append_whole(int fd, const void *data, size_t size);
int append_file_at(int dir_fd, const char *name, const void *data, size_t size, mode_t mode);
/* openat() that says whether it made the file: flags without O_CREAT,
 * which is added (with O_EXCL) only when the file is not there. */
int openat_created(int dir_fd, const char *name, int flags, mode_t mode, bool *ret_created);
/* append_file_at() that returns once the data is on the disk: fdatasync()
 * of the file, and fsync() of dir_fd when this call made the file. For a
 * record that another file acknowledges (a task's conversation, before its
 * state file says how much of it counts). */
int append_file_at_sync(int dir_fd, const char *name, const void *data, size_t size, mode_t mode);

/* Removes a directory tree below dir_fd without following symlinks. */
int rm_rf_at(int dir_fd, const char *name);

int fsync_directory(int dir_fd);

/* opendir() of dir_fd/name on a new open file description, so that reading
 * it never moves the position of another stream on the same directory. */
DIR *xopendirat(int dir_fd, const char *name, int flags);

/* A workspace's files are ours on disk (idmapped to a task's uid in its
 * sandbox), and a command may take its owner's permissions away (chmod
 * 000), so that a checkpoint could not read the tree or a reset not change
 * it. These give them back where they are missing: read and write for a
 * regular file, read, write and search for a directory; nothing else of the
 * mode changes (git keeps only the executable bit). dir_fd/name is not
 * followed; the _fd form takes the directory or file itself (O_PATH too).
 * 1: given back; 0: nothing to do (it has them, is not ours, or is neither
 * file nor directory); < 0: the error. */
int owner_access_restore(int dir_fd, const char *name);
int owner_access_restore_fd(int fd);
