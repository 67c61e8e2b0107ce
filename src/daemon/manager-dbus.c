/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pwd.h>
#include <stdio.h>

#include "agent-loop.h"
#include "cache.h"
#include "environment-identity.h"
#include "task-ledger.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "fs-util.h"
#include "log.h"
#include "manager.h"
#include "submission.h"
#include "repository.h"
#include "string-util.h"
#include "task-store.h"

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

/* dbus-daemon does not put the sender's credentials on a message, so asking
 * for them is a synchronous call to the bus on our event loop, for every
 * call we serve. A connection's uid never changes, and a unique name is
 * never given twice by one bus instance (its id tells instances apart): the
 * answers are kept in a small table, where a newcomer simply evicts
 * whoever shared its slot. */
#define CALLER_CACHE_SIZE 256U
#define CALLER_NAME_MAX 48U
#define CALLER_GIDS_MAX 32U     /* more supplementary groups: asked every time */

typedef struct CallerEntry {
        sd_id128_t bus_id;
        char name[CALLER_NAME_MAX];
        uid_t uid;
        bool groups;            /* gid and gids known too (get_caller_groups()) */
        gid_t gid;
        unsigned n_gids;
        gid_t gids[CALLER_GIDS_MAX];
} CallerEntry;

static CallerEntry caller_cache[CALLER_CACHE_SIZE];

static CallerEntry *caller_slot(const char *name) {
        uint32_t h = 2166136261U;

        for (const char *c = name; *c; c++)
                h = (h ^ (uint8_t) *c) * 16777619U;
        return &caller_cache[h % CALLER_CACHE_SIZE];
}

/* The slot for the sender of message, if it can be cached; *ret_hit says
 * whether the slot holds that sender already. */
static CallerEntry *caller_lookup(sd_bus_message *message, sd_id128_t *ret_bus_id, bool *ret_hit) {
        const char *sender = sd_bus_message_get_sender(message);
        CallerEntry *e;

        *ret_hit = false;
        if (!sender || sender[0] != ':' || strlen(sender) >= CALLER_NAME_MAX ||
            sd_bus_get_bus_id(sd_bus_message_get_bus(message), ret_bus_id) < 0 || sd_id128_is_null(*ret_bus_id))
                return NULL;
        e = caller_slot(sender);
        *ret_hit = sd_id128_equal(e->bus_id, *ret_bus_id) && streq(e->name, sender);
        return e;
}

int bus_message_get_caller(sd_bus_message *message, uid_t *ret_uid) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        sd_id128_t bus_id;
        CallerEntry *e;
        bool hit;
        uid_t uid;
        int r;

        e = caller_lookup(message, &bus_id, &hit);
        if (hit) {
                *ret_uid = e->uid;
                return 0;
        }

        r = sd_bus_query_sender_creds(message, SD_BUS_CREDS_EUID | SD_BUS_CREDS_AUGMENT, &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;
        if (e) {
                *e = (CallerEntry) { .bus_id = bus_id, .uid = uid };
                strcpy(e->name, sd_bus_message_get_sender(message));
        }
        *ret_uid = uid;
        return 0;
}

/* On the session bus there is no polkit: the daemon's own user (and root) may do everything. */
static bool session_caller_trusted(Manager *m, uid_t uid) {
        return m->bus_kind == BUS_SESSION && (uid == 0 || uid == getuid());
}

/* Whether uid (the sender) sees every task, not only its own: root, and
 * a connection that passed org.agentfab.manage (GetTask()). */
static bool manager_uid_sees_all(Manager *m, uid_t uid, const char *sender) {
        if (uid == 0 || session_caller_trusted(m, uid))
                return true;
        return sender && sd_bus_track_count_name(m->viewers, sender) > 0;
}

bool manager_uid_may_view(Manager *m, uid_t uid, const char *sender, Task *t) {
        return uid == t->owner || manager_uid_sees_all(m, uid, sender);
}

int manager_caller_may_view(Manager *m, sd_bus_message *message, Task *t) {
        uid_t uid;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        return manager_uid_may_view(m, uid, sd_bus_message_get_sender(message), t);
}

