/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "egress.h"
#include "factory.h"
#include "log.h"
#include "proxy-client.h"
#include "string-util.h"

/* One registered task. */
typedef struct EgressTask {
        char id[AGENTFAB_TASK_ID_LEN + 1];
        bool lost;                      /* the connection it was registered on is gone */
        char *refused_host;             /* the first refusal in allowlist mode not yet taken */
        char *refused_reason;
        ProxyUsage seen;                /* the proxy's counters when last added to the task's */
} EgressTask;

struct Egress {
        Factory *factory;
        ProxyClient *client;
        sd_event_source *source;
        EgressTask *tasks;
        size_t n_tasks;
};

static void egress_task_clear_refusal(EgressTask *et) {
        et->refused_host = mfree_ptr(et->refused_host);
        et->refused_reason = mfree_ptr(et->refused_reason);
}

int egress_new(Factory *f, Egress **ret) {
        Egress *e = calloc(1, sizeof(Egress));
        if (!e)
                return -ENOMEM;
        e->factory = f;
        *ret = e;
        return 0;
}

static void egress_disconnect(Egress *e) {
        e->source = sd_event_source_disable_unref(e->source);
        e->client = proxy_client_free(e->client);
        /* Every registration ended with the connection. */
        for (size_t i = 0; i < e->n_tasks; i++)
                e->tasks[i].lost = true;
}

Egress *egress_free(Egress *e) {
        if (!e)
                return NULL;
        egress_disconnect(e);
        for (size_t i = 0; i < e->n_tasks; i++)
                egress_task_clear_refusal(e->tasks + i);
        free(e->tasks);
        free(e);
        return NULL;
}

static EgressTask *egress_find(Egress *e, const char *id) {
        for (size_t i = 0; i < e->n_tasks; i++)
                if (streq(e->tasks[i].id, id))
                        return e->tasks + i;
        return NULL;
}

static void egress_forget(Egress *e, const char *id) {
        EgressTask *et = egress_find(e, id);
        if (!et)
                return;
        egress_task_clear_refusal(et);
        size_t i = (size_t) (et - e->tasks);
        memmove(e->tasks + i, e->tasks + i + 1, (e->n_tasks - i - 1) * sizeof(EgressTask));
        e->n_tasks--;
}

/* An allow entry that names what was refused: "host:port", bracketed for
 * an IPv6 literal. */
static char *refusal_entry(const ProxyEvent *ev) {
        char *s;
        bool v6 = strchr(ev->host, ':') != NULL;

        if (ev->port == 0)
                return strdup(ev->host);
        if (asprintf(&s, "%s%s%s:%u", v6 ? "[" : "", ev->host, v6 ? "]" : "", (unsigned) ev->port) < 0)
                return NULL;
        return s;
}

static void egress_handle_event(Egress *e, ProxyEvent *ev) {
        EgressTask *et = egress_find(e, ev->task);

        log_debug("Egress proxy refused a connection of task '%s' to '%s' port %u: %s", ev->task, ev->host,
                  (unsigned) ev->port, ev->reason);
        /* SECURITY: audited mode has no breaker (every connection is
         * journaled by the proxy); a task we did not register is not ours. */
        if (!et || et->lost || ev->mode != PROXY_MODE_ALLOWLIST || et->refused_host)
                return;
        /* A bad request names no host an approval could allow. */
        if (isempty(ev->host))
                et->refused_host = strdup("(a request that is not a valid proxy request)");
        else
                et->refused_host = refusal_entry(ev);
        et->refused_reason = strdup(ev->reason);
        if (!et->refused_host || !et->refused_reason) {
                egress_task_clear_refusal(et);
                log_oom();
        }
}

void egress_poll(Egress *e) {
        int r;

        if (!e->client)
                return;
        for (;;) {
                ProxyEvent ev = {};
                r = proxy_client_next_event(e->client, &ev);
                if (r <= 0)
                        break;
                egress_handle_event(e, &ev);
                proxy_event_done(&ev);
        }
        if (r < 0 && r != -ENOMEM) {
                log_warning_errno(r, "The egress proxy's control connection ended (%m); the network of %zu task(s) "
                                  "is gone until their sandboxes are made again.", e->n_tasks);
                egress_disconnect(e);
        }
}

