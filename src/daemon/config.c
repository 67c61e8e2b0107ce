/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"

void config_init(Config *c) {
        *c = (Config) {
                .idle_timeout_usec = 60 * USEC_PER_SEC,
                .max_tasks = 4096,
                .max_tasks_per_user = 16,
                .max_stream_clients = 64,
        };
}

static int parse_unsigned(const char *v, unsigned min, unsigned max, unsigned *ret) {
        uint64_t u;
        int r = safe_atou64(v, &u);
        if (r < 0)
                return r;
        if (u < min || u > max)
                return -ERANGE;
        *ret = (unsigned) u;
        return 0;
}

static char *strip(char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

static int config_assign(Config *c, const char *section, const char *key, const char *value) {
        if (!streq(section, "Daemon"))
                return 0; /* Other sections belong to later parts of the daemon. */

        if (streq(key, "IdleTimeoutSec")) {
                int r = parse_sec(value, &c->idle_timeout_usec);
                /* As in systemd, 0 means "no timeout": never exit when idle. */
                if (r >= 0 && c->idle_timeout_usec == 0)
                        c->idle_timeout_usec = UINT64_MAX;
                return r;
        }
        if (streq(key, "MaxTasks"))
                return parse_unsigned(value, 1, 1000000, &c->max_tasks);
        if (streq(key, "MaxTasksPerUser"))
                return parse_unsigned(value, 1, 1000000, &c->max_tasks_per_user);
        if (streq(key, "MaxStreamClients"))
                return parse_unsigned(value, 1, 65536, &c->max_stream_clients);
        return -ENOENT;
}

int config_parse(Config *c, const char *text, const char *filename) {
        _cleanup_free_ char *copy = strdup(text);
        _cleanup_free_ char *section = strdup("");
        unsigned line = 0;

        if (!copy || !section)
                return -ENOMEM;

        /* strsep(), not strtok(): empty lines count, so line numbers are right. */
        for (char *next = copy, *l; (l = strsep(&next, "\n"));) {
                line++;
                l = strip(l);
                if (l[0] == '\0' || l[0] == '#' || l[0] == ';')
                        continue;

                if (l[0] == '[') {
                        char *e = strchr(l, ']');
                        if (!e || e[1] != '\0') {
                                log_warning("%s:%u: Bad section header, ignoring.", filename, line);
                                continue;
                        }
                        *e = '\0';
                        if (free_and_strdup(&section, l + 1) < 0)
                                return -ENOMEM;
                        continue;
                }

                char *eq = strchr(l, '=');
                if (!eq) {
                        log_warning("%s:%u: Line is not KEY=VALUE, ignoring.", filename, line);
                        continue;
                }
                *eq = '\0';
                const char *key = strip(l), *value = strip(eq + 1);

                int r = config_assign(c, section, key, value);
                if (r == -ENOENT)
                        log_warning("%s:%u: Unknown key '%s' in section [%s], ignoring.", filename, line, key, section);
                else if (r < 0)
                        log_warning("%s:%u: Invalid value '%s' for %s=, ignoring.", filename, line, value, key);
        }
        return 0;
}

static int config_load_file(Config *c, int dir_fd, const char *name, const char *display) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_file_at(dir_fd, name, 1024 * 1024, &text, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                log_warning_errno(r, "Failed to read '%s', ignoring: %m", display);
                return 0;
        }
        return config_parse(c, text, display);
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int config_load(Config *c, const char *path) {
        _cleanup_free_ char *dropins = NULL;
        _cleanup_strv_free_ char **names = NULL;
        int r;

        r = config_load_file(c, AT_FDCWD, path, path);
        if (r < 0)
                return r;

        if (asprintf(&dropins, "%s.d", path) < 0)
                return -ENOMEM;

        DIR *d = opendir(dropins);
        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir(d));) {
                size_t l = strlen(de->d_name);
                if (de->d_name[0] == '.' || l < 6 || !streq(de->d_name + l - 5, ".conf"))
                        continue;
                if (strv_extend(&names, de->d_name) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
        }

        if (names)
                qsort(names, strv_length(names), sizeof(char *), compare_strings);
        for (char **n = names; n && *n; n++) {
                _cleanup_free_ char *display = NULL;
                if (asprintf(&display, "%s/%s", dropins, *n) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
                (void) config_load_file(c, dirfd(d), *n, display);
        }
        closedir(d);
        return 0;
}
