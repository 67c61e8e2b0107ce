/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

/* Asynchronous polkit checks for D-Bus method handlers.
 *
 * A handler calls bus_verify_polkit_async() after validating its arguments
 * and before changing anything. The first time, it sends CheckAuthorization
 * to polkitd, keeps a reference to the incoming call in the registry and
 * returns 0: the handler then returns 1 ("handled, reply comes later"). When
 * polkitd answers, the stored answer is attached to the query and the very
 * same call message is re-queued with sd_bus_enqueue_for_read(), so the
 * handler runs again from the start, calls bus_verify_polkit_async() again
 * and this time gets the answer: 1 authorized, or a negative errno with the
 * D-Bus error set (AccessDenied, or InteractiveAuthorizationRequired when
 * polkit would have asked and the caller did not allow interaction). So
 * nothing a handler does before the check may have side effects.
 *
 * Root is always allowed without asking polkit. If polkitd cannot be
 * reached, the answer is "denied". */

typedef struct PolkitRegistry PolkitRegistry;

PolkitRegistry *polkit_registry_free(PolkitRegistry *reg);

/* uid: the caller's, as the handler found it (dbus-daemon does not put it
 * on the message, so asking again would be a synchronous call to the bus
 * on the event loop). details: NULL-terminated key, value, key, value, ...
 * list, or NULL. */
int bus_verify_polkit_async(sd_bus_message *call, uid_t uid, const char *action, const char **details,
                            PolkitRegistry **registry, sd_bus_error *error);

typedef enum PolkitFlags {
        /* A plain yes (not from a temporary authorization) to a question
         * without details may be remembered for the caller's connection for
         * a second, until polkitd says something changed (its Changed
         * signal, or it restarts): the answer to a long-lived client's every
         * call costs polkitd and the bus about 22 messages. Never for
         * actions an administrator is asked for. */
        POLKIT_KEEP = 1 << 0,
} PolkitFlags;

int bus_verify_polkit_async_full(sd_bus_message *call, uid_t uid, const char *action, const char **details,
                                 PolkitFlags flags, PolkitRegistry **registry, sd_bus_error *error);

/* The same question for a process that is not a bus peer (a client of the
 * stream socket), never interactive. callback gets 1 authorized, 0 denied,
 * or a negative errno. */
typedef void (*polkit_process_callback_t)(int result, void *userdata);
int polkit_check_process_async(sd_bus *bus, pid_t pid, uid_t uid, const char *action,
                               polkit_process_callback_t callback, void *userdata,
                               sd_bus_slot **ret_slot);

/* Non-zero while queries are outstanding: the daemon does not exit then. */
size_t polkit_registry_pending(PolkitRegistry *reg);