static int on_proxy_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Egress *e = userdata;

        (void) s, (void) fd, (void) revents;
        egress_poll(e);
        return 0;
}

static int egress_connect(Egress *e) {
        const Config *c = &e->factory->config;
        int r;

        if (e->client)
                return 0;
        r = proxy_client_connect(c->proxy_socket, &e->client);
        if (r < 0)
                return r;
        r = sd_event_add_io(e->factory->event, &e->source, proxy_client_fd(e->client), EPOLLIN, on_proxy_io, e);
        if (r < 0) {
                e->client = proxy_client_free(e->client);
                return r;
        }
        (void) sd_event_source_set_description(e->source, "egress-proxy");
        log_info("Connected to the egress proxy at '%s'.", c->proxy_socket ?: AGENTFAB_PROXY_CONTROL);
        return 0;
}

int egress_register(Egress *e, Task *t, const Environment *env, int *ret_channel_fd, char **ret_error) {
        _cleanup_strv_free_ char **allow = NULL;
        _cleanup_free_ char *error = NULL;
        const Config *c = &e->factory->config;
        int r;

        assert(env->network != NETWORK_OFF);

        /* A registration of an earlier sandbox of this task goes first. */
        egress_unregister(e, t->id);

        for (char **a = env->allow; a && *a; a++)
                if (strv_extend(&allow, *a) < 0)
                        return -ENOMEM;
        for (char **a = t->progress.allowed_hosts; a && *a; a++)
                if (strv_extend(&allow, *a) < 0)
                        return -ENOMEM;

        ProxyLimits limits = {
                .max_connections = c->network_max_connections,
                .max_bytes = c->network_max_bytes,
                .idle_timeout_usec = c->network_idle_timeout_usec,
        };
        ProxyMode mode = env->network == NETWORK_ALLOWLIST ? PROXY_MODE_ALLOWLIST : PROXY_MODE_AUDITED;

        /* Twice at most: a connection that was fine when last used may have
         * ended with a restart of the proxy that we have not read yet. */
        for (unsigned attempt = 0;; attempt++) {
                r = egress_connect(e);
                if (r < 0)
                        return asprintf(ret_error, "the egress proxy cannot be reached at '%s': %s",
                                        c->proxy_socket ?: AGENTFAB_PROXY_CONTROL, strerror(-r)) < 0 ? -ENOMEM : r;
                error = mfree_ptr(error);
                r = proxy_client_register(e->client, t->id, mode, allow, &limits, ret_channel_fd, &error);
                if (r >= 0)
                        break;
                if (IN_SET(r, -ECONNRESET, -EPIPE, -ENOTCONN, -ETIMEDOUT) && attempt == 0) {
                        egress_disconnect(e);
                        continue;
                }
                if (IN_SET(r, -ECONNRESET, -EPIPE, -ENOTCONN, -ETIMEDOUT))
                        egress_disconnect(e);
                return asprintf(ret_error, "the egress proxy refused to register the task: %s",
                                error ?: strerror(-r)) < 0 ? -ENOMEM : r;
        }

        EgressTask *a = reallocarray(e->tasks, e->n_tasks + 1, sizeof(EgressTask));
        if (!a) {
                *ret_channel_fd = safe_close(*ret_channel_fd);
                (void) proxy_client_unregister(e->client, t->id);
                return -ENOMEM;
        }
        e->tasks = a;
        e->tasks[e->n_tasks] = (EgressTask) {};
        memcpy(e->tasks[e->n_tasks].id, t->id, strlen(t->id) + 1);
        e->n_tasks++;
        log_debug("Task '%s' registered with the egress proxy (%s, %zu allow entries).", t->id,
                  proxy_mode_to_string(mode), strv_length(allow));
        return 0;
}

