/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include "http-request.h"
#include "proxy-client.h"
#include "proxy-policy.h"
#include "worker.h"

/* The egress proxy's objects: Proxy (the process), ProxyControl (one
 * control connection, agentfabd's), ProxyTask (one registered task with
 * its channel and listener), ProxyConn (one connection of a task's
 * commands). agentfab-proxy.c owns the first three, proxy-conn.c the last. */

typedef struct Proxy Proxy;
typedef struct ProxyControl ProxyControl;
typedef struct ProxyTask ProxyTask;
typedef struct ProxyConn ProxyConn;

/* Bounds over all tasks, below the unit's LimitNOFILE= and MemoryMax=. */
#define PROXY_TASKS_MAX 1024
#define PROXY_CONNS_MAX 2048
#define PROXY_RESOLVING_MAX 64
#define PROXY_CONTROLS_MAX 16
#define PROXY_OWN_ADDRESSES_MAX 64

#define PROXY_DEFAULT_MAX_CONNECTIONS 64
#define PROXY_DEFAULT_MAX_BYTES (4ULL << 30)
#define PROXY_DEFAULT_IDLE_TIMEOUT_USEC (300 * USEC_PER_SEC)
#define PROXY_DEFAULT_CONNECT_TIMEOUT_USEC (15 * USEC_PER_SEC)
/* A client has this long to send its request's head. */
#define PROXY_HEAD_TIMEOUT_USEC (30 * USEC_PER_SEC)

struct Proxy {
        sd_event *event;
        uid_t control_uid;              /* besides root, who may register tasks */
        ProxyControl *controls;
        size_t n_controls;
        ProxyTask *tasks;
        size_t n_tasks;
        size_t n_conns;
        size_t n_resolving;
        ProxyAddress own[PROXY_OWN_ADDRESSES_MAX];
        size_t n_own;
        uint64_t own_read_usec;
};

struct ProxyControl {
        Proxy *proxy;
        ProxyControl *prev, *next;
        int fd;
        sd_event_source *source;
        uid_t uid;
        uint64_t events_dropped;
};

struct ProxyTask {
        Proxy *proxy;
        ProxyControl *control;          /* who registered it; its tasks end with it */
        ProxyTask *prev, *next;
        char id[PROXY_TASK_ID_MAX + 1];
        ProxyPolicy policy;
        unsigned max_connections;
        uint64_t max_bytes;
        uint64_t idle_timeout_usec;
        uint64_t connect_timeout_usec;
        int channel_fd;                 /* our end; the sandbox holds the other */
        sd_event_source *channel_source;
        int listen_fd;                  /* the forwarder's port, in the sandbox's network namespace */
        sd_event_source *listen_source;
        sd_event_source *retry_source;  /* accepting paused after EMFILE and the like */
        ProxyConn *conns;
        unsigned n_conns;
        uint64_t bytes;
        /* Over the registration, for the daemon's accounting ("usage"):
         * bytes relayed each way and connections accepted. */
        uint64_t bytes_up, bytes_down;
        uint64_t connections;
};

/* The host's own addresses, read again when older than a few seconds. */
void proxy_refresh_own_addresses(Proxy *p);

/* Tells the task's control connection of a refusal (never blocks; dropped
 * when its buffer is full). */
void proxy_task_send_refusal(ProxyTask *t, ProxyRefusalKind kind, const char *host, uint16_t port,
                             const char *address, const char *reason);

/* proxy-conn.c */
int proxy_conn_new(ProxyTask *t, int fd);
ProxyConn *proxy_conn_free(ProxyConn *c);