int manager_verify_access(Manager *m, sd_bus_message *message, Task *t, const char *action,
                          bool owner_ok, sd_bus_error *error) {
        _cleanup_free_ char *owner = NULL, *goal = NULL, *owner_name = NULL;
        uid_t uid;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        if (uid == 0 || session_caller_trusted(m, uid))
                return 1;
        if (owner_ok && t && uid == t->owner)
                return 1;
        if (m->bus_kind != BUS_SYSTEM)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Access denied.");

        /* Name the task, its owner, its goal and the breaker that stopped
         * it, so that a prompt says what is approved (the approve action's
         * message shows them: $(task), $(owner_name), $(breaker)). */
        if (t && (asprintf(&owner, "%u", (unsigned) t->owner) < 0 ||
                  !(goal = strshorten_line(strempty(t->spec.goal), 200))))
                return -ENOMEM;
        if (t) {
                struct passwd *pw = getpwuid(t->owner);
                owner_name = pw && string_is_safe(pw->pw_name, false) ? strdup(pw->pw_name) : strdup(owner);
                if (!owner_name)
                        return -ENOMEM;
        }
        const char *details[] = {
                "task", t ? t->id : NULL,
                "owner", owner,
                "owner_name", owner_name,
                "goal", goal,
                "reason", t ? t->reason : NULL,
                "breaker", t ? t->progress.breaker ?: "none" : NULL,
                /* What is asked, so that a rule can grant one thing only:
                 * e.g. seeing (GetTask) a task that waits for approval. */
                "method", t ? strempty(sd_bus_message_get_member(message)) : NULL,
                "state", t ? task_state_to_string(t->state) : NULL,
                NULL
        };

        /* SECURITY: only submit's yes may be kept a moment for the caller's
         * connection (bus-polkit.h): it names no task, any local user has it
         * by default, and a busy client submits many times a second. manage
         * and approve are auth_admin_keep: polkitd is asked every time. */
        PolkitFlags flags = !t && streq(action, "org.agentfab.submit") ? POLKIT_KEEP : 0;

        r = bus_verify_polkit_async_full(message, uid, action, t ? details : NULL, flags, &m->polkit, error);
        if (r < 0 && (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) ||
                      sd_bus_error_has_name(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED)))
                audit_denied(t ? t->id : NULL, action, uid);
        return r;
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        (void) bus, (void) path, (void) interface, (void) property, (void) userdata, (void) error;
        return sd_bus_message_append(reply, "s", AGENTFAB_VERSION_STRING);
}

static int property_get_active_tasks(sd_bus *bus, const char *path, const char *interface, const char *property,
                                     sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "u", manager_active_tasks(userdata));
}

static gid_t *memdup_gids(const gid_t *gids, size_t n) {
        gid_t *copy = calloc(n, sizeof(gid_t));

        if (copy)
                memcpy(copy, gids, n * sizeof(gid_t));
        return copy;
}

/* The caller's uid, gid and supplementary groups, for the checks of a
 * repository's permissions; kept with the uid (above), so that a busy
 * client's submissions do not each wait for the bus. *ret_gids is the
 * caller's to free; ret->gids points into it. */
static int get_caller_groups(sd_bus_message *message, Caller *ret, gid_t **ret_gids) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        _cleanup_free_ gid_t *copy = NULL;
        const gid_t *gids = NULL;
        sd_id128_t bus_id;
        CallerEntry *e;
        bool hit;
        int r, n;

        e = caller_lookup(message, &bus_id, &hit);
        if (hit && e->groups) {
                *ret = (Caller) { .uid = e->uid, .gid = e->gid, .n_gids = e->n_gids };
                if (e->n_gids > 0) {
                        copy = memdup_gids(e->gids, e->n_gids);
                        if (!copy)
                                return -ENOMEM;
                }
                ret->gids = copy;
                *ret_gids = TAKE_PTR(copy);
                return 0;
        }

        r = sd_bus_query_sender_creds(message,
                                      SD_BUS_CREDS_EUID | SD_BUS_CREDS_EGID | SD_BUS_CREDS_SUPPLEMENTARY_GIDS | SD_BUS_CREDS_AUGMENT,
                                      &creds);
        if (r < 0)
                return r;
        *ret = (Caller) {};
        r = sd_bus_creds_get_euid(creds, &ret->uid);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_egid(creds, &ret->gid);
        if (r < 0)
                return r;
        n = sd_bus_creds_get_supplementary_gids(creds, &gids);
        if (n < 0 && n != -ENODATA)
                return n;
        if (n > 0) {
                copy = memdup_gids(gids, (size_t) n);
                if (!copy)
                        return -ENOMEM;
        }
        ret->gids = copy;
        ret->n_gids = n > 0 ? (size_t) n : 0;

        if (e && ret->n_gids <= CALLER_GIDS_MAX) {
                *e = (CallerEntry) { .bus_id = bus_id, .uid = ret->uid, .groups = true, .gid = ret->gid,
                                     .n_gids = (unsigned) ret->n_gids };
                strcpy(e->name, sd_bus_message_get_sender(message));
                if (ret->n_gids > 0)
                        memcpy(e->gids, copy, ret->n_gids * sizeof(gid_t));
        }
        *ret_gids = TAKE_PTR(copy);
        return 0;
}

