/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "conf-files.h"
#include "fs-util.h"
#include "log.h"
#include "string-util.h"

static int conf_file_one(int dir_fd, const char *name, const char *display, conf_file_handler_t handler, void *userdata) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_file_at(dir_fd, name, CONF_FILE_MAX, &text, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                log_warning_errno(r, "Failed to read '%s', ignoring: %m", display);
                return 0;
        }
        return handler(text, display, userdata);
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int conf_files_foreach(const char *path, conf_file_handler_t handler, void *userdata) {
        _cleanup_free_ char *dropins = NULL;
        _cleanup_strv_free_ char **names = NULL;
        DIR *d;
        int r;

        r = conf_file_one(AT_FDCWD, path, path, handler, userdata);
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
                        r = conf_file_one(dirfd(d), *n, display, handler, userdata);
                if (r < 0) {
                        closedir(d);
                        return r;
                }
        }
        closedir(d);
        return 0;
}
