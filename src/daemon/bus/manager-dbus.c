/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pwd.h>
#include <stdio.h>

#include "access.h"
#include "agent.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "bus-server.h"
#include "cache.h"
#include "environment-identity.h"
#include "fleet-dbus.h"
#include "fleet-task-dbus.h"
#include "fs-util.h"
#include "log.h"
#include "profiles-dbus.h"
#include "repository.h"
#include "string-util.h"
#include "submission.h"
#include "task-branch.h"
#include "task-spec-dbus.h"
#include "task-store.h"
#include "usage-dbus.h"

#define AGENTFAB_VERSION_STRING PROJECT_VERSION

static const sd_bus_error_map agentfab_errors[] = {
        SD_BUS_ERROR_MAP(AGENTFAB_ERROR_INVALID_SPEC,   EINVAL),
        SD_BUS_ERROR_MAP(AGENTFAB_ERROR_NO_SUCH_TASK,   ENOENT),
        SD_BUS_ERROR_MAP(AGENTFAB_ERROR_BAD_STATE,      EBUSY),
        SD_BUS_ERROR_MAP(AGENTFAB_ERROR_QUOTA_EXCEEDED, EDQUOT),
        SD_BUS_ERROR_MAP(AGENTFAB_ERROR_STATE_BROKEN,   EROFS),
        SD_BUS_ERROR_MAP(AGENTFAB_ERROR_CANNOT_FREEZE,  EOPNOTSUPP),
        SD_BUS_ERROR_MAP_END
};

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        (void) bus, (void) path, (void) interface, (void) property, (void) userdata, (void) error;
        return sd_bus_message_append(reply, "s", AGENTFAB_VERSION_STRING);
}

static int property_get_active_tasks(sd_bus *bus, const char *path, const char *interface, const char *property,
                                     sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "u", factory_active_tasks(&((BusServer *) userdata)->manager->factory));
}


