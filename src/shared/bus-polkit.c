/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "bus-polkit.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

typedef struct PolkitQuery PolkitQuery;

/* At most this many checks are sent to polkitd and not yet answered; the
 * others wait here, in order. dbus-daemon lets a connection have 128 calls
 * without an answer (max_replies_per_connection) and fails the next one at
 * once: unbounded, a burst of submissions from many callers would be denied
 * with "authorization service not available" while polkitd is merely busy.
 * An interactive check (a person may take minutes) is always sent at once. */
#define POLKIT_SENT_MAX 32U
/* Beyond this many waiting, a call is refused with LimitsExceeded. */
#define POLKIT_WAITING_MAX 4096U
/* A yes to a POLKIT_KEEP check is remembered this long for the connection
 * that got it, and for at most this many connections. */
#define POLKIT_KEEP_USEC (1U * USEC_PER_SEC)
#define POLKIT_KEPT_MAX 64U

struct PolkitQuery {
        PolkitRegistry *registry;
        sd_bus_message *request;   /* the call being authorized, re-queued when answered */
        char *action;
        sd_bus_message *check;     /* the CheckAuthorization call while it waits to be sent */
        sd_bus_slot *slot;         /* the pending CheckAuthorization, NULL once answered */
        uint64_t generation;       /* the registry's when it was sent */
        bool keep;
        bool interactive;
        bool answered;
        bool authorized;
        bool challenge;
        bool plain;                /* authorized with no details: no temporary authorization */
        char *error_name;          /* polkit could not be asked: name of the D-Bus error */
        PolkitQuery *next;
};

typedef struct PolkitKept {
        char *sender;              /* a unique bus name: never given to another connection */
        char *action;
        uint64_t until;            /* CLOCK_MONOTONIC */
} PolkitKept;

struct PolkitRegistry {
        sd_bus *bus;
        PolkitQuery *queries;      /* oldest first */
        unsigned n_sent, n_waiting;

        PolkitKept kept[POLKIT_KEPT_MAX];
        /* Bumped whenever polkitd says its answers may have changed: an
         * answer to a question sent before is not kept. */
        uint64_t generation;
        sd_bus_slot *changed_slot, *owner_slot;
        unsigned watching;         /* matches installed: both are needed before anything is kept */
        uint64_t keep_usec;
};

/* How long a yes is kept: POLKIT_KEEP_USEC, or for tests and measurements
 * AGENTFAB_POLKIT_KEEP_SEC from the service's environment, 0 (never) to 10. */
static uint64_t keep_usec_from_env(void) {
        const char *e = secure_getenv("AGENTFAB_POLKIT_KEEP_SEC");
        char *end;
        unsigned long v;

        if (!e)
                return POLKIT_KEEP_USEC;
        errno = 0;
        v = strtoul(e, &end, 10);
        if (errno != 0 || end == e || *end != '\0' || v > 10) {
                log_warning("Ignoring AGENTFAB_POLKIT_KEEP_SEC='%s': not a number of seconds from 0 to 10.", e);
                return POLKIT_KEEP_USEC;
        }
        return v * USEC_PER_SEC;
}

static PolkitQuery *polkit_query_free(PolkitQuery *q) {
        if (!q)
                return NULL;
        sd_bus_slot_unref(q->slot);
        sd_bus_message_unref(q->check);
        sd_bus_message_unref(q->request);
        free(q->action);
        free(q->error_name);
        free(q);
        return NULL;
}

static void registry_remove(PolkitRegistry *reg, PolkitQuery *q) {
        for (PolkitQuery **i = &reg->queries; *i; i = &(*i)->next)
                if (*i == q) {
                        *i = q->next;
                        return;
                }
}

static void registry_forget(PolkitRegistry *reg) {
        for (size_t i = 0; i < POLKIT_KEPT_MAX; i++) {
                free(reg->kept[i].sender);
                free(reg->kept[i].action);
                reg->kept[i] = (PolkitKept) {};
        }
        reg->generation++;
}

PolkitRegistry *polkit_registry_free(PolkitRegistry *reg) {
        if (!reg)
                return NULL;
        while (reg->queries) {
                PolkitQuery *q = reg->queries;
                reg->queries = q->next;
                polkit_query_free(q);
        }
        registry_forget(reg);
        sd_bus_slot_unref(reg->changed_slot);
        sd_bus_slot_unref(reg->owner_slot);
        sd_bus_unref(reg->bus);
        free(reg);
        return NULL;
}

