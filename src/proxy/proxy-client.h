/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "proxy-env.h"
#include "proxy-policy.h"

/* agentfabd's side of the egress proxy (agentfab-proxy(8)).
 *
 * The daemon keeps one control connection (a SOCK_SEQPACKET socket, one
 * JSON object per message) and registers each task that gets a network:
 * the proxy answers with a file descriptor, the task's channel. The
 * sandbox of the task is given that channel (agentfab-sandbox
 * --proxy-fd=); at its set-up the sandbox binds the forwarder's port on
 * its own loopback and sends the listening socket over the channel, so
 * that the proxy accepts the commands' connections itself, with nothing of
 * the proxy running in the sandbox. The channel stays open in the
 * sandbox's PID 1; when it closes (the sandbox ended), the proxy ends
 * everything of the task. Closing the control connection ends every task
 * it registered.
 *
 * Requests are synchronous (the proxy answers at once: nothing of a
 * request waits for the network); events the proxy sends meanwhile (a
 * refused connection) are queued and read with proxy_client_next_event()
 * when the fd is readable. */

#define AGENTFAB_PROXY_CONTROL "/run/agentfab-proxy/control"
/* The journal entry of each connection (agentfab.catalog). */
#define AGENTFAB_MESSAGE_NETWORK_STR "e1724f7f803240d2a256a216468e59e9"

/* Bounds on what a message may carry (both directions). */
#define PROXY_MESSAGE_MAX 65536
#define PROXY_TASK_ID_MAX 64

/* The proxy's name of a task: 1 to PROXY_TASK_ID_MAX letters, digits, '_'
 * and '-'. The factory's ids (task-id.h) are such names; the proxy takes
 * any of them, so that it can be driven without the factory. */
bool proxy_task_id_is_valid(const char *t);

typedef struct ProxyLimits {
        unsigned max_connections;       /* at once; 0: the proxy's default (64) */
        uint64_t max_bytes;             /* up and down, over the registration; 0: default (4 GiB) */
        uint64_t idle_timeout_usec;     /* a connection with no byte either way; 0: default (5 min) */
        uint64_t connect_timeout_usec;  /* 0: default (15 s) */
} ProxyLimits;

typedef struct ProxyClient ProxyClient;

/* Connects to path (NULL: AGENTFAB_PROXY_CONTROL). Only root and the
 * agentfab user are answered. */
int proxy_client_connect(const char *path, ProxyClient **ret);
ProxyClient *proxy_client_free(ProxyClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProxyClient *, proxy_client_free);

/* The connection's fd, for an event loop: readable when an event (or the
 * proxy's hang-up) is there. */
int proxy_client_fd(ProxyClient *c);

/* Registers task (1..64 of [A-Za-z0-9_-]) with its mode, allow entries
 * (agentfab-proxy(8): "name", "*.name", "name:port", "1.2.3.4",
 * "10.0.0.0/8:443", "[::1]:8080", ...) and limits (NULL: defaults). On
 * success *ret_channel_fd is the task's channel (O_CLOEXEC; hand it to the
 * sandbox, then close it). On refusal, a negative errno and, if
 * ret_error, the proxy's reason (-EEXIST: registered already; -EINVAL: a
 * bad entry, named). */
int proxy_client_register(ProxyClient *c, const char *task, ProxyMode mode, char **allow, const ProxyLimits *limits,
                          int *ret_channel_fd, char **ret_error);

/* Adds entries to a registered task's allowlist (e.g. the host an
 * approval allowed); effective for its next connection. */
int proxy_client_allow(ProxyClient *c, const char *task, char **allow, char **ret_error);

/* Ends everything of the task at once (its listener, its connections). */
int proxy_client_unregister(ProxyClient *c, const char *task);

/* What a registered task's connections used so far: bytes relayed to the
 * net (up) and from it (down), connections accepted. Counted from the
 * registration; gone with it. */
typedef struct ProxyUsage {
        uint64_t bytes_up, bytes_down, connections;
} ProxyUsage;
int proxy_client_usage(ProxyClient *c, const char *task, ProxyUsage *ret);

typedef enum ProxyRefusalKind {
        PROXY_EVENT_NOT_ALLOWED,        /* allowlist mode: the host is not listed */
        PROXY_EVENT_ADDRESS,            /* a loopback/private/... address no entry names */
        PROXY_EVENT_LIMIT,              /* connections at once, bytes */
        PROXY_EVENT_RESOLVE,            /* the name did not resolve */
        PROXY_EVENT_BAD_REQUEST,        /* not a valid proxy request */
        _PROXY_EVENT_MAX,
        _PROXY_EVENT_INVALID = -EINVAL,
} ProxyRefusalKind;

const char *proxy_refusal_kind_to_string(ProxyRefusalKind k);
ProxyRefusalKind proxy_refusal_kind_from_string(const char *s);

/* A refused connection of a task. In allowlist mode every refusal trips
 * the task's network breaker, naming host (and port). */
typedef struct ProxyEvent {
        char *task;
        ProxyMode mode;
        ProxyRefusalKind kind;
        char *host;                     /* as the request named it; may be "" for a bad request */
        uint16_t port;
        char *address;                  /* the address refused, if it got that far; else NULL */
        char *reason;                   /* a sentence */
} ProxyEvent;

void proxy_event_done(ProxyEvent *e);

/* Returns 1 and fills *ret with the next event, 0 if there is none now,
 * -ECONNRESET if the proxy hung up (every registration is gone). Never
 * blocks. */
int proxy_client_next_event(ProxyClient *c, ProxyEvent *ret);
