/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "macro.h"
#include "tools.h"

/* What the parts of the tools share (tools.c): the handover of a growable
 * text (buf.h), the messages a tool answers with, and bounded reads of a
 * file. */

/* Hands the text over, never NULL on success (an empty string at least). */
int buf_steal(Buf *b, char **ret);

/* The formatted text, made valid UTF-8, into *ret_output; returns error. */
int tool_message(char **ret_output, int error, const char *fmt, ...) _printf_(3, 4);
/* "read_file: no such file 'x'" */
int tool_path_error(ToolKind k, const char *path, int error, char **ret_output);
/* s on one line, at most 200 bytes, for a message. */
char *quote_short(const char *s);

/* At most max bytes of fd; *ret_truncated when there was more. */
int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size, bool *ret_truncated);
/* A NUL in it: not text. */
bool looks_binary(const char *s, size_t n);
/* Lines in s, a last one without "\n" included. */
unsigned count_lines(const char *s, size_t n);

/* The entry dir_fd/name that a write would replace: refuses a symlink,
 * a directory, anything but a regular file (and, with must_exist, nothing)
 * with a message for the model; else the mode to keep in *ret_mode (0644
 * for a new file) and 1 if it exists, 0 if not. */
int check_write_target(int dir_fd, const char *name, ToolKind k, const char *path, bool must_exist, mode_t *ret_mode,
                       char **ret_output);
/* Replaces dir_fd/name atomically, with a message for the model on failure. */
int write_replace(int dir_fd, const char *name, ToolKind k, const char *path, const char *data, size_t size,
                  mode_t mode, char **ret_output);

/* The names in d but ".", ".." and .git, at most max (then *too_many),
 * sorted by compare; *ret is the caller's, with its *ret_n strings, also on
 * failure. */
int dir_read_names(DIR *d, size_t max, int (*compare)(const void *, const void *), char ***ret, size_t *ret_n,
                   bool *too_many);

/* tools-walk.c, for tools-tree.c: a directory of generated or downloaded
 * files, shown but not walked; a symlink's target, shortened for display. */
bool dir_is_bulky(const char *name);
int readlink_shown(int dir_fd, const char *name, char **ret);
