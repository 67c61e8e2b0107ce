/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "credential.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"

static bool credential_name_is_valid(const char *name) {
        if (isempty(name) || strlen(name) > 64 || streq(name, ".") || streq(name, ".."))
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == strlen(name);
}

char *credential_free(char *secret) {
        if (secret) {
                explicit_bzero(secret, strlen(secret));
                free(secret);
        }
        return NULL;
}

static int credential_read(const char *name, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int dfd = -EBADF;
        const char *dir;

        /* SECURITY: a file name below the credentials directory, nothing else. */
        if (!credential_name_is_valid(name))
                return -EINVAL;
        dir = getenv("CREDENTIALS_DIRECTORY");
        if (isempty(dir))
                return -ENXIO;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        return read_file_at(dfd, name, max, ret, ret_size);
}

int credential_read_text(const char *name, size_t max, char **ret) {
        char *s = NULL;
        size_t n = 0;
        int r;

        r = credential_read(name, max, &s, &n);
        if (r < 0)
                return r;
        r = n == 0 ? -ENODATA : strlen(s) != n ? -EBADMSG : 0;
        if (r < 0) {
                explicit_bzero(s, n);
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int credential_read_line(const char *name, size_t max, bool allow_space, char **ret) {
        char *s = NULL;
        size_t n = 0;
        int r;

        r = credential_read(name, max, &s, &n);
        if (r < 0)
                return r;
        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
                s[--n] = '\0';

        /* SECURITY: the secret goes into one line of a protocol; a newline in
         * it would let the file add lines (headers) of its own. */
        r = 0;
        if (n == 0)
                r = -ENODATA;
        else if (strlen(s) != n || !string_is_safe(s, false) || (!allow_space && strchr(s, ' ')))
                r = -EBADMSG;
        if (r < 0) {
                explicit_bzero(s, n);
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}
