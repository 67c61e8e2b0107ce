/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The task spec of SubmitTask() as the daemon decodes it from the D-Bus
 * message (task_spec_from_message()). The input is decoded into a real
 * a{sv} message, built and sealed with sd-bus on a bus that is never
 * connected, so every value arrives with a type D-Bus allows, as it would
 * from dbus-daemon: per entry a key (a known one or any string), a variant
 * type (string, boolean, fd, a{sv} of limits, integers of every width and
 * sign, and some that are wrong everywhere), and a value.
 *
 * Invariants: a refusal is an InvalidSpec error with a message (never a bare
 * errno the caller cannot read); an accepted spec has every string within
 * its TASK_*_MAX bound and free of control characters, positive limits, at
 * most TASK_EXTRA_LIMITS_MAX unknown ones; and once validated it survives
 * the state file: stored and loaded, it is the same spec. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "agentfab-bus.h"
#include "environments.h"
#include "json-util.h"
#include "string-util.h"
#include "task-spec-dbus.h"
#include "task-store.h"
#include "task.h"

static sd_bus *bus;
static int fds[4];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        int sp[2];

        fuzz_quiet();
        /* A bus that has begun to authenticate on one end of a socket pair
         * is enough to build messages; nothing is ever sent. */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) < 0 || sd_bus_new(&bus) < 0 ||
            sd_bus_set_fd(bus, sp[0], sp[0]) < 0 || sd_bus_negotiate_fds(bus, true) < 0 || sd_bus_start(bus) < 0)
                abort();
        /* What repository_fd may be: a directory, an O_PATH one, a sealed
         * memfd, a pipe. */
        fds[0] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        fds[1] = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        fds[2] = memfd_create("bundle", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                abort();
        fds[3] = p[0];
        if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
                abort();
        return 0;
}

static const char *const keys[] = {
        "repository", "goal", "acceptance", "test_command", "base", "model", "replay", "push_url", "forge",
        "forge_repository", "pull_request_base", "limits", "repository_fd", "submodules", "bogus", "environment",
};
static const char *const limit_names[] = {
        "max_steps", "max_wall_clock_sec", "max_tokens", "max_commands", "command_timeout_sec", "memory_max",
        "tasks_max", "cpu_quota_percent", "IOWeight", "max_steps",
};

static char *key_from(FuzzInput *in, const char *const *table, size_t n) {
        uint8_t k = fuzz_u8(in);
        if (k < 0xc0)
                return strdup(table[k % n]);
        return fuzz_string(in, NULL);
}

static int append_integer(sd_bus_message *m, FuzzInput *in) {
        static const char types[] = "yqutnixdsb";
        char t = types[fuzz_u8(in) % (sizeof(types) - 1)];
        uint64_t v = fuzz_u64(in, 8);
        switch (t) {
        case 'y': return sd_bus_message_append(m, "v", "y", (uint8_t) v);
        case 'q': return sd_bus_message_append(m, "v", "q", (uint16_t) v);
        case 'u': return sd_bus_message_append(m, "v", "u", (uint32_t) v);
        case 't': return sd_bus_message_append(m, "v", "t", v);
        case 'n': return sd_bus_message_append(m, "v", "n", (int16_t) v);
        case 'i': return sd_bus_message_append(m, "v", "i", (int32_t) v);
        case 'x': return sd_bus_message_append(m, "v", "x", (int64_t) v);
        case 'd': return sd_bus_message_append(m, "v", "d", (double) v);
        case 's': return sd_bus_message_append(m, "v", "s", "12");
        default:  return sd_bus_message_append(m, "v", "b", (int) (v & 1));
        }
}

