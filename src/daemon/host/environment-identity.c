/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <git2.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "environment-identity.h"
#include "fs-util.h"
#include "string-util.h"

#define OS_RELEASE_MAX (16U * 1024U)

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* PRETTY_NAME= of the tree's os-release, read inside the tree (an image's
 * etc/os-release is usually a link to ../usr/lib/os-release; whatever it
 * links to resolves within the image, never on the host). */
static char *os_release_pretty_name(int root_fd) {
        static const char *const paths[] = { "etc/os-release", "usr/lib/os-release" };

        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                struct open_how how = {
                        .flags = O_RDONLY | O_CLOEXEC,
                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
                };
                _cleanup_close_ int fd = (int) syscall(SYS_openat2, root_fd, paths[i], &how, sizeof(how));
                char buf[OS_RELEASE_MAX + 1];
                ssize_t n;

                if (fd < 0)
                        continue;
                n = read(fd, buf, OS_RELEASE_MAX);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                        nl = strchr(line, '\n');
                        if (nl)
                                *nl = '\0';
                        if (!strneq(line, "PRETTY_NAME=", 12))
                                continue;
                        char *v = line + 12;
                        size_t l = strlen(v);
                        if (l >= 2 && (v[0] == '"' || v[0] == '\'') && v[l - 1] == v[0]) {
                                v[l - 1] = '\0';
                                v++;
                        }
                        char *s = strshorten_line(v, 128);
                        if (s && !string_is_safe(s, false))
                                s = mfree_ptr(s);
                        return s;
                }
        }
        return NULL;
}

/* A listing of the image's top level and of usr/ (name, type and mode,
 * owner, size, modification time), hashed as a git blob: it changes when
 * an administrator installs or upgrades anything of note, and costs a
 * few hundred stat calls. */
static int image_digest(int root_fd, char ret[static 13]) {
        static const char *const dirs[] = { ".", "usr", "usr/bin", "usr/lib" };
        char *text = NULL;
        size_t size = 0;
        FILE *f;
        int r = 0;

        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                int d = openat(root_fd, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (d < 0)
                        continue;
                DIR *dir = fdopendir(d);
                if (!dir) {
                        safe_close(d);
                        continue;
                }
                /* readdir order is the file system's: sort by writing names first, then hash sorted lines. */
                char **names = NULL;
                for (struct dirent *de; (de = readdir(dir)); )
                        if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && strv_length(names) < 20000)
                                (void) strv_extend(&names, de->d_name);
                size_t n = strv_length(names);
                if (n > 0)
                        qsort(names, n, sizeof(char *), strcmp_ptr);
                for (size_t k = 0; k < n; k++) {
                        struct stat st;
                        if (fstatat(dirfd(dir), names[k], &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        fprintf(f, "%s/%s %o %u:%u %llu %lld\n", dirs[i], names[k], (unsigned) st.st_mode,
                                (unsigned) st.st_uid, (unsigned) st.st_gid, (unsigned long long) st.st_size,
                                (long long) st.st_mtim.tv_sec);
                }
                strv_free(names);
                closedir(dir);
        }
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        git_oid oid;
        if (git_odb_hash(&oid, text, size, GIT_OBJECT_BLOB) < 0)
                r = -EIO;
        else {
                char hex[GIT_OID_HEXSZ + 1];
                git_oid_tostr(hex, sizeof(hex), &oid);
                memcpy(ret, hex, 12);
                ret[12] = '\0';
        }
        free(text);
        return r;
}

int environment_identity(const Environment *e, char **ret) {
        _cleanup_close_ int root_fd = -EBADF;
        _cleanup_free_ char *pretty = NULL;
        char digest[13] = "";

        root_fd = open(e->image ?: "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;
        pretty = os_release_pretty_name(root_fd);
        if (e->image && !e->version) {
                int r = image_digest(root_fd, digest);
                if (r < 0)
                        return r;
        }
        if (asprintf(ret, "%s (%s%s; %s%s)", e->name,
                     e->image ? "" : "host: ", pretty ?: "unknown system",
                     e->version ? "version " : e->image ? "image " : "",
                     e->version ?: e->image ? digest : "no image") < 0)
                return -ENOMEM;
        return 0;
}
