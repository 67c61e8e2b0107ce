/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agentfab-bus.h"
#include "string-util.h"
#include "task-spec-dbus.h"

static int invalid(sd_bus_error *error, const char *fmt, const char *key) {
        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC, fmt, key);
}

/* Reads one variant holding an unsigned or non-negative signed integer. */
static int read_unsigned_variant(sd_bus_message *m, const char *key, uint64_t *ret, sd_bus_error *error) {
        char type;
        const char *contents;
        int r;

        r = sd_bus_message_peek_type(m, &type, &contents);
        if (r < 0)
                return r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, contents);
        if (r < 0)
                return r;

        union {
                uint8_t y; uint16_t q; int16_t n; uint32_t u; int32_t i; uint64_t t; int64_t x;
        } v;
        int64_t sv = 0;

        switch (contents[0] != '\0' && contents[1] == '\0' ? contents[0] : 0) {
        case 'y': r = sd_bus_message_read_basic(m, 'y', &v.y); *ret = v.y; break;
        case 'q': r = sd_bus_message_read_basic(m, 'q', &v.q); *ret = v.q; break;
        case 'u': r = sd_bus_message_read_basic(m, 'u', &v.u); *ret = v.u; break;
        case 't': r = sd_bus_message_read_basic(m, 't', &v.t); *ret = v.t; break;
        case 'n': r = sd_bus_message_read_basic(m, 'n', &v.n); sv = v.n; break;
        case 'i': r = sd_bus_message_read_basic(m, 'i', &v.i); sv = v.i; break;
        case 'x': r = sd_bus_message_read_basic(m, 'x', &v.x); sv = v.x; break;
        default:
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Limit '%s' must be an integer, not of type '%s'.", key, contents);
        }
        if (r < 0)
                return r;
        if (strchr("nix", contents[0])) {
                if (sv < 0)
                        return invalid(error, "Limit '%s' must not be negative.", key);
                *ret = (uint64_t) sv;
        }

        return sd_bus_message_exit_container(m);
}

static int read_limits(TaskSpec *spec, sd_bus_message *m, sd_bus_error *error) {
        unsigned n = 0;
        int r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, "a{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;

        while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;
                uint64_t value = 0;

                if (++n > _TASK_LIMIT_MAX + TASK_EXTRA_LIMITS_MAX)
                        return invalid(error, "Too many limits.", NULL);

                r = sd_bus_message_read_basic(m, 's', &key);
                if (r < 0)
                        return r;

                r = read_unsigned_variant(m, key, &value, error);
                if (r < 0)
                        return r;
                /* A limit nothing enforces is refused: a submitter must not
                 * believe in it. (State files written before keep theirs.) */
                if (task_limit_name_is_valid(key) && task_limit_from_string(key) < 0) {
                        _cleanup_free_ char *known = task_limit_names();
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Unknown limit '%s'; known limits: %s.", key, known ?: "?");
                }
                r = task_spec_set_limit(spec, key, value, error);
                if (r < 0)
                        return r;

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;

        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static bool key_is_string(const char *key) {
        static const char *const keys[] = { "repository", "goal", "acceptance", "test_command", "coverage_report", "base",
                                            "model", "replay", "reference", "push_url", "forge", "forge_repository",
                                            "pull_request_base", "environment" };

        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (streq(keys[i], key))
                        return true;
        return false;
}

int task_spec_from_message(TaskSpec *spec, sd_bus_message *m, sd_bus_error *error) {
        unsigned n = 0;
        int r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;

        while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key, *contents;
                char type;

                if (++n > 32)
                        return invalid(error, "Too many keys in task spec.", NULL);

                r = sd_bus_message_read_basic(m, 's', &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, &type, &contents);
                if (r < 0)
                        return r;

                if (streq(key, "limits")) {
                        if (!streq(contents, "a{sv}"))
                                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                         "Key 'limits' must be of type a{sv}, not '%s'.", contents);
                        r = read_limits(spec, m, error);
                } else if (streq(key, "repository_fd")) {
                        struct stat st;
                        int fd;

                        if (!streq(contents, "h"))
                                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                         "Key 'repository_fd' must be of type h, not '%s'.", contents);
                        if (spec->repository_fd >= 0)
                                return invalid(error, "Key '%s' is given twice.", key);
                        r = sd_bus_message_read(m, "v", "h", &fd);
                        if (r < 0)
                                return r;
                        if (fstat(fd, &st) < 0)
                                return sd_bus_error_set_errnof(error, errno, "Cannot look at 'repository_fd': %m");
                        /* SECURITY: the repository is read through the fd with the
                         * daemon's rights. An O_PATH fd opens a directory without
                         * read permission on it: it proves nothing. */
                        int flags = fcntl(fd, F_GETFL);
                        if (flags < 0)
                                return -errno;
                        if (flags & O_PATH)
                                return invalid(error, "'%s' is an O_PATH file descriptor: open the repository for reading.", key);
                        /* SECURITY: a pipe, a socket or a file on FUSE could keep the
                         * daemon waiting in read(): a bundle comes in a memfd only. */
                        if (!S_ISDIR(st.st_mode) && !(S_ISREG(st.st_mode) && fcntl(fd, F_GET_SEALS) >= 0))
                                return invalid(error, "'%s' is neither an open directory nor a memfd holding a git bundle.", key);
                        spec->repository_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                        if (spec->repository_fd < 0)
                                return -errno;
                        r = 0;
                } else if (streq(key, "submodules")) {
                        int b;

                        if (!streq(contents, "b"))
                                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                         "Key 'submodules' must be of type b, not '%s'.", contents);
                        r = sd_bus_message_read(m, "v", "b", &b);
                        if (r < 0)
                                return r;
                        spec->submodules = b;
                } else if (streq(contents, "s")) {
                        const char *value;

                        r = sd_bus_message_read(m, "v", "s", &value);
                        if (r < 0)
                                return r;
                        r = task_spec_set_string(spec, key, value, error);
                } else if (!key_is_string(key))
                        return invalid(error, "Unknown key '%s' in task spec.", key);
                else
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Key '%s' must be of type s, not '%s'.", key, contents);
                if (r < 0)
                        return r;

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;

        return sd_bus_message_exit_container(m);
}
