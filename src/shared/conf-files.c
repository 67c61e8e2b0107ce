/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "conf-files.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"

static char *strip(char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

static int conf_text_parse(const ConfParser *p, const char *text, const char *filename, void *userdata) {
        _cleanup_free_ char *copy = strdup(text);
        _cleanup_free_ char *section = strdup("");
        unsigned line = 0;
        int r;

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
                                if (p->warn)
                                        log_warning("%s:%u: Bad section header, ignoring.", filename, line);
                                continue;
                        }
                        *e = '\0';
                        if (free_and_strdup(&section, l + 1) < 0)
                                return -ENOMEM;
                        r = p->line(filename, section, NULL, NULL, line, userdata);
                        if (r < 0)
                                return r;
                        continue;
                }

                char *eq = strchr(l, '=');
                if (!eq) {
                        if (p->warn)
                                log_warning("%s:%u: Line is not KEY=VALUE, ignoring.", filename, line);
                        continue;
                }
                *eq = '\0';
                r = p->line(filename, section, strip(l), strip(eq + 1), line, userdata);
                if (r < 0)
                        return r;
        }
        return p->line(filename, NULL, NULL, NULL, line, userdata);
}

static int conf_file_one(int dir_fd, const char *name, const char *display, const ConfParser *p, void *userdata) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_file_at(dir_fd, name, CONF_FILE_MAX, &text, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                log_warning_errno(r, "Failed to read '%s', ignoring: %m", display);
                return 0;
        }
        return conf_text_parse(p, text, display, userdata);
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int conf_files_foreach(const ConfParser *p, const char *path, void *userdata) {
        _cleanup_free_ char *dropins = NULL;
        _cleanup_strv_free_ char **names = NULL;
        DIR *d;
        int r;

        r = conf_file_one(AT_FDCWD, path, path, p, userdata);
        if (r < 0)
                return r;

        if (asprintf(&dropins, "%s.d", path) < 0)
                return -ENOMEM;
        d = opendir(dropins);
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

                if (asprintf(&display, "%s/%s", dropins, *n) < 0)
                        r = -ENOMEM;
                else
                        r = conf_file_one(dirfd(d), *n, display, p, userdata);
                if (r < 0) {
                        closedir(d);
                        return r;
                }
        }
        closedir(d);
        return 0;
}

int conf_parse_text(const ConfParser *p, const char *text, const char *filename, void *userdata) {
        int r;

        r = conf_text_parse(p, text, filename, userdata);
        if (p->done)
                p->done(userdata);
        return r;
}

int conf_parse_files(const ConfParser *p, const char *path, void *userdata) {
        int r;

        r = conf_files_foreach(p, path, userdata);
        if (p->done)
                p->done(userdata);
        return r;
}
