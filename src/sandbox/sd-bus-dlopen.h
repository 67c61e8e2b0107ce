/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* libsystemd, loaded on first use instead of at every start of
 * agentfab-sandbox (the way systemd loads its optional libraries): linked,
 * it and the libraries it pulls in (libgcrypt, liblzma, libzstd, liblz4,
 * libcap) cost each start about 0.6 ms before main() and make every clone
 * and exit of the sandbox's processes heavier, though most of a sandbox's
 * processes never talk to the bus. Only the functions scope.c uses. */
#define SD_BUS_SYMBOLS(X)                               \
        X(sd_bus_call)                                  \
        X(sd_bus_call_method)                           \
        X(sd_bus_call_method_async)                     \
        X(sd_bus_error_free)                            \
        X(sd_bus_error_has_names_sentinel)              \
        X(sd_bus_error_move)                            \
        X(sd_bus_error_set)                             \
        X(sd_bus_error_setf)                            \
        X(sd_bus_flush_close_unref)                     \
        X(sd_bus_is_bus_client)                         \
        X(sd_bus_match_signal)                          \
        X(sd_bus_match_signal_async)                    \
        X(sd_bus_message_append)                        \
        X(sd_bus_message_close_container)               \
        X(sd_bus_message_enter_container)               \
        X(sd_bus_message_exit_container)                \
        X(sd_bus_message_new_method_call)               \
        X(sd_bus_message_open_container)                \
        X(sd_bus_message_read)                          \
        X(sd_bus_message_unref)                         \
        X(sd_bus_new)                                   \
        X(sd_bus_open_system)                           \
        X(sd_bus_process)                               \
        X(sd_bus_set_address)                           \
        X(sd_bus_set_fd)                                \
        X(sd_bus_slot_unref)                            \
        X(sd_bus_start)                                 \
        X(sd_bus_wait)

#define SD_BUS_DLSYM_PROTOTYPE(symbol) extern __typeof__(symbol) *sym_##symbol;
SD_BUS_SYMBOLS(SD_BUS_DLSYM_PROTOTYPE)

/* Loads libsystemd.so.0 and resolves the sym_ pointers, once; 0 or a
 * negative errno (-EOPNOTSUPP: no usable libsystemd). */
int dlopen_sd_bus(void);
