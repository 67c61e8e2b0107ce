/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs-util.h"
#include "macro.h"
#include "sandbox-usage.h"
#include "string-util.h"
#include "task-resources.h"

#define CGROUP_FILE_MAX (64U * 1024U)

/* The part of a cgroup path up to and with the task's scope, or NULL when
 * the path does not pass through it (the controller is not enabled for the
 * scope). */
static char *scope_path(const char *path, size_t len, const char *scope) {
        size_t n = strlen(scope);

        for (size_t i = 0; i + n <= len; i++) {
                if (memcmp(path + i, scope, n) != 0)
                        continue;
                if (i + n < len && path[i + n] != '/')
                        continue;
                char *s = strndup(path, i + n);
                /* Only what a path of the hierarchy may hold. */
                if (s && (strstr(s, "/../") || !string_is_safe(s, false)))
                        return mfree_ptr(s);
                return s;
        }
        return NULL;
}

static int read_cgroup_file(const char *root, const char *hierarchy, const char *path, const char *name, char **ret) {
        _cleanup_free_ char *p = NULL;

        if (asprintf(&p, "%s%s%s%s/%s", root, hierarchy ? "/" : "", strempty(hierarchy), path, name) < 0)
                return -ENOMEM;
        return read_file_at(AT_FDCWD, p, CGROUP_FILE_MAX, ret, NULL);
}

/* "key value" on a line of its own. */
static int keyed_value(const char *text, const char *key, uint64_t *ret) {
        size_t n = strlen(key);

        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                if (strncmp(l, key, n) != 0 || l[n] != ' ')
                        continue;
                _cleanup_free_ char *v = strndup(l + n + 1, strcspn(l + n + 1, "\n"));
                if (!v)
                        return -ENOMEM;
                return safe_atou64(v, ret) < 0 ? -EBADMSG : 0;
        }
        return -ENOENT;
}

static int single_value(const char *text, uint64_t *ret) {
        _cleanup_free_ char *v = strndup(text, strcspn(text, "\n"));

        if (!v)
                return -ENOMEM;
        return safe_atou64(v, ret) < 0 ? -EBADMSG : 0;
}

/* io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N ..." per device, summed. */
static int io_stat_sum(const char *text, uint64_t *ret_read, uint64_t *ret_write) {
        uint64_t rd = 0, wr = 0;

        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                size_t len = strcspn(l, "\n");
                for (const char *f = l; f < l + len; f += strcspn(f, " \n"), f += strspn(f, " ")) {
                        uint64_t *sum = strncmp(f, "rbytes=", 7) == 0 ? &rd : strncmp(f, "wbytes=", 7) == 0 ? &wr : NULL;
                        if (!sum)
                                continue;
                        _cleanup_free_ char *v = strndup(f + 7, strcspn(f + 7, " \n"));
                        uint64_t u;
                        if (!v)
                                return -ENOMEM;
                        if (safe_atou64(v, &u) < 0)
                                return -EBADMSG;
                        task_resource_add(sum, u);
                }
        }
        *ret_read = rd;
        *ret_write = wr;
        return 0;
}

/* blkio.throttle.io_service_bytes_recursive: "MAJ:MIN Read N" lines, and
 * their "Total" lines, which are left out. */
static int blkio_sum(const char *text, uint64_t *ret_read, uint64_t *ret_write) {
        uint64_t rd = 0, wr = 0;

        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                char dev[64], op[16];
                unsigned long long u;
                if (sscanf(l, "%63s %15s %llu", dev, op, &u) != 3 || !strchr(dev, ':'))
                        continue;
                if (streq(op, "Read"))
                        task_resource_add(&rd, u);
                else if (streq(op, "Write"))
                        task_resource_add(&wr, u);
        }
        *ret_read = rd;
        *ret_write = wr;
        return 0;
}

/* Whether a comma-separated controller list names c. */
static bool controllers_have(const char *list, size_t len, const char *c) {
        size_t n = strlen(c);

        for (const char *p = list; p < list + len;) {
                size_t k = strcspn(p, ",:");
                if (k == n && memcmp(p, c, n) == 0)
                        return true;
                p += k + 1;
        }
        return false;
}

