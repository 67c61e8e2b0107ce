/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pwd.h>
#include <stdio.h>
#include <unistd.h>

#include "access.h"
#include "agentfab-bus.h"
#include "audit.h"
#include "bus-server.h"
#include "string-util.h"

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
static bool session_caller_trusted(BusServer *bs, uid_t uid) {
        return bs->kind == BUS_SESSION && (uid == 0 || uid == getuid());
}

/* Whether uid (the sender) sees every task, not only its own: root, and
 * a connection that passed org.agentfab.manage (GetTask()). */
bool access_uid_sees_all(BusServer *bs, uid_t uid, const char *sender) {
        if (uid == 0 || session_caller_trusted(bs, uid))
                return true;
        return sender && sd_bus_track_count_name(bs->viewers, sender) > 0;
}

bool access_uid_may_view(BusServer *bs, uid_t uid, const char *sender, Task *t) {
        return uid == t->owner || access_uid_sees_all(bs, uid, sender);
}

int access_caller_may_view(BusServer *bs, sd_bus_message *message, Task *t) {
        uid_t uid;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        return access_uid_may_view(bs, uid, sd_bus_message_get_sender(message), t);
}

int access_verify(BusServer *bs, sd_bus_message *message, Task *t, const char *action,
                  bool owner_ok, sd_bus_error *error) {
        _cleanup_free_ char *owner = NULL, *goal = NULL, *owner_name = NULL;
        uid_t uid;
        int r;

        r = bus_message_get_caller(message, &uid);
        if (r < 0)
                return r;
        if (uid == 0 || session_caller_trusted(bs, uid))
                return 1;
        if (owner_ok && t && uid == t->owner)
                return 1;
        if (bs->kind != BUS_SYSTEM)
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

        r = bus_verify_polkit_async_full(message, uid, action, t ? details : NULL, flags, &bs->polkit, error);
        if (r < 0 && (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) ||
                      sd_bus_error_has_name(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED)))
                audit_denied(t ? t->id : NULL, action, uid);
        return r;
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
int bus_message_get_caller_groups(sd_bus_message *message, Caller *ret, gid_t **ret_gids) {
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