void egress_account(Egress *e, Task *t) {
        TaskResources *res = &t->progress.resources;
        EgressTask *et;
        ProxyUsage u;
        int r;

        if (!e || !(et = egress_find(e, t->id)) || et->lost || !e->client)
                return;
        r = proxy_client_usage(e->client, t->id, &u);
        if (IN_SET(r, -ECONNRESET, -EPIPE, -ENOTCONN, -ETIMEDOUT)) {
                egress_disconnect(e);
                return;
        }
        if (r < 0) {
                log_debug_errno(r, "Task '%s': cannot read what its connections used, ignoring: %m", t->id);
                return;
        }
        /* The counters only grow over a registration. */
        if (u.bytes_up >= et->seen.bytes_up)
                task_resource_add(&res->net_up_bytes, u.bytes_up - et->seen.bytes_up);
        if (u.bytes_down >= et->seen.bytes_down)
                task_resource_add(&res->net_down_bytes, u.bytes_down - et->seen.bytes_down);
        if (u.connections >= et->seen.connections)
                task_resource_add(&res->net_connections, u.connections - et->seen.connections);
        et->seen = u;
}

void egress_unregister(Egress *e, const char *task_id) {
        EgressTask *et;
        int r;

        if (!e || !(et = egress_find(e, task_id)))
                return;
        if (!et->lost && e->client) {
                r = proxy_client_unregister(e->client, task_id);
                if (IN_SET(r, -ECONNRESET, -EPIPE, -ENOTCONN, -ETIMEDOUT))
                        egress_disconnect(e);
                else if (r < 0 && r != -ENOENT)
                        log_warning_errno(r, "Failed to unregister task '%s' from the egress proxy, ignoring: %m", task_id);
        }
        egress_forget(e, task_id);
}

bool egress_task_lost(Egress *e, const char *task_id) {
        EgressTask *et = e ? egress_find(e, task_id) : NULL;
        return et && et->lost;
}

int egress_take_refusal(Egress *e, const char *task_id, char **ret_host, char **ret_reason) {
        EgressTask *et = e ? egress_find(e, task_id) : NULL;

        if (!et || !et->refused_host)
                return 0;
        *ret_host = TAKE_PTR(et->refused_host);
        *ret_reason = TAKE_PTR(et->refused_reason);
        return 1;
}

int egress_task_allow(Egress *e, Task *t, char **hosts, uid_t caller, sd_bus_error *error) {
        _cleanup_strv_free_ char **added = NULL;
        _cleanup_free_ char *joined = NULL, *proxy_error = NULL;
        int r;

        if (!hosts || !*hosts)
                return 0;
        for (char **h = hosts; *h; h++) {
                if (!environment_allow_entry_is_valid(*h))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "'%s' is not a host name, address or glob with an optional port.", *h);
                bool known = false;
                for (char **k = t->progress.allowed_hosts; k && *k && !known; k++)
                        known = streq(*k, *h);
                for (char **k = added; k && *k && !known; k++)
                        known = streq(*k, *h);
                if (!known && strv_extend(&added, *h) < 0)
                        return -ENOMEM;
        }
        if (strv_length(t->progress.allowed_hosts) + strv_length(added) > TASK_ALLOWED_HOSTS_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "A task may be allowed at most %u hosts by approvals.", TASK_ALLOWED_HOSTS_MAX);
        if (!added)
                return 0;

        for (char **h = added; *h; h++)
                if (strv_extend(&t->progress.allowed_hosts, *h) < 0)
                        return -ENOMEM;

        joined = strv_join(added, " ");
        if (!joined)
                return -ENOMEM;
        audit_allow_hosts(t, caller, joined);

        /* A task at work has a registration: the hosts count from its next
         * connection on. Otherwise they come with its next sandbox. */
        EgressTask *et = e ? egress_find(e, t->id) : NULL;
        if (et && !et->lost && e->client) {
                r = proxy_client_allow(e->client, t->id, added, &proxy_error);
                if (r < 0)
                        log_warning("The egress proxy did not take the allowed hosts of task '%s' (%s); they count from "
                                    "its next sandbox.", t->id, proxy_error ?: strerror(-r));
        }
        return 0;
}