size_t polkit_registry_pending(PolkitRegistry *reg) {
        size_t n = 0;
        for (PolkitQuery *q = reg ? reg->queries : NULL; q; q = q->next)
                n++;
        return n;
}

static bool registry_is_kept(PolkitRegistry *reg, const char *sender, const char *action) {
        uint64_t now;

        if (reg->watching < 2 || reg->keep_usec == 0)
                return false;
        now = clock_now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < POLKIT_KEPT_MAX; i++)
                if (reg->kept[i].until > now && streq(reg->kept[i].sender, sender) &&
                    streq(reg->kept[i].action, action))
                        return true;
        return false;
}

static void registry_keep(PolkitRegistry *reg, const char *sender, const char *action) {
        PolkitKept *k = &reg->kept[0];
        char *s, *a;

        /* The same connection's entry, else a free or expired one, else the oldest. */
        for (size_t i = 0; i < POLKIT_KEPT_MAX; i++) {
                if (streq_ptr(reg->kept[i].sender, sender) && streq_ptr(reg->kept[i].action, action)) {
                        k = &reg->kept[i];
                        break;
                }
                if (reg->kept[i].until < k->until)
                        k = &reg->kept[i];
        }
        s = strdup(sender);
        a = strdup(action);
        if (!s || !a) {
                free(s);
                free(a);
                return;
        }
        free(k->sender);
        free(k->action);
        *k = (PolkitKept) { .sender = s, .action = a, .until = clock_now_usec(CLOCK_MONOTONIC) + reg->keep_usec };
}

/* Whether a kept question of the same connection is with polkitd now: its
 * answer will do for this one too. */
static bool registry_is_asking(PolkitRegistry *reg, const char *sender, const char *action) {
        for (PolkitQuery *q = reg->queries; q; q = q->next)
                if (q->keep && q->slot && streq(q->action, action) &&
                    streq_ptr(sd_bus_message_get_sender(q->request), sender))
                        return true;
        return false;
}

static int on_polkit_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        PolkitRegistry *reg = userdata;

        (void) m, (void) ret_error;
        /* Rules, actions, sessions or temporary authorizations changed, or
         * polkitd came or went: nothing it said before is kept. */
        registry_forget(reg);
        return 0;
}

static int on_match_installed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        PolkitRegistry *reg = userdata;

        (void) ret_error;
        if (sd_bus_message_is_method_error(m, NULL)) {
                log_warning("Cannot watch polkitd for changes, its answers are not kept: %s",
                            sd_bus_message_get_error(m)->message ?: "unknown error");
                return 0;
        }
        reg->watching++;
        return 0;
}

static int registry_watch(PolkitRegistry *reg) {
        int r;

        if (reg->changed_slot)
                return 0;
        r = sd_bus_match_signal_async(reg->bus, &reg->changed_slot, "org.freedesktop.PolicyKit1",
                                      "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.PolicyKit1.Authority",
                                      "Changed", on_polkit_changed, on_match_installed, reg);
        if (r < 0)
                return r;
        return sd_bus_add_match_async(reg->bus, &reg->owner_slot,
                                      "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                      "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                                      "arg0='org.freedesktop.PolicyKit1'",
                                      on_polkit_changed, on_match_installed, reg);
}

/* Reads the answer: (bba{ss}). plain: authorized with no details at all,
 * i.e. not through a temporary authorization (auth_*_keep) or a challenge. */
static int parse_check_reply(sd_bus_message *reply, bool *ret_authorized, bool *ret_challenge, bool *ret_plain) {
        int authorized = 0, challenge = 0, r;

        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_STRUCT, "bba{ss}");
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
        if (r < 0)
                return r;
        *ret_authorized = authorized;
        *ret_challenge = challenge;
        if (ret_plain) {
                r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{ss}");
                if (r < 0)
                        return r;
                r = sd_bus_message_at_end(reply, false);
                if (r < 0)
                        return r;
                *ret_plain = authorized && !challenge && r > 0;
        }
        return 0;
}

static void registry_dispatch(PolkitRegistry *reg);

/* The call is run again; it will find its answer. */
static void query_requeue(PolkitQuery *q) {
        int r;

        r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(q->request), q->request);
        if (r < 0) {
                log_error_errno(r, "Failed to re-queue authorized call: %m");
                registry_remove(q->registry, q);
                polkit_query_free(q);
        }
}