static int append_value(sd_bus_message *m, FuzzInput *in) {
        uint8_t t = fuzz_u8(in);
        int r;

        switch (t % 8) {
        case 0: case 1: case 2: {
                char *s = fuzz_string(in, NULL);
                r = sd_bus_message_append(m, "v", "s", s);
                free(s);
                return r;
        }
        case 3:
                return sd_bus_message_append(m, "v", "b", (int) (fuzz_u8(in) & 1));
        case 4:
                return sd_bus_message_append(m, "v", "h", fds[fuzz_u8(in) % ELEMENTSOF(fds)]);
        case 5: {
                size_t n = fuzz_u8(in) % 40;
                r = sd_bus_message_open_container(m, 'v', "a{sv}");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                for (size_t i = 0; r >= 0 && i < n && !fuzz_eof(in); i++) {
                        char *name = key_from(in, limit_names, ELEMENTSOF(limit_names));
                        r = sd_bus_message_open_container(m, 'e', "sv");
                        if (r >= 0)
                                r = sd_bus_message_append(m, "s", name);
                        if (r >= 0)
                                r = append_integer(m, in);
                        if (r >= 0)
                                r = sd_bus_message_close_container(m);
                        free(name);
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        }
        case 6:
                return append_integer(m, in);
        default:
                return sd_bus_message_append(m, "v", "as", 2, "a", "b");
        }
}

static void spec_bounds(const TaskSpec *s) {
        const struct { const char *v; size_t max; bool multiline; } f[] = {
                { s->repository, TASK_REPOSITORY_MAX, false }, { s->goal, TASK_GOAL_MAX, true },
                { s->acceptance, TASK_ACCEPTANCE_MAX, true }, { s->test_command, TASK_TEST_COMMAND_MAX, true },
                { s->base, TASK_BASE_MAX, false }, { s->model, TASK_MODEL_MAX, false }, { s->replay, AGENTFAB_TASK_ID_LEN, false },
                { s->push_url, TASK_PUSH_URL_MAX, false }, { s->forge, TASK_FORGE_MAX, false },
                { s->forge_repository, TASK_FORGE_REPOSITORY_MAX, false }, { s->pull_request_base, TASK_BASE_MAX, false },
                { s->environment, ENVIRONMENT_NAME_MAX, false },
        };
        for (size_t i = 0; i < ELEMENTSOF(f); i++)
                if (f[i].v)
                        FUZZ_CHECK(strlen(f[i].v) <= f[i].max && string_is_safe(f[i].v, f[i].multiline), "field %zu '%s'", i, f[i].v);
        for (int l = 0; l < _TASK_LIMIT_MAX; l++)
                FUZZ_CHECK(s->limits[l] > 0, "limit %d positive", l);
        FUZZ_CHECK(s->limits[TASK_LIMIT_CPU_QUOTA_PERCENT] == TASK_LIMIT_UNSET ||
                   s->limits[TASK_LIMIT_CPU_QUOTA_PERCENT] <= 100 * 1024, "CPU quota in range");
        FUZZ_CHECK(s->n_extra_limits <= TASK_EXTRA_LIMITS_MAX, "%zu extra limits", s->n_extra_limits);
        if (s->repository && !strstr(s->repository, "://"))
                FUZZ_CHECK(s->repository[0] == '/', "a local repository is absolute");
        else if (s->repository)
                FUZZ_CHECK(task_repository_url_is_valid(s->repository), "URL '%s' allowed", s->repository);
}

static void spec_round_trip(TaskSpec *s) {
        Task *t = NULL, *u = NULL;
        char *error = NULL;

        if (task_new(&t, "0123456789ab") < 0 || task_new(&u, "0123456789ab") < 0)
                abort();
        t->owner = 1000;
        if (free_and_strdup(&t->reason, "") < 0)
                abort();
        t->spec = *s;
        t->spec.repository_fd = -EBADF;
        json_object *j = task_to_json(t), *j2 = NULL;
        FUZZ_CHECK(j, "stored");
        int r = task_from_json(u, j, &error);
        FUZZ_CHECK(r == 0, "a validated spec loads again: %s\n%s", strempty(error), json_to_line(j));
        j2 = task_to_json(u);
        FUZZ_CHECK(streq(json_to_line(j), json_to_line(j2)), "the same spec after the state file");
        FUZZ_CHECK(u->spec.submodules == s->submodules && u->spec.n_extra_limits == s->n_extra_limits &&
                   memcmp(u->spec.limits, s->limits, sizeof(s->limits)) == 0, "limits survive");
        /* The spec goes back to its owner, t must not free it. */
        task_spec_init(&t->spec);
        task_free(t);
        task_free(u);
        json_object_put(j);
        json_object_put(j2);
        free(error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        FuzzInput in = { .data = data, .size = size };
        TaskSpec spec;
        int r;

        if (size > 64 * 1024)
                return -1;
        if (sd_bus_message_new_method_call(bus, &m, "org.agentfab.Factory1", "/org/agentfab/Factory1",
                                           "org.agentfab.Factory1", "SubmitTask") < 0)
                abort();
        r = sd_bus_message_open_container(m, 'a', "{sv}");
        for (unsigned n = 0; r >= 0 && !fuzz_eof(&in) && n < 64; n++) {
                char *key = key_from(&in, keys, ELEMENTSOF(keys));
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", key);
                if (r >= 0)
                        r = append_value(m, &in);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                free(key);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        /* Strings that are not UTF-8 and the like: D-Bus would not carry them. */
        if (r < 0 || sd_bus_message_seal(m, 1, 0) < 0 || sd_bus_message_rewind(m, true) < 0)
                goto out;

        task_spec_init(&spec);
        r = task_spec_from_message(&spec, m, &error);
        if (r >= 0)
                r = task_spec_validate(&spec, &error);
        if (r < 0)
                FUZZ_CHECK(r == -ENOMEM || (sd_bus_error_is_set(&error) && error.message),
                           "refusal %d (%s) carries an error for the caller", r, strerror(-r));
        else {
                spec_bounds(&spec);
                spec_round_trip(&spec);
        }
        task_spec_done(&spec);
out:
        sd_bus_error_free(&error);
        sd_bus_message_unref(m);
        return 0;
}
