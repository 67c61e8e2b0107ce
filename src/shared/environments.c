/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf-files.h"
#include "environments.h"
#include "log.h"
#include "string-table.h"
#include "string-util.h"

static const char *const network_mode_table[_NETWORK_MODE_MAX] = {
        [NETWORK_OFF] = "off",
        [NETWORK_ALLOWLIST] = "allowlist",
        [NETWORK_AUDITED] = "audited",
};

DEFINE_STRING_TABLE_LOOKUP(network_mode, NetworkMode);

static const char *const cache_kind_table[_CACHE_KIND_MAX] = {
        [CACHE_PIP] = "pip",
        [CACHE_NPM] = "npm",
        [CACHE_CARGO] = "cargo",
        [CACHE_GO] = "go",
};

DEFINE_STRING_TABLE_LOOKUP(cache_kind, CacheKind);

bool environment_name_is_valid(const char *s) {
        size_t l = s ? strlen(s) : 0;

        if (l < 1 || l > ENVIRONMENT_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (const char *c = s; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      strchr("_.-", *c)))
                        return false;
        return true;
}

/* An absolute path without "." or ".." components, empty components or a
 * trailing slash: what is checked is what is mounted. */
static bool image_path_is_valid(const char *p) {
        size_t l = p ? strlen(p) : 0;

        if (l < 2 || l > ENVIRONMENT_IMAGE_MAX || p[0] != '/' || p[l - 1] == '/' || !string_is_safe(p, false))
                return false;
        for (const char *c = p; *c; ) {
                const char *next = strchr(c + 1, '/');
                size_t n = next ? (size_t) (next - c - 1) : strlen(c + 1);
                if (n == 0 || (n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
                        return false;
                if (!next)
                        break;
                c = next;
        }
        return true;
}

/* Allow= entries: a host name or glob ("*.example.org"), an IPv4 or IPv6
 * address with an optional prefix length, each with an optional ":PORT"
 * (IPv6 in brackets then). Checked for shape here; the proxy decides. */
bool environment_allow_entry_is_valid(const char *s) {
        char host[256];
        const char *port = NULL;
        size_t l = strlen(s);

        if (l == 0 || l >= sizeof(host))
                return false;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || (end[1] && end[1] != ':'))
                        return false;
                memcpy(host, s + 1, (size_t) (end - s - 1));
                host[end - s - 1] = '\0';
                port = end[1] ? end + 2 : NULL;
        } else if (strchr(s, ':') != strrchr(s, ':')) {
                snprintf(host, sizeof(host), "%s", s);   /* a bare IPv6 address, maybe with /prefix */
        } else {
                const char *colon = strchr(s, ':');
                size_t n = colon ? (size_t) (colon - s) : l;
                memcpy(host, s, n);
                host[n] = '\0';
                port = colon ? colon + 1 : NULL;
        }
        if (port) {
                uint64_t v;
                if (safe_atou64(port, &v) < 0 || v < 1 || v > 65535)
                        return false;
        }

        char *slash = strchr(host, '/');
        if (slash) {
                uint64_t prefix;
                unsigned char buf[16];
                *slash = '\0';
                if (safe_atou64(slash + 1, &prefix) < 0)
                        return false;
                if (inet_pton(AF_INET, host, buf) == 1)
                        return prefix <= 32;
                return inet_pton(AF_INET6, host, buf) == 1 && prefix <= 128;
        }
        unsigned char buf[16];
        if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1)
                return true;

        /* A host name: labels of letters, digits and '-', or a leading "*." glob. */
        const char *h = host;
        if (strneq(h, "*.", 2))
                h += 2;
        if (!*h || strlen(h) > 253)
                return false;
        for (const char *c = h; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '-' || *c == '.'))
                        return false;
        return h[0] != '.' && h[0] != '-' && !strstr(h, "..");
}