static int on_check_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PolkitQuery *q = userdata;
        PolkitRegistry *reg = q->registry;
        const sd_bus_error *e;
        int r;

        (void) ret_error;

        q->slot = sd_bus_slot_unref(q->slot);
        q->answered = true;
        reg->n_sent--;

        e = sd_bus_message_get_error(reply);
        if (e) {
                log_warning("polkit check of '%s' failed, denying: %s", q->action, e->message ?: e->name);
                q->error_name = strdup(e->name ?: SD_BUS_ERROR_FAILED);
        } else {
                r = parse_check_reply(reply, &q->authorized, &q->challenge, &q->plain);
                if (r < 0) {
                        log_warning_errno(r, "Unexpected reply from polkit, denying: %m");
                        q->authorized = q->challenge = q->plain = false;
                }
        }

        /* SECURITY: kept only when asked for (the submit action), a plain yes
         * (none from a temporary authorization: auth_admin_keep always asks
         * polkitd), and nothing changed at polkitd since the question. */
        if (q->keep && q->plain && q->generation == reg->generation)
                registry_keep(reg, sd_bus_message_get_sender(q->request), q->action);

        query_requeue(q);
        registry_dispatch(reg);
        return 0;
}

static int query_send(PolkitQuery *q) {
        PolkitRegistry *reg = q->registry;
        int r;

        /* An interactive check waits for a person: give it time. */
        r = sd_bus_call_async(reg->bus, &q->slot, q->check, on_check_reply, q, 5 * 60 * USEC_PER_SEC);
        if (r < 0)
                return r;
        q->check = sd_bus_message_unref(q->check);
        q->generation = reg->generation;
        reg->n_sent++;
        return 0;
}

/* Sends what waits, in order, as far as POLKIT_SENT_MAX allows; answers
 * from what is kept where it can. */
static void registry_dispatch(PolkitRegistry *reg) {
        PolkitQuery *next;

        for (PolkitQuery *q = reg->queries; q; q = next) {
                const char *sender = sd_bus_message_get_sender(q->request);
                int r;

                next = q->next;
                if (!q->check)
                        continue;
                if (q->keep && registry_is_kept(reg, sender, q->action)) {
                        q->check = sd_bus_message_unref(q->check);
                        reg->n_waiting--;
                        q->answered = q->authorized = true;
                        query_requeue(q);
                        continue;
                }
                if (q->keep && registry_is_asking(reg, sender, q->action))
                        continue;
                if (reg->n_sent >= POLKIT_SENT_MAX)
                        break;
                reg->n_waiting--;
                r = query_send(q);
                if (r < 0) {
                        log_warning_errno(r, "Cannot ask polkit about '%s', denying: %m", q->action);
                        q->check = sd_bus_message_unref(q->check);
                        q->answered = true;
                        q->error_name = strdup(SD_BUS_ERROR_FAILED);
                        query_requeue(q);
                }
        }
}

