/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec-client.h"
#include "exec-service.h"
#include "fs-util.h"
#include "json-util.h"
#include "macro.h"


int head_tail_init(HeadTail *h, size_t keep) {
        *h = (HeadTail) { .keep = keep };
        h->head = malloc(keep / 2 + 1);
        h->tail = malloc(keep - keep / 2 + 1);
        if (!h->head || !h->tail) {
                head_tail_done(h);
                return -ENOMEM;
        }
        return 0;
}

void head_tail_done(HeadTail *h) {
        free(h->head);
        free(h->tail);
        *h = (HeadTail) {};
}

void head_tail_add(HeadTail *h, const char *data, size_t n) {
        size_t head_cap = h->keep / 2, tail_cap = h->keep - head_cap;

        h->total += n;
        size_t k = MIN(n, head_cap - h->head_len);
        memcpy(h->head + h->head_len, data, k);
        h->head_len += k;
        data += k;
        n -= k;

        if (tail_cap == 0)
                return;
        if (n > tail_cap) {
                data += n - tail_cap;
                n = tail_cap;
        }
        for (size_t i = 0; i < n; i++) {
                h->tail[h->tail_pos] = data[i];
                h->tail_pos = (h->tail_pos + 1) % tail_cap;
                if (h->tail_len < tail_cap)
                        h->tail_len++;
        }
}

char *head_tail_render(const HeadTail *h) {
        size_t tail_cap = h->keep - h->keep / 2;
        uint64_t cut = h->total - h->head_len - h->tail_len;
        char marker[96] = "";
        char *r;

        if (cut > 0)
                snprintf(marker, sizeof(marker), "\n[... %llu bytes of output cut ...]\n", (unsigned long long) cut);
        r = malloc(h->head_len + strlen(marker) + h->tail_len + 1);
        if (!r)
                return NULL;
        char *p = mempcpy(r, h->head, h->head_len);
        p = stpcpy(p, marker);
        size_t start = h->tail_len < tail_cap ? 0 : h->tail_pos;
        for (size_t i = 0; i < h->tail_len; i++)
                *p++ = h->tail[(start + i) % (tail_cap ? tail_cap : 1)];
        *p = '\0';
        return r;
}

char *exec_output_escape(const char *data, size_t n) {
        const unsigned char *d = (const unsigned char *) data;
        char *r = malloc(n * 4 + 1), *p = r;

        if (!r)
                return NULL;
        for (size_t i = 0; i < n;) {
                unsigned char b = d[i];
                size_t k = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
                bool ok = k > 0 && i + k <= n && (k != 2 || b >= 0xC2) && (k != 1 || b == '\n' || b == '\t' || (b >= ' ' && b != 127));
                for (size_t j = 1; ok && j < k; j++)
                        ok = (d[i + j] & 0xC0) == 0x80;
                if (!ok) {
                        p += sprintf(p, "\\x%02x", b);
                        i++;
                        continue;
                }
                p = mempcpy(p, d + i, k);
                i += k;
        }
        *p = '\0';
        return r;
}

void exec_result_done(ExecResult *r) {
        free(r->output);
        *r = (ExecResult) {};
}

int exec_client_memory_cgroup(pid_t pid, char **ret) {
        _cleanup_free_ char *text = NULL;
        char path[64];
        int r;

        snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        r = read_file_at(AT_FDCWD, path, 64 * 1024, &text, NULL);
        if (r < 0)
                return r;

        for (char *l = text, *next; l && *l; l = next) {
                next = strchr(l, '\n');
                if (next)
                        *next++ = '\0';
                char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = '\0';
                const char *controllers = c1 + 1, *cg = c2 + 1;
                char *dir = NULL;
                /* The v1 memory controller, as on this project's hosts. A cgroup
                 * v2 host has no such line: then there are no figures (ENOENT). */
                if (strstr(controllers, "memory") && asprintf(&dir, "/sys/fs/cgroup/memory%s", cg) >= 0) {
                        *ret = dir;
                        return 0;
                }
        }
        return -ENOENT;
}

