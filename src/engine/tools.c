/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "macro.h"
#include "string-table.h"
#include "string-util.h"
#include "tools-internal.h"
#include "tools.h"
#include "workspace-path.h"

/* Bounds of the file tools that callers do not choose. */
#define READ_FILE_MAX_BYTES (8U * 1024U * 1024U)

static const char *const tool_kind_table[_TOOL_KIND_MAX] = {
        [TOOL_RUN_COMMAND] = "run_command",
        [TOOL_READ_FILE] = "read_file",
        [TOOL_WRITE_FILE] = "write_file",
        [TOOL_EDIT_FILE] = "edit_file",
        [TOOL_LIST_FILES] = "list_files",
        [TOOL_SEARCH] = "search",
        [TOOL_RUN_TESTS] = "run_tests",
        [TOOL_FINISH] = "finish",
        [TOOL_KEEP_FILE] = "keep_file",
        [TOOL_APPLY_PATCH] = "apply_patch",
};

DEFINE_STRING_TABLE_LOOKUP(tool_kind, ToolKind);

/* ---- Text for the model ---- */

/* Hands the text over, never NULL on success (an empty string at least). */
int buf_steal(Buf *b, char **ret) {
        if (!b->s) {
                int r = buf_append(b, "", 0);
                if (r < 0)
                        return r;
        }
        /* Whatever a file held, the model gets UTF-8 without NUL. */
        utf8_sanitize(b->s, b->n);
        *ret = TAKE_PTR(b->s);
        b->n = b->allocated = 0;
        return 0;
}

_printf_(3, 4)
int tool_message(char **ret_output, int error, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        utf8_sanitize(m, (size_t) k);
        *ret_output = m;
        return error;
}

/* "read_file: no such file 'x'" */
int tool_path_error(ToolKind k, const char *path, int error, char **ret_output) {
        _cleanup_free_ char *m = NULL;
        int r;

        r = workspace_path_error(path, error, &m);
        if (r == -ENOMEM && error != -ENOMEM)
                return r;
        return tool_message(ret_output, error, "%s: %s", tool_kind_to_string(k), m);
}

char *quote_short(const char *s) {
        return strshorten_line(strempty(s), 200);
}

/* ---- Output bounds ---- */

static size_t utf8_back(const char *s, size_t i) {
        while (i > 0 && ((unsigned char) s[i] & 0xC0) == 0x80)
                i--;
        return i;
}

static size_t utf8_forward(const char *s, size_t i, size_t n) {
        while (i < n && ((unsigned char) s[i] & 0xC0) == 0x80)
                i++;
        return i;
}

int tool_output_bound(char **text, size_t max) {
        char *s = *text, note[64];
        size_t n = strlen(s), budget, h, t0;
        const char *nl;

        if (n <= max)
                return 0;

        if (max < 128) {
                s[utf8_back(s, max)] = '\0';
                return 0;
        }

        /* 48 bytes hold the note with the widest number and two newlines. */
        budget = max - 48;
        h = utf8_back(s, budget / 2);
        nl = memrchr(s, '\n', h);
        if (nl && (size_t) (nl - s + 1) >= h - h / 4)
                h = (size_t) (nl - s) + 1;

        t0 = utf8_forward(s, n - (budget - budget / 2), n);
        nl = memchr(s + t0, '\n', n - t0);
        if (nl && (size_t) (nl - (s + t0)) <= (budget - budget / 2) / 4)
                t0 = (size_t) (nl - s) + 1;

        snprintf(note, sizeof(note), "[... %zu bytes cut ...]", t0 - h);

        Buf b = {};
        if (buf_append(&b, s, h) < 0 ||
            buf_printf(&b, "%s%s\n", h > 0 && s[h - 1] != '\n' ? "\n" : "", note) < 0 ||
            buf_append(&b, s + t0, n - t0) < 0) {
                buf_done(&b);
                return -ENOMEM;
        }

        free(*text);
        *text = b.s;
        return 0;
}

