/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

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
