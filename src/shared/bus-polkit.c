/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "bus-polkit.h"
#include "log.h"
#include "macro.h"

typedef struct PolkitQuery PolkitQuery;

struct PolkitQuery {
        PolkitRegistry *registry;
        sd_bus_message *request;   /* the call being authorized, re-queued when answered */
        char *action;
        sd_bus_slot *slot;         /* the pending CheckAuthorization, NULL once answered */
        bool answered;
        bool authorized;
        bool challenge;
        char *error_name;          /* polkit could not be asked: name of the D-Bus error */
        PolkitQuery *next;
};

struct PolkitRegistry {
        PolkitQuery *queries;
};

static PolkitQuery *polkit_query_free(PolkitQuery *q) {
        if (!q)
                return NULL;
        sd_bus_slot_unref(q->slot);
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

PolkitRegistry *polkit_registry_free(PolkitRegistry *reg) {
        if (!reg)
                return NULL;
        while (reg->queries) {
                PolkitQuery *q = reg->queries;
                reg->queries = q->next;
                polkit_query_free(q);
        }
        free(reg);
        return NULL;
}

size_t polkit_registry_pending(PolkitRegistry *reg) {
        size_t n = 0;
        for (PolkitQuery *q = reg ? reg->queries : NULL; q; q = q->next)
                n++;
        return n;
}

static int parse_check_reply(sd_bus_message *reply, bool *ret_authorized, bool *ret_challenge) {
        int authorized = 0, challenge = 0, r;

        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_STRUCT, "bba{ss}");
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
        if (r < 0)
                return r;
        *ret_authorized = authorized;
        *ret_challenge = challenge;
        return 0;
}

static int on_check_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PolkitQuery *q = userdata;
        const sd_bus_error *e;
        int r;

        (void) ret_error;

        q->slot = sd_bus_slot_unref(q->slot);
        q->answered = true;

        e = sd_bus_message_get_error(reply);
        if (e) {
                log_warning("polkit check of '%s' failed, denying: %s", q->action, e->message ?: e->name);
                q->error_name = strdup(e->name ?: SD_BUS_ERROR_FAILED);
        } else {
                r = parse_check_reply(reply, &q->authorized, &q->challenge);
                if (r < 0) {
                        log_warning_errno(r, "Unexpected reply from polkit, denying: %m");
                        q->authorized = q->challenge = false;
                }
        }

        /* Run the original method handler again; it will find this answer. */
        r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(q->request), q->request);
        if (r < 0) {
                log_error_errno(r, "Failed to re-queue authorized call: %m");
                registry_remove(q->registry, q);
                polkit_query_free(q);
        }
        return 0;
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

int bus_verify_polkit_async(sd_bus_message *call, uid_t uid, const char *action, const char **details,
                            PolkitRegistry **registry, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const char *sender;
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
        if (!sender)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Caller has no bus name.");

        if (!*registry) {
                *registry = calloc(1, sizeof(PolkitRegistry));
                if (!*registry)
                        return -ENOMEM;
        }

        r = new_check_authorization(sd_bus_message_get_bus(call), &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "(sa{sv})s", "system-bus-name", 1, "name", "s", sender, action);
        if (r < 0)
                return r;
        r = append_details(m, details);
        if (r < 0)
                return r;
        /* Flag 1 is AllowUserInteraction: only when the caller said it may be asked. */
        r = sd_bus_message_append(m, "us", (uint32_t) !!sd_bus_message_get_allow_interactive_authorization(call), "");
        if (r < 0)
                return r;

        PolkitQuery *q = calloc(1, sizeof(PolkitQuery));
        if (!q)
                return -ENOMEM;
        q->registry = *registry;
        q->request = sd_bus_message_ref(call);
        q->action = strdup(action);
        if (!q->action) {
                polkit_query_free(q);
                return -ENOMEM;
        }

        /* An interactive check waits for a person: give it time. */
        r = sd_bus_call_async(sd_bus_message_get_bus(call), &q->slot, m, on_check_reply, q, 5 * 60 * 1000000ULL);
        if (r < 0) {
                polkit_query_free(q);
                return r;
        }

        q->next = (*registry)->queries;
        (*registry)->queries = q;
        return 0;
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
                r = parse_check_reply(reply, &authorized, &challenge);
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
