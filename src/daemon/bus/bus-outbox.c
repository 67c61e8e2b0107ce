/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bus-outbox.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"

/* A client that reads answers a Ping() at once; one that does not is given
 * another after this long, so that one is always out while it has bytes
 * unconfirmed, and its disconnection (the bus answers the Ping() with
 * NoReply then) makes it forgotten. */
#define OUTBOX_PING_TIMEOUT_USEC (30 * USEC_PER_SEC)

void bus_outbox_init(BusOutbox *o, uint64_t max_per_client, uint64_t max_total) {
        *o = (BusOutbox) {
                .max_per_client = max_per_client,
                .max_total = max_total,
        };
}

static void client_free(OutboxClient *c) {
        BusOutbox *o = c->outbox;

        for (size_t i = 0; i < o->n_clients; i++)
                if (o->clients[i] == c) {
                        o->clients[i] = o->clients[--o->n_clients];
                        break;
                }
        o->total -= c->bytes;
        sd_bus_slot_unref(c->ping_slot);
        sd_event_source_disable_unref(c->retry);
        free(c->name);
        free(c);
}

void bus_outbox_done(BusOutbox *o) {
        if (!o)
                return;
        while (o->n_clients > 0)
                client_free(o->clients[0]);
        free(o->clients);
        bus_outbox_init(o, o->max_per_client, o->max_total);
}

OutboxClient *bus_outbox_find(const BusOutbox *o, const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < o->n_clients; i++)
                if (streq(o->clients[i]->name, name))
                        return o->clients[i];
        return NULL;
}

uint64_t bus_outbox_bytes_of(const BusOutbox *o, const char *destination) {
        OutboxClient *c = bus_outbox_find(o, destination);
        return c ? c->bytes : 0;
}

OutboxClient *bus_outbox_sent(BusOutbox *o, const char *destination, uint64_t bytes) {
        OutboxClient *c;

        if (!destination)
                return NULL;    /* a broadcast: no one caller's doing */
        bytes = MAX(bytes, (uint64_t) 1);

        c = bus_outbox_find(o, destination);
        if (!c) {
                OutboxClient **a = realloc(o->clients, (o->n_clients + 1) * sizeof(OutboxClient *));
                if (!a)
                        return NULL;
                o->clients = a;
                c = calloc(1, sizeof(OutboxClient));
                if (!c)
                        return NULL;
                c->outbox = o;
                c->name = strdup(destination);
                if (!c->name) {
                        free(c);
                        return NULL;
                }
                o->clients[o->n_clients++] = c;
        }
        c->bytes += bytes;
        o->total += bytes;
        o->high = MAX(o->high, o->total);
        return c;
}

void bus_outbox_ping_sent(OutboxClient *c) {
        c->ping_out = true;
        c->bytes_at_ping = c->bytes;
}

bool bus_outbox_confirmed(OutboxClient *c) {
        c->ping_out = false;
        c->ping_slot = sd_bus_slot_unref(c->ping_slot);
        c->bytes -= c->bytes_at_ping;
        c->outbox->total -= c->bytes_at_ping;
        c->bytes_at_ping = 0;
        if (c->bytes > 0)
                return true;
        client_free(c);
        return false;
}

void bus_outbox_ping_failed(OutboxClient *c) {
        c->ping_out = false;
        c->ping_slot = sd_bus_slot_unref(c->ping_slot);
        c->bytes_at_ping = 0;
}

void bus_outbox_gone(OutboxClient *c) {
        client_free(c);
}

OutboxVerdict bus_outbox_admit(BusOutbox *o, const char *destination, bool *ret_first) {
        OutboxClient *c = bus_outbox_find(o, destination);
        OutboxVerdict v = OUTBOX_ADMIT;

        if (ret_first)
                *ret_first = false;
        if (!c)
                return OUTBOX_ADMIT;    /* nothing of its own unconfirmed */

        /* A caller below its share is answered, even with a large answer:
         * the bound is on what piles up, not on one answer. Past the whole
         * bound, only callers with nothing unconfirmed are: they are not
         * the ones piling up. */
        if (c->bytes >= o->max_per_client)
                v = OUTBOX_REFUSE_CLIENT;
        else if (o->total >= o->max_total)
                v = OUTBOX_REFUSE_TOTAL;

        if (v == OUTBOX_ADMIT) {
                c->refused = false;
                return v;
        }
        if (!c->refused && ret_first)
                *ret_first = true;
        c->refused = true;
        return v;
}

/* ---- On the bus ---- */

/* After a Ping() that the bus refused (our calls waiting are too many, or
 * the client's queue is full), the next one waits this long: never a loop
 * of refusals. */
#define OUTBOX_PING_RETRY_USEC (5 * USEC_PER_SEC)

static int send_ping(sd_bus *bus, OutboxClient *c);

static int on_ping_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        OutboxClient *c = userdata;

        (void) usec;
        (void) source;
        c->retry = sd_event_source_disable_unref(c->retry);
        return c->outbox->bus ? send_ping(c->outbox->bus, c) : 0;
}

static int on_ping_answer(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        OutboxClient *c = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(m);
        sd_bus *bus = sd_bus_message_get_bus(m);
        const char *sender = sd_bus_message_get_sender(m);

        (void) ret_error;

        /* Answered by the client itself, even with an error (a library
         * without org.freedesktop.DBus.Peer): it read what came before. */
        if (!e || (sender && streq(sender, c->name))) {
                if (bus_outbox_confirmed(c))
                        (void) send_ping(bus, c);
                return 0;
        }
        /* The bus answers for a client that is gone. sd-bus's own timeout
         * is NoReply too, but says it timed out. */
        if (sd_bus_error_has_names(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
            (sd_bus_error_has_name(e, SD_BUS_ERROR_NO_REPLY) && e->message && strstr(e->message, "disconnected"))) {
                bus_outbox_gone(c);
                return 0;
        }
        /* Timed out (it does not read: asked again, the timeout paces
         * it), or refused by the bus (its queue for the client full, too
         * many calls of ours waiting): nothing confirmed; asked again
         * later. */
        bus_outbox_ping_failed(c);
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_NO_REPLY))
                (void) send_ping(bus, c);
        else if (!c->retry)
                (void) sd_event_add_time_relative(sd_bus_get_event(bus), &c->retry, CLOCK_MONOTONIC,
                                                  OUTBOX_PING_RETRY_USEC, 0, on_ping_retry, c);
        return 0;
}

static int send_ping(sd_bus *bus, OutboxClient *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        if (c->ping_out || c->retry)
                return 0;
        r = sd_bus_message_new_method_call(bus, &m, c->name, "/", "org.freedesktop.DBus.Peer", "Ping");
        if (r < 0)
                return r;
        /* Never start a service for it: the client is a connection. */
        (void) sd_bus_message_set_auto_start(m, false);
        r = sd_bus_call_async(bus, &c->ping_slot, m, on_ping_answer, c, OUTBOX_PING_TIMEOUT_USEC);
        if (r < 0)
                return log_debug_errno(r, "Failed to send Ping() to '%s', ignoring: %m", c->name);
        bus_outbox_ping_sent(c);
        return 0;
}

int bus_outbox_send(BusOutbox *o, sd_bus *bus, sd_bus_message *reply, uint64_t bytes) {
        OutboxClient *c;
        int r;

        r = sd_bus_send(bus, reply, NULL);
        if (r < 0)
                return r;
        o->bus = bus;
        c = bus_outbox_sent(o, sd_bus_message_get_destination(reply), bytes);
        if (c)
                (void) send_ping(bus, c);
        return r;
}
