/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conversation-file.h"
#include "fs-util.h"
#include "json-util.h"
#include "string-util.h"
#include "task-save.h"

int conversation_parse(const char *text, size_t size, unsigned want, json_object *messages, size_t *ret_good) {
        unsigned n = 0;
        size_t good = 0;

        for (const char *p = text, *nl; n < want && p < text + size; p = nl + 1) {
                _cleanup_json_ json_object *j = NULL;

                nl = memchr(p, '\n', (size_t) (text + size - p));
                if (!nl)
                        break;   /* a torn last line is not acknowledged */
                if (json_parse_strict(p, (size_t) (nl - p), &j) < 0 || !json_object_is_type(j, json_type_object))
                        return -EBADMSG;
                if (json_object_array_add(messages, TAKE_PTR(j)) < 0)
                        return -ENOMEM;
                n++;
                good = (size_t) (nl + 1 - text);
        }
        if (n < want)
                return -EBADMSG;
        *ret_good = good;
        return 0;
}

json_object *conversation_message_new(const char *role, const char *content) {
        _cleanup_json_ json_object *m = json_object_new_object();
        if (!m || json_add_string(m, "role", role) < 0 ||
            json_object_object_add(m, "content", json_object_new_string(strempty(content))) < 0)
                return NULL;
        return TAKE_PTR(m);
}

json_object *conversation_tool_message_new(const char *call_id, const char *name, const char *content) {
        _cleanup_json_ json_object *m = conversation_message_new("tool", content);
        if (!m || json_add_string(m, "tool_call_id", call_id) < 0 || json_add_string(m, "name", name) < 0)
                return NULL;
        return TAKE_PTR(m);
}

/* Where the acknowledged messages of t end in its conversation file (fd):
 * the state file's word for it, checked against the file's size and its
 * last byte; or, from a state file that does not say, counted by reading
 * the whole file. */
static int conversation_acknowledged_end(Task *t, int dir_fd, int fd, uint64_t *ret) {
        const TaskProgress *p = &t->progress;
        _cleanup_free_ char *conv = NULL;
        struct stat st;
        size_t size = 0, good = 0;
        unsigned lines = 0;
        char last;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if (p->messages == 0) {
                *ret = 0;
                return 0;
        }
        if (p->conversation_size > 0) {
                if ((uint64_t) st.st_size < p->conversation_size ||
                    pread(fd, &last, 1, (off_t) p->conversation_size - 1) != 1 || last != '\n')
                        return -EBADMSG;
                *ret = p->conversation_size;
                return 0;
        }

        r = read_file_at(dir_fd, TASK_CONVERSATION_FILE, CONVERSATION_MAX, &conv, &size);
        if (r < 0)
                return r;
        for (size_t i = 0; i < size && lines < p->messages; i++)
                if (conv[i] == '\n') {
                        lines++;
                        good = i + 1;
                }
        if (lines != p->messages)
                return -EBADMSG;
        *ret = good;
        return 0;
}

/* Adds a user message to a task's conversation file (no run holds it):
 * what the state file does not acknowledge is cut first. Costs the same
 * however long the conversation is (but once for a task whose state file
 * is older than conversation_size). */
int conversation_append_user(Task *t, const char *text) {
        _cleanup_json_ json_object *m = conversation_message_new("user", text);
        _cleanup_free_ char *line = NULL;
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        TaskProgress *p = &t->progress;
        uint64_t end = 0;
        bool created;
        size_t n;
        int r;

        if (!m || asprintf(&line, "%s\n", json_to_line(m)) < 0)
                return -ENOMEM;
        n = strlen(line);
        /* A step's lines being appended in a thread (task-save.h) land
         * first, and are counted, before anything is cut or added. */
        task_save_wait(t);
        dir_fd = openat(t->tasks_fd, t->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return -errno;
        fd = openat_created(dir_fd, TASK_CONVERSATION_FILE, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600,
                            &created);
        if (fd < 0)
                return fd;

        /* Cut what the state file does not acknowledge, then append. */
        r = conversation_acknowledged_end(t, dir_fd, fd, &end);
        if (r < 0)
                return r;
        if (ftruncate(fd, (off_t) end) < 0)
                return -errno;
        r = append_whole(fd, line, n);
        if (r < 0)
                return r;
        /* On the disk before the state file that the caller writes next
         * counts it (the cut too: fdatasync() writes the new size). */
        if (fdatasync(fd) < 0)
                return -errno;
        if (created) {
                r = fsync_directory(dir_fd);
                if (r < 0)
                        return r;
        }
        p->messages++;
        p->conversation_size = end + n;
        return 0;
}