static bool env_assignment_is_valid(const char *s) {
        const char *eq = strchr(s, '=');

        if (!eq || eq == s || strneq(s, "LD_", 3) || (size_t) (eq - s) > 128 || strlen(eq + 1) > 4096 || !string_is_safe(s, false))
                return false;
        if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
                return false;
        for (const char *c = s; c < eq; c++)
                if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
                        return false;
        return true;
}

static void environment_done(Environment *e) {
        free(e->name);
        free(e->image);
        free(e->version);
        strv_free(e->allow);
        strv_free(e->vars);
        *e = (Environment) {};
}

static void environment_init(Environment *e) {
        *e = (Environment) {
                .network = NETWORK_OFF,
                .memory_max = UINT64_MAX,
                .tasks_max = UINT64_MAX,
                .cpu_quota_percent = UINT64_MAX,
        };
}

void environments_done(Environments *e) {
        for (size_t i = 0; i < e->n; i++)
                environment_done(e->list + i);
        e->n = 0;
}

const Environment *environments_find(const Environments *e, const char *name) {
        for (size_t i = 0; i < e->n; i++)
                if (streq_ptr(e->list[i].name, name))
                        return e->list + i;
        return NULL;
}

char *environments_names(const Environments *e) {
        _cleanup_free_ char **names = calloc(e->n + 1, sizeof(char *));
        if (!names)
                return NULL;
        for (size_t i = 0; i < e->n; i++)
                names[i] = e->list[i].name;
        return strv_join(names, ", ");
}