static int method_submit_task(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_free_ gid_t *caller_gids = NULL;
        _cleanup_(task_freep) Task *t = NULL;
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        _cleanup_(task_spec_done) TaskSpec spec;
        Caller caller;
        char id[AGENTFAB_TASK_ID_LEN + 1];
        int r;

        /* 1. Arguments: read and validate everything that needs no access to anything. */
        task_spec_init(&spec);
        r = task_spec_from_message(&spec, message, error);
        if (r >= 0)
                r = task_spec_validate(&spec, error);
        if (r < 0)
                return r;
        if (!model_profiles_find(&m->factory.profiles, spec.model))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "There is no model profile '%s' (see agentfab.conf(5)).",
                                         spec.model ?: MODEL_PROFILE_DEFAULT_NAME);
        if (!environments_find(&m->factory.environments, spec.environment ?: ENVIRONMENT_DEFAULT)) {
                _cleanup_free_ char *known = environments_names(&m->factory.environments);
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "There is no environment '%s'; known: %s (see agentfabctl environments).",
                                         spec.environment, strempty(known));
        }
        r = config_check_delivery(&m->factory.config, &spec, error);
        if (r < 0)
                return r;

        if (spec.replay) {
                Task *original = manager_find_task(m, spec.replay);
                uid_t uid;

                r = bus_message_get_caller(message, &uid);
                if (r < 0)
                        return r;
                /* A task one may not see does not exist, here as on the bus. */
                if (!original || !access_uid_may_view(bs, uid, sd_bus_message_get_sender(message), original))
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "There is no task '%s' to replay.", spec.replay);
                if (!task_state_is_final(original->state) || original->progress.step == 0)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Task '%s' is %s after %u steps: only a finished task that worked can be replayed.",
                                                 spec.replay, task_state_to_string(original->state), original->progress.step);
                /* The same answers only make sense on the same code: start
                 * from the commit the original started from. */
                char base[41];
                r = task_branch_base_commit(original, base);
                if (r < 0)
                        return sd_bus_error_set_errnof(error, r, "Cannot read the base commit of task '%s': %m", spec.replay);
                r = free_and_strdup(&spec.base, base);
                if (r < 0)
                        return r;
        }

        /* 2. Authorization. Nothing above had side effects: this handler may run twice. */
        r = access_verify(bs, message, NULL, "org.agentfab.submit", false, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = bus_message_get_caller_groups(message, &caller, &caller_gids);
        if (r < 0)
                return r;

        /* 3. Quotas, then the repository, checked with the caller's rights as well as ours. */
        if (manager_unfinished_tasks_of(m, caller.uid) >= m->factory.config.max_tasks_per_user)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_QUOTA_EXCEEDED,
                                         "User %u already has %u unfinished tasks (MaxTasksPerUser=%u).",
                                         (unsigned) caller.uid, m->factory.config.max_tasks_per_user, m->factory.config.max_tasks_per_user);
        if (manager_unfinished_tasks_of(m, UID_INVALID) >= m->factory.config.max_tasks)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_QUOTA_EXCEEDED,
                                         "The factory already has %u unfinished tasks (MaxTasks=%u).",
                                         m->factory.config.max_tasks, m->factory.config.max_tasks);

        /* A repository handed over as an open directory is read through it
         * only, with no check of the path: whoever could open it may use it,
         * and the daemon needs no right of its own to read it. */
        /* A URL is fetched by the daemon when the task is prepared; that is
         * where it is found readable or not, and base resolved. */
        /* SECURITY: an ssh:// URL is only ever fetched with a host key check;
         * without known hosts configured it is refused now, not at preparation. */
        if (spec.repository_fd < 0 && spec.repository && strneq(spec.repository, "ssh://", 6) && !m->factory.config.ssh_known_hosts_credential)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Repository '%s' is refused: ssh:// repositories need [Git] "
                                         "SSHKnownHostsCredential= in the daemon's configuration.", spec.repository);
        /* A local path is checked in the worker thread that makes the
         * record (submission.c): it opens a repository of any size. */
        bool check = spec.repository_fd < 0 && !task_repository_url_is_valid(spec.repository);

        /* 4. The record, durable before anybody hears of it. */
        do {
                r = task_id_generate(id);
                if (r < 0)
                        return r;
        } while (manager_find_task(m, id) || submission_has_id(bs, id));

        r = task_new(&t, id);
        if (r < 0)
                return r;
        t->spec = spec;
        task_spec_init(&spec); /* moved into t */
        t->owner = caller.uid;
        t->created_usec = t->updated_usec = now_usec();
        t->tasks_fd = m->factory.tasks_fd;

        /* The fd does not outlive this call (nor a restart of the daemon):
         * the task's own repository is made from it, in a worker thread,
         * and the call answered when that is done. So with every other
         * submission: the record's fsyncs are no work for the loop. */
        /* A host of a fleet queues it for whichever host claims it (fleet-dbus.c). */
        if (m->fleet)
                return fleet_dbus_submit(bs, message, TAKE_PTR(t), error);

        r = submission_start(bs, message, TAKE_PTR(t), check ? &caller : NULL, error);
        return r < 0 ? r : 1;
}

int manager_submit_finish(BusServer *bs, sd_bus_message *message, Task *t) {
        _cleanup_free_ char *path = NULL;
        int r;

        /* 5. Audit, announce, reply. */
        r = manager_add_submitted(bs->manager, t);
        if (r < 0)
                return r;
        (void) manager_bus_send_state_changed(bs, t);

        path = task_object_path(t);
        if (!path)
                return -ENOMEM;
        return sd_bus_reply_method_return(message, "so", t->id, path);
}

/* The answer of ListTasks() and ListTasksFiltered(): one entry per task
 * the caller may see, thousands of them in a busy factory, appended field
 * by field (no format string to parse for each), the path made in place
 * rather than allocated. Seeing others' tasks is org.agentfab.manage.
 * Listing never prompts: without the grant (kept for the connection that
 * got it from GetTask()), a caller simply sees their own tasks. */
