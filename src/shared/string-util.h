/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* Replaces *p with a copy of s (or NULL). */
int free_and_strdup(char **p, const char *s);

/* True if s contains only printable characters, plus '\n' and '\t' if allow_newline. */
bool string_is_safe(const char *s, bool allow_newline);

/* Shortens s for a one-line human message: first line only, at most n bytes, "…" when cut. */
char *strshorten_line(const char *s, size_t n);

/* Where the text of s begins: past blank lines and a heading line such as
 * "Plan:" (a short line ending in ':'). */
const char *skip_heading(const char *s);

/* Replaces each C1 control as UTF-8 encodes it (C2 80-9F: CSI, OSC...
 * to a terminal that takes them) by two spaces, in place. */
void utf8_blank_c1(char *s);

/* A copy of s for a terminal: every control character but newline and tab
 * (C0, DEL, and C1 as UTF-8 encodes it: U+0080-U+009F) written as a C
 * escape ("\x1b", "\u009b"), so that text from a repository or a model
 * moves no cursor, clears no screen and sets no title. NULL: out of
 * memory. */
char *text_escape_controls(const char *s);

int safe_atou64(const char *s, uint64_t *ret);

/* Replaces every byte of s[0..n) that is not part of valid UTF-8 (and NUL)
 * with '?', so that the text can go into JSON as it is. */
void utf8_sanitize(char *s, size_t n);

/* Parses "30", "30s", "5min", "2h", "infinity" to microseconds. */
int parse_sec(const char *s, uint64_t *ret_usec);

/* Parses "yes/no/true/false/1/0/on/off". */
int parse_boolean(const char *s);

char *strv_join(char **l, const char *sep);
size_t strv_length(char **l);
int strv_extend(char ***l, const char *s);

/* Sets "NAME=VALUE" in an environment list: replaces NAME's entry or appends. */
int strv_env_set(char ***l, const char *assignment);

/* Parses "512", "64K", "2M", "1G" (powers of 1024) to bytes. */
int parse_size(const char *s, uint64_t *ret);

/* usec since the epoch as local "YYYY-MM-DD HH:MM:SS ZONE", or "n/a" for 0. */
void format_timestamp(uint64_t usec, char *buf, size_t n);

/* Copies the l bytes of a line at s into buf (NUL-terminated, cut to size)
 * without ANSI CSI escape sequences and carriage returns: a runner's
 * coloured output, as text. */
void strip_ansi_line(const char *s, size_t l, char *buf, size_t size);

/* For functions that explain a failure in a char **ret_error: sets
 * *ret_error (when ret_error is not NULL) to the formatted message, freeing
 * what it held after formatting (an argument may be the old message), or to
 * NULL when memory is out. Returns r, so that `return error_set(...)`. */
int error_set(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