/* Reads at most max bytes of fd; *ret_truncated tells whether there was more. */
int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size, bool *ret_truncated) {
        Buf b = {};
        char chunk[65536];
        bool truncated = false;

        for (;;) {
                size_t want = MIN(sizeof(chunk), max - b.n + 1);
                ssize_t k = read(fd, chunk, want);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        buf_done(&b);
                        return -errno;
                }
                if (k == 0)
                        break;
                if (b.n + (size_t) k > max) {
                        k = (ssize_t) (max - b.n);
                        truncated = true;
                }
                if (buf_append(&b, chunk, (size_t) k) < 0) {
                        buf_done(&b);
                        return -ENOMEM;
                }
                if (truncated)
                        break;
        }
        if (!b.s && buf_append(&b, "", 0) < 0)
                return -ENOMEM;

        *ret = b.s;
        *ret_size = b.n;
        if (ret_truncated)
                *ret_truncated = truncated;
        return 0;
}

bool looks_binary(const char *s, size_t n) {
        return memchr(s, '\0', n) != NULL;
}

unsigned count_lines(const char *s, size_t n) {
        unsigned lines = 0;

        for (const char *p = s; (p = memchr(p, '\n', n - (size_t) (p - s))); p++)
                lines++;
        if (n > 0 && s[n - 1] != '\n')
                lines++;
        return lines;
}

/* ---- read_file ---- */

int tool_read_file(int ws_fd, const ToolCallArgs *a, size_t max_output, char **ret_output) {
        _cleanup_free_ char *data = NULL, *shown = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool truncated;
        struct stat st;
        size_t size;
        int r;

        assert(a);
        assert(ret_output);

        r = workspace_open(ws_fd, a->path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd);
        if (r < 0)
                return tool_path_error(TOOL_READ_FILE, a->path, r, ret_output);
        if (fstat(fd, &st) < 0)
                return tool_path_error(TOOL_READ_FILE, a->path, -errno, ret_output);

        shown = quote_short(a->path);
        if (!shown)
                return -ENOMEM;

        if (S_ISDIR(st.st_mode))
                return tool_message(ret_output, -EISDIR, "read_file: '%s' is a directory; use list_files to see "
                                  "what it contains", shown);
        if (!S_ISREG(st.st_mode))
                return tool_message(ret_output, -EBADFD, "read_file: '%s' is not a regular file", shown);

        r = read_fd_bounded(fd, READ_FILE_MAX_BYTES, &data, &size, &truncated);
        if (r < 0)
                return tool_path_error(TOOL_READ_FILE, a->path, r, ret_output);

        if (looks_binary(data, size))
                return tool_message(ret_output, -EMEDIUMTYPE, "read_file: '%s' is a binary file (it contains NUL "
                                  "bytes, %jd bytes in all); it is not shown", shown, (intmax_t) st.st_size);

        unsigned total = count_lines(data, size);
        if (total == 0)
                return tool_message(ret_output, 0, "'%s' is empty", shown);

        unsigned first = a->start_line > 0 ? a->start_line : 1;
        unsigned last = a->end_line > 0 ? MIN(a->end_line, total) : total;
        if (first > total)
                return tool_message(ret_output, -ERANGE, "read_file: start_line %u is past the end of '%s', "
                                  "which has %u lines%s", first, shown, total,
                                  truncated ? " in the part that is read" : "");

        /* Room kept at the end for the note. */
        size_t reserve = 160, budget = max_output > reserve * 2 ? max_output - reserve : max_output / 2;
        _cleanup_(buf_done) Buf b = {};
        const char *p = data, *end = data + size;
        unsigned line = 1, shown_last = 0;

        for (; line < first; line++)
                p = memchr(p, '\n', (size_t) (end - p)) + 1;

        for (; line <= last; line++) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
                char prefix[24];
                int pl = snprintf(prefix, sizeof(prefix), "%4u| ", line);

                if (b.n + (size_t) pl + l + 1 > budget) {
                        if (shown_last == 0) {
                                /* One line longer than all the room: show its start. */
                                size_t room = budget > b.n + (size_t) pl ? budget - b.n - (size_t) pl : 0;
                                room = utf8_back(p, MIN(room, l));
                                if (buf_append(&b, prefix, (size_t) pl) < 0 || buf_append(&b, p, room) < 0 ||
                                    buf_printf(&b, "\n[... line %u is %zu bytes long; the rest of it is cut ...]\n",
                                               line, l) < 0)
                                        return -ENOMEM;
                                shown_last = line;
                                line++;
                        }
                        break;
                }

                if (buf_append(&b, prefix, (size_t) pl) < 0 || buf_append(&b, p, l) < 0 || buf_append(&b, "\n", 1) < 0)
                        return -ENOMEM;
                shown_last = line;
                p = nl ? nl + 1 : end;
        }

        if (shown_last < last) {
                if (buf_printf(&b, "[... output cut: lines %u-%u of %u shown; call read_file with start_line=%u to "
                               "read on ...]\n", first, shown_last, total, shown_last + 1) < 0)
                        return -ENOMEM;
        } else if (first > 1 || last < total) {
                if (buf_printf(&b, "[lines %u-%u of %u]\n", first, last, total) < 0)
                        return -ENOMEM;
        }
        if (truncated &&
            buf_printf(&b, "[the file is %jd bytes; only the first %u MiB were read]\n",
                       (intmax_t) st.st_size, READ_FILE_MAX_BYTES / (1024U * 1024U)) < 0)
                return -ENOMEM;

        return buf_steal(&b, ret_output);
}