static uint64_t read_number(const char *dir, const char *file, const char *key) {
        _cleanup_free_ char *text = NULL;
        char path[4096];

        if (!dir)
                return UINT64_MAX;
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        if (read_file_at(AT_FDCWD, path, 64 * 1024, &text, NULL) < 0)
                return UINT64_MAX;
        const char *p = text;
        if (key) {
                p = strstr(text, key);
                if (!p)
                        return UINT64_MAX;
                p += strlen(key);
        }
        return strtoull(p, NULL, 10);
}

int exec_request_format(const ExecRequest *req, int64_t id, char **ret_line) {
        _cleanup_json_ json_object *j = json_object_new_object(), *argv = json_object_new_array(), *env = json_object_new_object();

        if (!j || !argv || !env)
                return -ENOMEM;
        json_object_object_add(j, "type", json_object_new_string("exec"));
        json_object_object_add(j, "id", json_object_new_int64(id));
        for (char **a = req->argv; a && *a; a++)
                json_object_array_add(argv, json_object_new_string(*a));
        json_object_object_add(j, "argv", json_object_get(argv));
        for (char **e = req->env; e && *e; e++) {
                _cleanup_free_ char *name = strndup(*e, strcspn(*e, "="));
                const char *eq = strchr(*e, '=');
                if (!name || !eq)
                        return -EINVAL;
                json_object_object_add(env, name, json_object_new_string(eq + 1));
        }
        json_object_object_add(j, "env", json_object_get(env));
        if (req->cwd)
                json_object_object_add(j, "cwd", json_object_new_string(req->cwd));
        if (req->timeout_usec != UINT64_MAX)
                json_object_object_add(j, "timeout_ms", json_object_new_int64((int64_t) MAX(req->timeout_usec / 1000, 1u)));
        if (req->output_fd)
                json_object_object_add(j, "output_fd", json_object_new_boolean(true));

        if (asprintf(ret_line, "%s\n", json_to_line(j)) < 0)
                return -ENOMEM;
        return 0;
}

int exec_collector_begin(ExecCollector *c, int64_t id, int log_fd, size_t keep_bytes, const char *memory_cgroup,
                         exec_output_handler_t on_output, void *userdata) {
        *c = (ExecCollector) {
                .id = id,
                .log_fd = log_fd,
                .result = { .status = -1, .peak_memory = UINT64_MAX, .last_pid = UINT64_MAX },
                .memory_cgroup = memory_cgroup,
                .on_output = on_output,
                .userdata = userdata,
        };
        if (head_tail_init(&c->ht, keep_bytes) < 0)
                return -ENOMEM;

        /* Per-command figures of the scope: reset the peak (v1, best effort),
         * remember the OOM kill count. */
        if (memory_cgroup) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/memory.max_usage_in_bytes", memory_cgroup);
                _cleanup_close_ int f = open(path, O_WRONLY | O_CLOEXEC);
                if (f >= 0)
                        (void) !write(f, "0", 1);
        }
        c->oom_before = read_number(memory_cgroup, "memory.oom_control", "oom_kill ");
        return 0;
}

int exec_collector_feed(ExecCollector *c, char *line, size_t n) {
        _cleanup_json_ json_object *m = NULL;
        const char *type = NULL;
        uint64_t got_id;

        if (json_parse_strict(line, n, &m) < 0 || !json_object_is_type(m, json_type_object) ||
            json_get_string(m, "type", &type) < 0 || json_get_uint64(m, "id", &got_id) < 0)
                return -EBADMSG;
        if (streq(type, "error"))
                return -EINVAL;
        if ((int64_t) got_id != c->id)
                return 0; /* not ours: ignore */

        if (streq(type, "output")) {
                json_object *d;
                const char *stream = NULL;
                if (!json_object_object_get_ex(m, "data", &d) || !json_object_is_type(d, json_type_string))
                        return -EBADMSG;
                size_t k = (size_t) json_object_get_string_len(d);
                const char *data = json_object_get_string(d);
                head_tail_add(&c->ht, data, k);
                c->result.output_bytes += k;
                if (c->log_fd >= 0 && write(c->log_fd, data, k) < 0)
                        c->log_fd = -EBADF; /* a full log disk must not stop the command's accounting */
                if (c->on_output) {
                        /* Only the two names the service uses reach the handler. */
                        (void) json_get_string(m, "stream", &stream);
                        c->on_output(streq_ptr(stream, "stderr") ? "stderr" : "stdout", data, k, c->userdata);
                }
        } else if (streq(type, "exit")) {
                json_object *v;
                uint64_t d;
                if (json_object_object_get_ex(m, "status", &v) && json_object_is_type(v, json_type_int))
                        c->result.status = json_object_get_int(v);
                if (json_object_object_get_ex(m, "signal", &v) && json_object_is_type(v, json_type_int))
                        c->result.signal = json_object_get_int(v);
                if (json_object_object_get_ex(m, "timed_out", &v) && json_object_is_type(v, json_type_boolean))
                        c->result.timed_out = json_object_get_boolean(v);
                if (json_get_uint64(m, "duration_usec", &d) >= 0)
                        c->result.duration_usec = d;
                /* pid_max is at most 2^22. */
                if (json_get_uint64(m, "last_pid", &d) >= 0 && d <= (1U << 22))
                        c->result.last_pid = d;
                return 1;
        }
        /* "started" and anything unknown: nothing to do */
        return 0;
}