static int append_details(sd_bus_message *m, const char **details) {
        int r;

        r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{ss}");
        if (r < 0)
                return r;
        for (const char **d = details; d && d[0] && d[1]; d += 2) {
                r = sd_bus_message_append(m, "{ss}", d[0], d[1]);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(m);
}

static int new_check_authorization(sd_bus *bus, sd_bus_message **ret) {
        return sd_bus_message_new_method_call(bus, ret,
                                              "org.freedesktop.PolicyKit1",
                                              "/org/freedesktop/PolicyKit1/Authority",
                                              "org.freedesktop.PolicyKit1.Authority",
                                              "CheckAuthorization");
}

int bus_verify_polkit_async_full(sd_bus_message *call, uid_t uid, const char *action, const char **details,
                                 PolkitFlags flags, PolkitRegistry **registry, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        PolkitRegistry *reg;
        const char *sender;
        bool keep, interactive;
        int r;

        if (uid == 0)
                return 1;

        /* The second run: the answer is there. */
        for (PolkitQuery *q = *registry ? (*registry)->queries : NULL; q; q = q->next) {
                if (q->request != call || !streq(q->action, action))
                        continue;
                if (!q->answered)
                        return 0; /* Still waiting; should not happen, but harmless. */

                bool authorized = q->authorized, challenge = q->challenge, failed = q->error_name;
                registry_remove(*registry, q);
                polkit_query_free(q);

                if (authorized)
                        return 1;
                if (challenge)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                                 "Interactive authentication required for '%s'.", action);
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         failed ? "Access denied: authorization service not available for '%s'."
                                                : "Access denied by polkit for '%s'.", action);
        }

        sender = sd_bus_message_get_sender(call);
        if (!sender || sender[0] != ':')
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Caller has no unique bus name.");

        if (!*registry) {
                *registry = calloc(1, sizeof(PolkitRegistry));
                if (!*registry)
                        return -ENOMEM;
                (*registry)->bus = sd_bus_ref(sd_bus_message_get_bus(call));
                (*registry)->keep_usec = keep_usec_from_env();
        }
        reg = *registry;

        /* SECURITY: a yes is kept only for questions without details (the
         * answer may depend on them), for the very connection that got it. */
        keep = (flags & POLKIT_KEEP) && !details && reg->keep_usec > 0;
        if (keep) {
                r = registry_watch(reg);
                if (r < 0)
                        log_warning_errno(r, "Cannot watch polkitd for changes, its answers are not kept: %m");
                if (registry_is_kept(reg, sender, action))
                        return 1;
        }

        interactive = sd_bus_message_get_allow_interactive_authorization(call) > 0;
        if (!interactive && reg->n_waiting >= POLKIT_WAITING_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "Too many authorization checks are waiting for polkit; '%s' was not asked, try again.",
                                         action);

        r = new_check_authorization(reg->bus, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "(sa{sv})s", "system-bus-name", 1, "name", "s", sender, action);
        if (r < 0)
                return r;
        r = append_details(m, details);
        if (r < 0)
                return r;
        /* Flag 1 is AllowUserInteraction: only when the caller said it may be asked. */
        r = sd_bus_message_append(m, "us", (uint32_t) interactive, "");
        if (r < 0)
                return r;

        PolkitQuery *q = calloc(1, sizeof(PolkitQuery));
        if (!q)
                return -ENOMEM;
        *q = (PolkitQuery) {
                .registry = reg,
                .request = sd_bus_message_ref(call),
                .action = strdup(action),
                .check = TAKE_PTR(m),
                .keep = keep,
                .interactive = interactive,
        };
        if (!q->action) {
                polkit_query_free(q);
                return -ENOMEM;
        }

        if (interactive || (reg->n_sent < POLKIT_SENT_MAX && !(keep && registry_is_asking(reg, sender, action)))) {
                r = query_send(q);
                if (r < 0) {
                        polkit_query_free(q);
                        return r;
                }
        } else
                reg->n_waiting++;

        PolkitQuery **i = &reg->queries;
        while (*i)
                i = &(*i)->next;
        *i = q;
        return 0;
}

int bus_verify_polkit_async(sd_bus_message *call, uid_t uid, const char *action, const char **details,
                            PolkitRegistry **registry, sd_bus_error *error) {
        return bus_verify_polkit_async_full(call, uid, action, details, 0, registry, error);
}

typedef struct ProcessCheck {
        polkit_process_callback_t callback;
        void *userdata;
} ProcessCheck;

static int on_process_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        ProcessCheck *c = userdata;
        bool authorized = false, challenge = false;
        int r;

        (void) ret_error;

        if (sd_bus_message_is_method_error(reply, NULL))
                r = -EACCES;
        else {
                r = parse_check_reply(reply, &authorized, &challenge, NULL);
                if (r >= 0)
                        r = authorized;
        }
        c->callback(r, c->userdata);
        return 0;
}

static void process_check_destroy(void *userdata) {
        free(userdata);
}

int polkit_check_process_async(sd_bus *bus, pid_t pid, uid_t uid, const char *action,
                               polkit_process_callback_t callback, void *userdata,
                               sd_bus_slot **ret_slot) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        int r;

        if (uid == 0) {
                callback(1, userdata);
                return 0;
        }

        r = new_check_authorization(bus, &m);
        if (r < 0)
                return r;
        /* start-time 0 makes polkitd read it from /proc itself. */
        r = sd_bus_message_append(m, "(sa{sv})sa{ss}us", "unix-process", 3,
                                  "pid", "u", (uint32_t) pid,
                                  "start-time", "t", (uint64_t) 0,
                                  "uid", "i", (int32_t) uid,
                                  action, 0, (uint32_t) 0, "");
        if (r < 0)
                return r;

        ProcessCheck *c = malloc(sizeof(ProcessCheck));
        if (!c)
                return -ENOMEM;
        *c = (ProcessCheck) { callback, userdata };

        r = sd_bus_call_async(bus, &slot, m, on_process_reply, c, 25 * 1000000ULL);
        if (r < 0) {
                free(c);
                return r;
        }
        (void) sd_bus_slot_set_destroy_callback(slot, process_check_destroy);

        *ret_slot = TAKE_PTR(slot);
        return 1;
}