/* Where a task may deliver to, as the configuration has it. Checked at
 * submission, and again at delivery (the configuration may have changed). */
int manager_check_delivery(const Config *c, const TaskSpec *spec, sd_bus_error *error) {
        const ForgeConfig *f = NULL;

        if (spec->forge) {
                f = config_find_forge(c, spec->forge);
                if (!f)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "There is no forge '%s' (see [Forge] in agentfab.conf(5)).", spec->forge);
        }
        if (!spec->push_url)
                return 0;

        /* SECURITY: a file:// URL would have the daemon write into any
         * repository its user can write, its own task ledgers included:
         * only where the administrator allowed it for the forge named,
         * which is meant for tests. */
        if (strneq(spec->push_url, "file://", 7)) {
                if (!f || !f->allow_file_urls)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Push URL '%s' is refused: only https:// push URLs are accepted%s.",
                                                 spec->push_url, f ? " (the forge does not set AllowFileURLs=yes)" : "");
                return 0;
        }
        if (!forge_push_url_is_valid(spec->push_url, false))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Push URL '%s' is refused: only https:// push URLs are accepted.", spec->push_url);

        /* SECURITY: the forge's token goes with the push: only to the
         * forge's own host, never to one a submitter names. */
        if (f && f->token_credential && !forge_push_url_matches_api(f->api, spec->push_url))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "Push URL '%s' is not on the host of forge '%s': its token goes to that host only.",
                                         spec->push_url, f->name);
        return 0;
}

static int method_submit_task(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_free_ gid_t *caller_gids = NULL;
        _cleanup_(task_freep) Task *t = NULL;
        Manager *m = userdata;
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
        if (!model_profiles_find(&m->profiles, spec.model))
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "There is no model profile '%s' (see agentfab.conf(5)).",
                                         spec.model ?: MODEL_PROFILE_DEFAULT_NAME);
        if (!environments_find(&m->environments, spec.environment ?: ENVIRONMENT_DEFAULT)) {
                _cleanup_free_ char *known = environments_names(&m->environments);
                return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                         "There is no environment '%s'; known: %s (see agentfabctl environments).",
                                         spec.environment, strempty(known));
        }
        r = manager_check_delivery(&m->config, &spec, error);
        if (r < 0)
                return r;

        if (spec.replay) {
                Task *original = manager_find_task(m, spec.replay);
                uid_t uid;

                r = bus_message_get_caller(message, &uid);
                if (r < 0)
                        return r;
                /* A task one may not see does not exist, here as on the bus. */
                if (!original || !manager_uid_may_view(m, uid, sd_bus_message_get_sender(message), original))
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "There is no task '%s' to replay.", spec.replay);
                if (!task_state_is_final(original->state) || original->progress.step == 0)
                        return sd_bus_error_setf(error, AGENTFAB_ERROR_INVALID_SPEC,
                                                 "Task '%s' is %s after %u steps: only a finished task that worked can be replayed.",
                                                 spec.replay, task_state_to_string(original->state), original->progress.step);
                /* The same answers only make sense on the same code: start
                 * from the commit the original started from. */
                char base[41];
                r = task_ledger_base_commit(original, base);
                if (r < 0)
                        return sd_bus_error_set_errnof(error, r, "Cannot read the base commit of task '%s': %m", spec.replay);
                r = free_and_strdup(&spec.base, base);
                if (r < 0)
                        return r;
        }

        /* 2. Authorization. Nothing above had side effects: this handler may run twice. */
        r = manager_verify_access(m, message, NULL, "org.agentfab.submit", false, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = get_caller_groups(message, &caller, &caller_gids);
        if (r < 0)
                return r;

        /* 3. Quotas, then the repository, checked with the caller's rights as well as ours. */
        if (manager_unfinished_tasks_of(m, caller.uid) >= m->config.max_tasks_per_user)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_QUOTA_EXCEEDED,
                                         "User %u already has %u unfinished tasks (MaxTasksPerUser=%u).",
                                         (unsigned) caller.uid, m->config.max_tasks_per_user, m->config.max_tasks_per_user);
        if (manager_unfinished_tasks_of(m, UID_INVALID) >= m->config.max_tasks)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_QUOTA_EXCEEDED,
                                         "The factory already has %u unfinished tasks (MaxTasks=%u).",
                                         m->config.max_tasks, m->config.max_tasks);

        /* A repository handed over as an open directory is read through it
         * only, with no check of the path: whoever could open it may use it,
         * and the daemon needs no right of its own to read it. */
        /* A URL is fetched by the daemon when the task is prepared; that is
         * where it is found readable or not, and base resolved. */
        /* SECURITY: an ssh:// URL is only ever fetched with a host key check;
         * without known hosts configured it is refused now, not at preparation. */
        if (spec.repository_fd < 0 && spec.repository && strneq(spec.repository, "ssh://", 6) && !m->config.ssh_known_hosts_credential)
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
        } while (manager_find_task(m, id) || submission_has_id(m, id));

        r = task_new(&t, id);
        if (r < 0)
                return r;
        t->spec = spec;
        task_spec_init(&spec); /* moved into t */
        t->owner = caller.uid;
        t->created_usec = t->updated_usec = now_usec();
        t->tasks_fd = m->tasks_fd;

        /* The fd does not outlive this call (nor a restart of the daemon):
         * the task's own repository is made from it, in a worker thread,
         * and the call answered when that is done. So with every other
         * submission: the record's fsyncs are no work for the loop. */
        r = submission_start(m, message, TAKE_PTR(t), check ? &caller : NULL, error);
        return r < 0 ? r : 1;
}