static int reply_task_list(BusServer *bs, sd_bus_message *message, Task *const *tasks, size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char path[(sizeof(AGENTFAB_TASK_PATH_PREFIX) - 1) + 1 + AGENTFAB_TASK_ID_LEN + 1] = AGENTFAB_TASK_PATH_PREFIX "/";
        uint64_t bytes = 256;   /* the header */
        uid_t uid;
        bool all;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        all = access_uid_sees_all(bs, uid, sd_bus_message_get_sender(message));

        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(sso)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                Task *t = tasks[i];

                if (!all && t->owner != uid)
                        continue;
                if (strlen(t->id) != AGENTFAB_TASK_ID_LEN)
                        return -EINVAL;
                memcpy(path + (sizeof(AGENTFAB_TASK_PATH_PREFIX) - 1) + 1, t->id, AGENTFAB_TASK_ID_LEN + 1);
                r = sd_bus_message_open_container(reply, SD_BUS_TYPE_STRUCT, "sso");
                if (r >= 0)
                        r = sd_bus_message_append_basic(reply, SD_BUS_TYPE_STRING, t->id);
                if (r >= 0)
                        r = sd_bus_message_append_basic(reply, SD_BUS_TYPE_STRING, task_state_to_string(t->state));
                if (r >= 0)
                        r = sd_bus_message_append_basic(reply, SD_BUS_TYPE_OBJECT_PATH, path);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                if (r < 0)
                        return r;
                bytes += 8 + bus_outbox_string_size(t->id) + bus_outbox_string_size(task_state_to_string(t->state)) +
                         bus_outbox_string_size(path);
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        /* Its size is the factory's: counted against the caller's share
         * until the bus takes it. */
        return bus_server_send_counted(bs, reply, bytes);
}

static int method_list_tasks(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        BusServer *bs = userdata;
        Manager *m = bs->manager;

        (void) error;
        return reply_task_list(bs, message, m->factory.tasks, m->factory.n_tasks);
}

/* As systemd's ListUnitsFiltered(): the tasks in the states named, an
 * empty list meaning all. It walks the tasks of those states only (the
 * manager keeps them by state, task-index.h), so a client that asks many
 * times a second for what is not finished does not pay for the thousands
 * of finished tasks a factory keeps. */
static int method_list_tasks_filtered(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_free_ Task **tasks = NULL;
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        TaskStateMask states = 0;
        const char *name;
        size_t n = 0, n_names = 0;
        int r;

        /* Read in place, nothing allocated for each name: a caller may send
         * as many as a message holds. */
        r = sd_bus_message_enter_container(message, SD_BUS_TYPE_ARRAY, "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read_basic(message, SD_BUS_TYPE_STRING, &name)) > 0) {
                n_names++;
                if (task_state_mask_add_name(&states, name) >= 0)
                        continue;
                /* The caller's own string, said back only when it is short
                 * and plain. */
                bool plain = strlen(name) <= 32;
                for (const char *c = name; plain && *c; c++)
                        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                                *c == '-' || *c == '_';
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown task state%s%s%s; the states are queued, preparing, running, "
                                         "awaiting-approval, delivering, paused, succeeded, failed and cancelled.",
                                         plain ? " '" : "", plain ? name : "", plain ? "'" : "");
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(message);
        if (r < 0)
                return r;
        if (n_names == 0)
                states = TASK_STATE_MASK_ALL;

        if (states == TASK_STATE_MASK_ALL)
                return reply_task_list(bs, message, m->factory.tasks, m->factory.n_tasks);
        r = factory_tasks_in_states(&m->factory, states, &tasks, &n);
        if (r < 0)
                return r;
        return reply_task_list(bs, message, tasks, n);
}