/* ---- write_file (edit_file and apply_patch: tools-edit.c) ---- */

/* Looks at the entry a write would replace: refuses what must not be
 * replaced and returns the mode to keep (0644 for a new file). */
int check_write_target(int dir_fd, const char *name, ToolKind k, const char *path, bool must_exist, mode_t *ret_mode,
                       char **ret_output) {
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT || must_exist)
                        return tool_path_error(k, path, -errno, ret_output);
                *ret_mode = 0644;
                return 0;
        }

        _cleanup_free_ char *shown = quote_short(path);
        if (!shown)
                return -ENOMEM;

        /* SECURITY: the rename would replace a symlink rather than write
         * through it, which is safe, but surprising: refuse it clearly. */
        if (S_ISLNK(st.st_mode))
                return tool_message(ret_output, -ELOOP, "%s: '%s' is a symlink; the tools do not write through "
                                  "symlinks (write to the file it points to, if that is in the workspace)",
                                  tool_kind_to_string(k), shown);
        if (S_ISDIR(st.st_mode))
                return tool_message(ret_output, -EISDIR, "%s: '%s' is a directory", tool_kind_to_string(k), shown);
        if (!S_ISREG(st.st_mode))
                return tool_message(ret_output, -EBADFD, "%s: '%s' is not a regular file", tool_kind_to_string(k), shown);

        /* Keep the permission bits (an executable script stays one), but
         * never set-id bits. */
        *ret_mode = st.st_mode & 0777;
        return 1;
}

int write_replace(int dir_fd, const char *name, ToolKind k, const char *path, const char *data, size_t size,
                  mode_t mode, char **ret_output) {
        int r;

        /* write_file_atomic() needs room for its temporary name. */
        if (strlen(name) > 200)
                return tool_path_error(k, path, -ENAMETOOLONG, ret_output);

        r = write_file_atomic(dir_fd, name, data, size, mode);
        if (r < 0)
                return tool_path_error(k, path, r, ret_output);
        return 0;
}

int tool_write_file(int ws_fd, const ToolCallArgs *a, size_t max_file, char **ret_output) {
        _cleanup_free_ char *name = NULL, *shown = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        size_t size;
        mode_t mode;
        int r, existed;

        assert(a);
        assert(ret_output);

        shown = quote_short(a->path);
        if (!shown)
                return -ENOMEM;

        size = strlen(strempty(a->content));
        if (size > max_file)
                return tool_message(ret_output, -EFBIG, "write_file: the content for '%s' is %zu bytes, more than "
                                  "the limit of %zu", shown, size, max_file);

        r = workspace_open_parent(ws_fd, a->path, true, &dir_fd, &name);
        if (r < 0)
                return tool_path_error(TOOL_WRITE_FILE, a->path, r, ret_output);

        existed = check_write_target(dir_fd, name, TOOL_WRITE_FILE, a->path, false, &mode, ret_output);
        if (existed < 0)
                return existed;

        r = write_replace(dir_fd, name, TOOL_WRITE_FILE, a->path, strempty(a->content), size, mode, ret_output);
        if (r < 0)
                return r;

        return tool_message(ret_output, 0, "wrote '%s' (%zu bytes, %u lines, %s)", shown, size,
                          count_lines(strempty(a->content), size), existed ? "replaced" : "new file");
}