int manager_submit_finish(Manager *m, sd_bus_message *message, Task *t) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = manager_add_task(m, t);
        if (r < 0) {
                task_free(t);
                return r;
        }

        /* 5. Audit, announce, reply. */
        audit_task_submitted(t, t->owner);
        (void) manager_bus_send_state_changed(m, t);
        manager_update_status(m);

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
static int reply_task_list(Manager *m, sd_bus_message *message, Task *const *tasks, size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char path[(sizeof(AGENTFAB_TASK_PATH_PREFIX) - 1) + 1 + AGENTFAB_TASK_ID_LEN + 1] = AGENTFAB_TASK_PATH_PREFIX "/";
        uid_t uid;
        bool all;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        all = manager_uid_sees_all(m, uid, sd_bus_message_get_sender(message));

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
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_list_tasks(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;

        (void) error;
        return reply_task_list(m, message, m->tasks, m->n_tasks);
}

/* As systemd's ListUnitsFiltered(): the tasks in the states named, an
 * empty list meaning all. It walks the tasks of those states only (the
 * manager keeps them by state, task-index.h), so a client that asks many
 * times a second for what is not finished does not pay for the thousands
 * of finished tasks a factory keeps. */
static int method_list_tasks_filtered(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_free_ Task **tasks = NULL;
        Manager *m = userdata;
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
                return reply_task_list(m, message, m->tasks, m->n_tasks);
        r = manager_tasks_in_states(m, states, &tasks, &n);
        if (r < 0)
                return r;
        return reply_task_list(m, message, tasks, n);
}

static int method_get_task(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        Manager *m = userdata;
        const char *id;
        Task *t;
        int r;

        r = sd_bus_message_read(message, "s", &id);
        if (r < 0)
                return r;

        t = manager_find_task(m, id);
        if (!t)
                return sd_bus_error_setf(error, AGENTFAB_ERROR_NO_SUCH_TASK, "No task '%s'.", id);

        r = manager_caller_may_view(m, message, t);
        if (r < 0)
                return r;
        if (r == 0) {
                r = manager_verify_access(m, message, t, "org.agentfab.manage", true, error);
                if (r < 0)
                        return r;
                if (r == 0)
                        return 1;
                r = sd_bus_track_add_sender(m->viewers, message);
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
        Manager *m = userdata;
        int r;

        (void) error;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, SD_BUS_TYPE_ARRAY, "(sssss)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->environments.n; i++) {
                const Environment *e = m->environments.list + i;
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
        SD_BUS_SIGNAL_WITH_ARGS("TaskStateChanged",
                                SD_BUS_ARGS("s", id, "s", state),
                                0),
        SD_BUS_VTABLE_END
};

int manager_bus_send_state_changed(Manager *m, Task *t) {
        if (!m->bus)
                return 0;
        return sd_bus_emit_signal(m->bus, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                  "TaskStateChanged", "ss", t->id, task_state_to_string(t->state));
}

int manager_bus_register(Manager *m) {
        int r;

        r = sd_bus_error_add_map(agentfab_errors);
        if (r < 0)
                return r;
        return sd_bus_add_object_vtable(m->bus, NULL, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                        manager_vtable, m);
}