int exec_collector_end(ExecCollector *c, ExecResult *ret) {
        c->result.peak_memory = read_number(c->memory_cgroup, "memory.max_usage_in_bytes", NULL);
        uint64_t oom_after = read_number(c->memory_cgroup, "memory.oom_control", "oom_kill ");
        c->result.limit_killed = c->oom_before != UINT64_MAX && oom_after != UINT64_MAX && oom_after > c->oom_before;
        free(c->result.output);
        c->result.output = head_tail_render(&c->ht);
        *ret = c->result;
        c->result = (ExecResult) {};
        head_tail_done(&c->ht);
        return ret->output ? 0 : -ENOMEM;
}

void exec_collector_done(ExecCollector *c) {
        head_tail_done(&c->ht);
        exec_result_done(&c->result);
}

static int send_request(int fd, const ExecRequest *req, int64_t id) {
        _cleanup_free_ char *line = NULL;
        int r;

        r = exec_request_format(req, id, &line);
        if (r < 0)
                return r;
        for (size_t n = strlen(line), done = 0; done < n;) {
                ssize_t k = write(fd, line + done, n - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) k;
        }
        return 0;
}

/* Reads replies until the command's "exit" (0), a refusal (-EINVAL),
 * or a broken or lying sandbox (-EBADMSG, -ECONNRESET). */
static int read_replies(int fd, ExecCollector *c) {
        _cleanup_free_ char *buf = malloc(EXEC_REPLY_LINE_MAX + 1);
        size_t len = 0;
        int r;

        if (!buf)
                return -ENOMEM;

        for (;;) {
                char *nl = memchr(buf, '\n', len);
                if (!nl) {
                        if (len >= EXEC_REPLY_LINE_MAX)
                                return -EBADMSG; /* the sandbox sends nonsense: stop listening to it */
                        ssize_t k = read(fd, buf + len, EXEC_REPLY_LINE_MAX - len);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0)
                                return k < 0 ? -errno : -ECONNRESET;
                        len += (size_t) k;
                        continue;
                }

                *nl = '\0';
                r = exec_collector_feed(c, buf, (size_t) (nl - buf));
                if (r != 0)
                        return r < 0 ? r : 0;
                size_t used = (size_t) (nl + 1 - buf);
                len -= used;
                memmove(buf, buf + used, len);
        }
}

int exec_client_run(int fd, const ExecRequest *req, int log_fd, size_t keep_bytes, const char *memory_cgroup,
                    ExecResult *ret) {
        static int64_t next_id = 1;
        ExecCollector c;
        int r, k;

        r = exec_collector_begin(&c, next_id++, log_fd, keep_bytes, memory_cgroup, NULL, NULL);
        if (r < 0) {
                exec_collector_done(&c);
                return r;
        }
        r = send_request(fd, req, c.id);
        if (r >= 0)
                r = read_replies(fd, &c);
        k = exec_collector_end(&c, ret);
        exec_collector_done(&c);
        return r < 0 ? r : k;
}
