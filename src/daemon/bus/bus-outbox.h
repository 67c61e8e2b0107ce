/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

/* What the daemon has sent each bus client that the client has not been
 * seen to take, in bytes.
 *
 * On the system bus, a client that never reads does not make agentfabd
 * queue its answers: dbus-daemon reads them and keeps them for the client,
 * up to max_outgoing_bytes (127 MiB). But every message dbus-daemon holds
 * counts against the connection that sent it, ours, up to
 * max_incoming_bytes (127 MiB too): once one client holds that much of
 * ours, dbus-daemon stops reading agentfabd's connection, and every other
 * client waits, for as long as that client stays connected, while
 * agentfabd's own queue to the bus grows. Nothing on the bus says how much
 * a client has read. So agentfabd asks: after answers whose size a caller
 * decides (ListTasks() of thousands of tasks), it sends the client a
 * org.freedesktop.DBus.Peer.Ping(), which every D-Bus library answers
 * when it reads it, after what was sent before it. The answer confirms
 * those bytes taken. A client with more than its share unconfirmed is
 * dropped: its calls are refused until it disconnects. While the whole
 * of what is unconfirmed is past its bound, clients with bytes unconfirmed
 * are refused, others answered. The core is bus-free, for the unit tests. */

typedef struct BusOutbox BusOutbox;

typedef struct OutboxClient {
        BusOutbox *outbox;
        char *name;                     /* its unique bus name */
        uint64_t bytes;                 /* sent, not confirmed */
        uint64_t bytes_at_ping;         /* of those, sent before the Ping() out */
        bool ping_out;
        bool refused;                   /* refused since it went past: reported once */
        sd_bus_slot *ping_slot;
        sd_event_source *retry;         /* the next Ping() after one that failed */
} OutboxClient;

struct BusOutbox {
        uint64_t max_per_client;        /* [Daemon] MaxQueuedBytesPerClient= */
        uint64_t max_total;             /* [Daemon] MaxQueuedBytes= */

        sd_bus *bus;                    /* borrowed: the bus the answers went on */
        uint64_t total;                 /* bytes unconfirmed, of all clients */
        uint64_t high;                  /* the most ever */

        OutboxClient **clients;         /* clients with bytes unconfirmed */
        size_t n_clients;
};

typedef enum OutboxVerdict {
        OUTBOX_ADMIT,
        OUTBOX_REFUSE_CLIENT,           /* its own share is past max_per_client */
        OUTBOX_REFUSE_TOTAL,            /* the whole is past max_total and it has bytes unconfirmed */
} OutboxVerdict;

void bus_outbox_init(BusOutbox *o, uint64_t max_per_client, uint64_t max_total);
void bus_outbox_done(BusOutbox *o);

/* bytes were sent to destination: returns its entry (NULL for a broadcast
 * or without memory), whose ping_out says whether a Ping() is out. */
OutboxClient *bus_outbox_sent(BusOutbox *o, const char *destination, uint64_t bytes);
/* A Ping() went out to c: what was sent so far is what its answer confirms. */
void bus_outbox_ping_sent(OutboxClient *c);
/* c answered the Ping(): those bytes are taken. Returns true if c has
 * bytes sent after it (then a Ping() is due again), false if c is
 * forgotten (freed). */
bool bus_outbox_confirmed(OutboxClient *c);
/* The Ping() brought no answer from c (it timed out, or the bus refused
 * it): nothing is confirmed; another is due. */
void bus_outbox_ping_failed(OutboxClient *c);
/* c disconnected: forgotten (freed). */
void bus_outbox_gone(OutboxClient *c);

OutboxClient *bus_outbox_find(const BusOutbox *o, const char *destination);
uint64_t bus_outbox_bytes_of(const BusOutbox *o, const char *destination);

/* May destination be answered? *ret_first is set when this refusal is the
 * first since it was last admitted (the one to report). */
OutboxVerdict bus_outbox_admit(BusOutbox *o, const char *destination, bool *ret_first);

/* With a bus: sends reply (whose size the caller estimates as bytes, an
 * over-estimate being safe), counts it against its destination and sends
 * that a Ping() if none is out. */
int bus_outbox_send(BusOutbox *o, sd_bus *bus, sd_bus_message *reply, uint64_t bytes);

/* The size on the wire of a string or object path in a message body,
 * alignment included: for callers' estimates. */
static inline uint64_t bus_outbox_string_size(const char *s) {
        return 4 + 3 + (s ? __builtin_strlen(s) : 0) + 1;
}