static int parse_words(const char *value, int (*each)(Environment *e, const char *word), Environment *e) {
        _cleanup_free_ char *copy = strdup(value);
        char *save = NULL;
        int r;

        if (!copy)
                return -ENOMEM;
        for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
                r = each(e, w);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_allow(Environment *e, const char *w) {
        if (!environment_allow_entry_is_valid(w))
                return -EINVAL;
        if (strv_length(e->allow) >= ENVIRONMENT_ALLOW_MAX)
                return -E2BIG;
        return strv_extend(&e->allow, w);
}

static int add_cache(Environment *e, const char *w) {
        CacheKind k = cache_kind_from_string(w);
        if (k < 0)
                return -EINVAL;
        e->caches |= 1U << k;
        return 0;
}

static int parse_percent_value(const char *v, uint64_t *ret) {
        _cleanup_free_ char *copy = strdup(v);
        size_t l;

        if (!copy)
                return -ENOMEM;
        l = strlen(copy);
        if (l < 2 || copy[l - 1] != '%')
                return -EINVAL;
        copy[l - 1] = '\0';
        if (safe_atou64(copy, ret) < 0 || *ret < 1 || *ret > 100000)
                return -EINVAL;
        return 0;
}

static int environment_assign(Environment *e, const char *key, const char *value) {
        if (streq(key, "Name")) {
                if (!environment_name_is_valid(value))
                        return -EINVAL;
                return free_and_strdup(&e->name, value);
        }
        if (streq(key, "Image")) {
                if (isempty(value))
                        return free_and_strdup(&e->image, NULL);
                if (!image_path_is_valid(value) || streq(value, "/"))
                        return -EINVAL;
                return free_and_strdup(&e->image, value);
        }
        if (streq(key, "Version")) {
                if (strlen(value) > 256 || !string_is_safe(value, false))
                        return -EINVAL;
                return free_and_strdup(&e->version, isempty(value) ? NULL : value);
        }
        if (streq(key, "Network")) {
                NetworkMode m = network_mode_from_string(value);
                if (m < 0)
                        return m;
                e->network = m;
                return 0;
        }
        if (streq(key, "Allow")) {
                if (isempty(value)) {
                        strv_free(e->allow);
                        e->allow = NULL;
                        return 0;
                }
                return parse_words(value, add_allow, e);
        }
        if (streq(key, "Cache")) {
                if (isempty(value)) {
                        e->caches = 0;
                        return 0;
                }
                return parse_words(value, add_cache, e);
        }
        if (streq(key, "CacheMaxSize"))
                return parse_size(value, &e->cache_max_bytes);
        if (streq(key, "Environment")) {
                if (isempty(value)) {
                        strv_free(e->vars);
                        e->vars = NULL;
                        return 0;
                }
                if (!env_assignment_is_valid(value))
                        return -EINVAL;
                if (strv_length(e->vars) >= ENVIRONMENT_VARS_MAX)
                        return -E2BIG;
                return strv_env_set(&e->vars, value);
        }
        if (streq(key, "MemoryMax"))
                return parse_size(value, &e->memory_max);
        if (streq(key, "TasksMax"))
                return safe_atou64(value, &e->tasks_max);
        if (streq(key, "CPUQuota"))
                return parse_percent_value(value, &e->cpu_quota_percent);
        return -ENOENT;
}

typedef struct Parser {
        Environments *envs;
        Environment pending;
        bool active;
        unsigned start;
        bool warn;
} Parser;

/* A section replaces an earlier one of the same name as a whole: what an
 * environment is should be readable in one place. */
static int parser_flush(Parser *p, const char *filename) {
        Environments *e = p->envs;

        if (!p->active)
                return 0;
        p->active = false;
        if (!p->pending.name) {
                if (p->warn)
                        log_warning("%s:%u: [Environment] section without a valid Name=, ignoring it.",
                                    filename, p->start);
                environment_done(&p->pending);
                return 0;
        }
        for (size_t i = 0; i < e->n; i++)
                if (streq(e->list[i].name, p->pending.name)) {
                        environment_done(e->list + i);
                        e->list[i] = p->pending;
                        p->pending = (Environment) {};
                        return 0;
                }
        if (e->n >= ENVIRONMENTS_MAX) {
                if (p->warn)
                        log_warning("%s:%u: More than %u environments, ignoring '%s'.", filename, p->start,
                                    ENVIRONMENTS_MAX, p->pending.name);
                environment_done(&p->pending);
                return 0;
        }
        e->list[e->n++] = p->pending;
        p->pending = (Environment) {};
        return 0;
}

static int on_line(const char *filename, const char *section, const char *key, const char *value, unsigned line,
                   void *userdata) {
        Parser *p = userdata;
        int r;

        if (!key) {
                /* A header or the end of the text ends the section in progress. */
                r = parser_flush(p, filename);
                if (r < 0)
                        return r;
                if (section && streq(section, "Environment")) {
                        environment_init(&p->pending);
                        p->active = true;
                        p->start = line;
                }
                return 0;
        }
        if (!p->active)
                return 0;
        r = environment_assign(&p->pending, key, value);
        if (r == -ENOMEM)
                return r;
        if (r < 0 && p->warn) {
                if (r == -ENOENT)
                        log_warning("%s:%u: Unknown key '%s' in section [Environment], ignoring.", filename, line, key);
                else
                        log_warning("%s:%u: Invalid value for %s=, ignoring: '%s'", filename, line, key, value);
        }
        return 0;
}

static void on_done(void *userdata) {
        Parser *p = userdata;

        environment_done(&p->pending);
}

int environments_load(Environments *e, const char *path, bool warn) {
        const ConfParser parser = { .line = on_line, .done = on_done, .warn = warn };
        int r;

        r = conf_parse_files(&parser, path, &(Parser) { .envs = e, .warn = warn });
        if (r < 0)
                return r;
        if (!environments_find(e, ENVIRONMENT_DEFAULT)) {
                if (e->n >= ENVIRONMENTS_MAX)
                        environment_done(e->list + --e->n);
                /* The default goes first, so that listings begin with it. */
                memmove(e->list + 1, e->list, e->n * sizeof(Environment));
                environment_init(e->list);
                e->list[0].name = strdup(ENVIRONMENT_DEFAULT);
                e->n++;
                if (!e->list[0].name)
                        return -ENOMEM;
        }
        return 0;
}

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static int image_error(char **ret_error, int r, const char *fmt, const char *a, const char *b) {
        if (asprintf(ret_error, fmt, a, b) < 0)
                return -ENOMEM;
        return r;
}

/* Root's, and writable by root only. */
static bool stat_is_safe(const struct stat *st) {
        return st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

int environment_image_check(const char *image, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        *ret_error = NULL;
        if (!image_path_is_valid(image))
                return image_error(ret_error, -EINVAL, "the image path '%s' is not an absolute, normalized path%s", image, "");

        /* Every component from / down: a directory of root's that nobody
         * else can write to, never a symlink. */
        fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        _cleanup_free_ char *copy = strdup(image);
        if (!copy)
                return -ENOMEM;
        char *save = NULL;
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0) {
                        int r = -errno;
                        return image_error(ret_error, r,
                                           r == -ENOENT ? "the image '%s' does not exist (component '%s' missing)" :
                                           r == -ENOTDIR || r == -ELOOP ? "the image '%s' is not a directory or is reached through a symlink ('%s')" :
                                           "the image '%s' cannot be opened at '%s'", image, c);
                }
                safe_close(fd);
                fd = next;
                if (fstat(fd, &st) < 0)
                        return -errno;
                /* An ancestor may be sticky and world-writable like /tmp:
                 * nobody but root may rename or remove root's entries there.
                 * The image itself may not. */
                bool last = !save || !*save;
                if (st.st_uid != 0 || ((st.st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st.st_mode & S_ISVTX))))
                        return image_error(ret_error, -EPERM,
                                           "the image '%s' is not safe: '%s' is not root's or is writable by others", image, c);
        }
        if (fstatat(fd, "usr", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return image_error(ret_error, -ENOENT, "the image '%s' has no usr/ directory%s", image, "");

        /* Its system directories, and one level below them. */
        static const char *const dirs[] = { "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_close_ int d = -EBADF;
                struct stat sub;

                if (fstatat(fd, dirs[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISLNK(st.st_mode))
                        continue;   /* merged /usr: bin -> usr/bin; the link is copied as a link */
                if (!S_ISDIR(st.st_mode) || !stat_is_safe(&st))
                        return image_error(ret_error, -EPERM,
                                           "the image '%s' is not safe: '%s' is not a directory of root's that only root can write", image, dirs[i]);
                d = openat(fd, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (d < 0)
                        return image_error(ret_error, -errno, "the image '%s' cannot be read at '%s'", image, dirs[i]);
                _cleanup_(closedirp) DIR *dir = fdopendir(d);
                if (!dir)
                        return -errno;
                d = -EBADF;
                for (struct dirent *de; (de = readdir(dir)); ) {
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        if (fstatat(dirfd(dir), de->d_name, &sub, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        if (S_ISLNK(sub.st_mode))
                                continue;
                        if (sub.st_uid != 0 || (!S_ISDIR(sub.st_mode) && (sub.st_mode & (S_IWGRP | S_IWOTH))) ||
                            (S_ISDIR(sub.st_mode) && (sub.st_mode & (S_IWGRP | S_IWOTH)) && !(sub.st_mode & S_ISVTX))) {
                                _cleanup_free_ char *what = NULL;
                                if (asprintf(&what, "%s/%s", dirs[i], de->d_name) < 0)
                                        return -ENOMEM;
                                return image_error(ret_error, -EPERM,
                                                   "the image '%s' is not safe: '%s' is not root's or is writable by others", image, what);
                        }
                }
        }
        return 0;
}

int environment_cache_vars(unsigned mask, char ***vars) {
        static const char *const table[_CACHE_KIND_MAX][3] = {
                [CACHE_PIP] = { "PIP_CACHE_DIR=/cache/pip", NULL },
                [CACHE_NPM] = { "npm_config_cache=/cache/npm", NULL },
                [CACHE_CARGO] = { "CARGO_HOME=/cache/cargo", NULL },
                [CACHE_GO] = { "GOMODCACHE=/cache/go/mod", "GOCACHE=/cache/go/build", NULL },
        };
        int r;

        for (CacheKind k = 0; k < _CACHE_KIND_MAX; k++) {
                if (!(mask & (1U << k)))
                        continue;
                for (size_t i = 0; table[k][i]; i++) {
                        r = strv_env_set(vars, table[k][i]);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}