static int method_get_task(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        const char *id;
        Task *t;
        int r;

        r = sd_bus_message_read(message, "s", &id);
        if (r < 0)
                return r;

        t = manager_find_task(m, id);
        if (!t)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_NO_SUCH_TASK, "No task '%s'.", id);

        r = access_caller_may_view(bs, message, t);
        if (r < 0)
                return r;
        if (r == 0) {
                r = access_verify(bs, message, t, "org.agentfab.manage", true, error);
                if (r < 0)
                        return r;
                if (r == 0)
                        return 1;
                r = sd_bus_track_add_sender(bs->viewers, message);
                if (r < 0)
                        return r;
        }

        path = task_object_path(t);
        if (!path)
                return -ENOMEM;
        return sd_bus_reply_method_return(message, "o", path);
}

/* The environments a task may name: anyone may list them (they say what
 * the administrator offers, nothing of anybody's tasks). */
static int method_list_environments(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusServer *bs = userdata;
        Manager *m = bs->manager;
        int r;

        (void) error;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(sssss)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->factory.environments.n; i++) {
                const Environment *e = m->factory.environments.list + i;
                _cleanup_free_ char *identity = NULL, *caches = NULL;
                char *names[_CACHE_KIND_MAX + 1] = {};
                size_t n = 0;

                if (environment_identity(e, &identity) < 0)
                        identity = NULL;   /* a broken image: listed, and its tasks fail with the reason */
                for (CacheKind k = 0; k < _CACHE_KIND_MAX; k++)
                        if (e->caches & (1U << k))
                                names[n++] = (char *) cache_kind_to_string(k);
                caches = strv_join(names, " ");
                if (!caches)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "(sssss)", e->name, strempty(e->image),
                                          identity ?: "(the image cannot be read)",
                                          network_mode_to_string(e->network), caches);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ActiveTasks", "u", property_get_active_tasks, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("SubmitTask",
                                SD_BUS_ARGS("a{sv}", spec),
                                SD_BUS_RESULT("s", id, "o", task),
                                method_submit_task,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListTasks",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sso)", tasks),
                                method_list_tasks,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListFleetTasks",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(ssstst)", tasks),
                                method_list_fleet_tasks,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ExportFleetTask",
                                SD_BUS_ARGS("s", id, "s", format),
                                SD_BUS_RESULT("h", fd),
                                method_export_fleet_task,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetFleetTask",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("a{sv}", status),
                                method_get_fleet_task,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetFleetOutput",
                                SD_BUS_ARGS("s", id, "s", name),
                                SD_BUS_RESULT("s", content),
                                method_get_fleet_output,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("PostFleetRequest",
                                SD_BUS_ARGS("s", id, "s", kind, "a{sv}", options),
                                SD_BUS_RESULT("t", request),
                                method_post_fleet_request,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListTasksFiltered",
                                SD_BUS_ARGS("as", states),
                                SD_BUS_RESULT("a(sso)", tasks),
                                method_list_tasks_filtered,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetTask",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("o", task),
                                method_get_task,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListEnvironments",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sssss)", environments),
                                method_list_environments,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListModelProfiles",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sa{sv})", profiles),
                                method_list_model_profiles,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListCaches",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(stt)", caches),
                                method_list_caches,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ClearCache",
                                SD_BUS_ARGS("s", environment),
                                SD_BUS_RESULT("a(stt)", caches),
                                method_clear_cache,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetUsage",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("a(ua{sv})", usage),
                                method_get_usage,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("TaskStateChanged",
                                SD_BUS_ARGS("s", id, "s", state),
                                0),
        SD_BUS_VTABLE_END
};

int manager_bus_send_state_changed(BusServer *bs, Task *t) {
        if (!bs->bus)
                return 0;
        return sd_bus_emit_signal(bs->bus, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                  "TaskStateChanged", "ss", t->id, task_state_to_string(t->state));
}

void manager_bus_send_active_tasks(BusServer *bs) {
        if (bs->bus)
                (void) sd_bus_emit_properties_changed(bs->bus, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                                      "ActiveTasks", NULL);
}

int manager_bus_register(BusServer *bs) {
        int r;

        r = sd_bus_error_add_map(agentfab_errors);
        if (r < 0)
                return r;
        return sd_bus_add_object_vtable(bs->bus, NULL, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                        manager_vtable, bs);
}