int sandbox_usage_read(const char *root, pid_t pid, const char *proc_cgroup, const char *task_id, SandboxUsage *ret) {
        _cleanup_free_ char *text = NULL, *scope = NULL, *unified = NULL;
        SandboxUsage u = {
                .cpu_usec = TASK_RESOURCE_UNKNOWN,
                .memory_peak = TASK_RESOURCE_UNKNOWN,
                .io_read_bytes = TASK_RESOURCE_UNKNOWN,
                .io_write_bytes = TASK_RESOURCE_UNKNOWN,
                .processes = TASK_RESOURCE_UNKNOWN,
        };
        bool found = false;
        int r;

        if (!proc_cgroup) {
                char p[64];
                snprintf(p, sizeof(p), "/proc/%i/cgroup", (int) pid);
                r = read_file_at(AT_FDCWD, p, CGROUP_FILE_MAX, &text, NULL);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return -ESRCH;
                proc_cgroup = text;
        }
        if (asprintf(&scope, "/agentfab-task-%s.scope", task_id) < 0)
                return -ENOMEM;

        /* First the v1 hierarchies, line by line ("4:memory:/path",
         * "2:cpu,cpuacct:/path"); then the cgroup2 one ("0::/path"), which
         * wins for what it has. */
        for (const char *l = proc_cgroup; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                size_t len = strcspn(l, "\n");
                const char *c1 = memchr(l, ':', len), *c2;
                _cleanup_free_ char *path = NULL, *dir = NULL, *data = NULL;
                uint64_t v, w;

                if (!c1)
                        continue;
                c2 = memchr(c1 + 1, ':', (size_t) (l + len - c1 - 1));
                if (!c2)
                        continue;
                path = scope_path(c2 + 1, (size_t) (l + len - c2 - 1), scope);
                if (!path)
                        continue;
                found = true;
                if (c2 == c1 + 1) {
                        unified = TAKE_PTR(path);
                        continue;
                }
                dir = strndup(c1 + 1, (size_t) (c2 - c1 - 1));
                if (!dir)
                        return -ENOMEM;
                if (controllers_have(dir, strlen(dir), "cpuacct") &&
                    read_cgroup_file(root, dir, path, "cpuacct.usage", &data) >= 0 && single_value(data, &v) >= 0)
                        u.cpu_usec = v / 1000;
                data = mfree_ptr(data);
                if (controllers_have(dir, strlen(dir), "memory") &&
                    read_cgroup_file(root, dir, path, "memory.max_usage_in_bytes", &data) >= 0 && single_value(data, &v) >= 0)
                        u.memory_peak = v;
                data = mfree_ptr(data);
                if (controllers_have(dir, strlen(dir), "blkio") &&
                    read_cgroup_file(root, dir, path, "blkio.throttle.io_service_bytes_recursive", &data) >= 0 &&
                    blkio_sum(data, &v, &w) >= 0) {
                        u.io_read_bytes = v;
                        u.io_write_bytes = w;
                }
        }
        if (!found)
                return -ESRCH;

        if (unified) {
                /* A hybrid system mounts it at unified/, a pure one at the root. */
                static const char *const where[] = { "unified", NULL };
                for (size_t i = 0; i < ELEMENTSOF(where); i++) {
                        _cleanup_free_ char *data = NULL;
                        uint64_t v, w;
                        bool any = false;

                        if (read_cgroup_file(root, where[i], unified, "cpu.stat", &data) >= 0 &&
                            keyed_value(data, "usage_usec", &v) >= 0) {
                                /* The same time as v1's cpuacct.usage, where
                                 * both count: the larger is the fresher. */
                                u.cpu_usec = u.cpu_usec == TASK_RESOURCE_UNKNOWN ? v : MAX(u.cpu_usec, v);
                                any = true;
                        }
                        data = mfree_ptr(data);
                        if (read_cgroup_file(root, where[i], unified, "memory.peak", &data) >= 0 && single_value(data, &v) >= 0) {
                                u.memory_peak = v;
                                any = true;
                        }
                        data = mfree_ptr(data);
                        if (read_cgroup_file(root, where[i], unified, "io.stat", &data) >= 0 &&
                            io_stat_sum(data, &v, &w) >= 0 && (v > 0 || w > 0 || u.io_read_bytes == TASK_RESOURCE_UNKNOWN)) {
                                u.io_read_bytes = v;
                                u.io_write_bytes = w;
                                any = true;
                        }
                        if (any)
                                break;
                }
        }

        *ret = u;
        return 0;
}
