/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bytes of answers each bus client has not been seen to take
 * (bus-outbox.h), without a bus: answers are counted as they are sent, a
 * Ping() marks what its answer confirms, and the client is admitted or
 * refused by the result. What the count gets wrong is what lets a client
 * that never reads fill dbus-daemon with the daemon's answers until the bus
 * stops reading the daemon, or what refuses a client that does read. */
#include "bus-outbox.h"
#include "tap.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

/* A Ping() confirms what was sent before it, not after: answers that left
 * while it was out stay counted until the next one is answered; a client
 * with nothing left is forgotten. */
static void test_confirmed_before_ping(void) {
        BusOutbox o;
        OutboxClient *c;

        bus_outbox_init(&o, MiB, 16 * MiB);
        c = bus_outbox_sent(&o, ":1.5", 100 * KiB);
        CHECK(c && !c->ping_out, "an answer to :1.5 is counted, no Ping() out yet");
        bus_outbox_ping_sent(c);
        CHECK(bus_outbox_sent(&o, ":1.5", 200 * KiB) == c, "another answer, the same client");
        CHECK(bus_outbox_sent(&o, ":1.6", 50 * KiB) != NULL, "one to :1.6");
        CHECK_UINT_EQ(bus_outbox_bytes_of(&o, ":1.5"), 300 * KiB, ":1.5 has both counted");
        CHECK_UINT_EQ(o.total, 350 * KiB, "the whole is the sum");

        CHECK(bus_outbox_confirmed(c), "the Ping() answered: bytes sent after it remain");
        CHECK_UINT_EQ(bus_outbox_bytes_of(&o, ":1.5"), 200 * KiB, "the first answer is confirmed, the second is not");
        CHECK(!c->ping_out, "no Ping() out: another is due");
        bus_outbox_ping_sent(c);
        CHECK(!bus_outbox_confirmed(c), "the next answered: nothing left, forgotten");
        CHECK_UINT_EQ(bus_outbox_bytes_of(&o, ":1.5"), 0, ":1.5 has nothing counted");
        CHECK_UINT_EQ(o.n_clients, 1, "only :1.6 is left");
        CHECK_UINT_EQ(o.total, 50 * KiB, "the whole is :1.6's");
        CHECK_UINT_EQ(o.high, 350 * KiB, "the most ever held is kept, for the figures");
        bus_outbox_done(&o);
        CHECK_UINT_EQ(o.total, 0, "done leaves nothing");
}

/* A Ping() that timed out or that the bus refused confirms nothing; a
 * client that is gone is forgotten with all it had. */
static void test_failed_and_gone(void) {
        BusOutbox o;
        OutboxClient *c;

        bus_outbox_init(&o, MiB, 16 * MiB);
        c = bus_outbox_sent(&o, ":1.7", 500 * KiB);
        bus_outbox_ping_sent(c);
        bus_outbox_ping_failed(c);
        CHECK_UINT_EQ(bus_outbox_bytes_of(&o, ":1.7"), 500 * KiB, "a failed Ping() confirms nothing");
        CHECK(!c->ping_out && c->bytes_at_ping == 0, "and another is due");
        bus_outbox_ping_sent(c);
        bus_outbox_gone(c);
        CHECK_UINT_EQ(o.n_clients, 0, "gone: forgotten");
        CHECK_UINT_EQ(o.total, 0, "with its bytes");
        bus_outbox_done(&o);
}

/* The rule: a client below its share is answered, even with one large
 * answer; past its share it is refused, and reported once, not once per
 * call. Other clients are answered all along. */
static void test_admit_per_client(void) {
        BusOutbox o;
        bool first;

        bus_outbox_init(&o, MiB, 16 * MiB);
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.9", &first), OUTBOX_ADMIT, "nothing counted: admitted");
        CHECK(!first, "an admission is nothing to report");
        (void) bus_outbox_sent(&o, ":1.9", 3 * MiB);
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.9", &first), OUTBOX_REFUSE_CLIENT,
                     "3 MiB not confirmed, past 1 MiB: refused");
        CHECK(first, "the first refusal is the one reported");
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.9", &first), OUTBOX_REFUSE_CLIENT, "refused again");
        CHECK(!first, "but not reported again");
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.10", &first), OUTBOX_ADMIT, "another client is answered");
        (void) bus_outbox_sent(&o, ":1.11", MiB - 1);
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.11", &first), OUTBOX_ADMIT, "just below its share: admitted");
        bus_outbox_done(&o);
}

/* Past the whole bound, clients with bytes unconfirmed are refused, and
 * those with nothing are still answered: many clients each below its share
 * cannot together make the daemon's answers pile up without bound, and a
 * client that takes each answer is not punished for the others. */
static void test_admit_total(void) {
        BusOutbox o;
        OutboxClient *c[5];
        char name[16];
        bool first;

        bus_outbox_init(&o, MiB, 4 * MiB);
        for (unsigned i = 0; i < 5; i++) {
                snprintf(name, sizeof(name), ":1.%u", 100 + i);
                CHECK_INT_EQ(bus_outbox_admit(&o, name, &first), OUTBOX_ADMIT, "client %s, nothing counted: admitted", name);
                c[i] = bus_outbox_sent(&o, name, MiB - 1);
                bus_outbox_ping_sent(c[i]);
        }
        CHECK(o.total >= 4 * MiB, "five clients each below its share hold more than the whole bound");
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.100", &first), OUTBOX_REFUSE_TOTAL,
                     "one of them, with bytes unconfirmed, is refused");
        CHECK(first, "and reported");
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.200", &first), OUTBOX_ADMIT, "a client with nothing counted is answered");
        CHECK(!bus_outbox_confirmed(c[3]), "one client confirms everything");
        CHECK(!bus_outbox_confirmed(c[4]), "and another");
        CHECK_INT_EQ(bus_outbox_admit(&o, ":1.100", &first), OUTBOX_ADMIT, "under the bound again: admitted");
        bus_outbox_done(&o);
}

/* Many answers and Ping()s: the sums stay exact and nothing is left. */
static void test_many(void) {
        BusOutbox o;
        bool ok = true;

        bus_outbox_init(&o, MiB, 16 * MiB);
        for (unsigned round = 0; round < 1000; round++) {
                OutboxClient *a = bus_outbox_sent(&o, ":1.1", 1000 + round);
                OutboxClient *b = bus_outbox_sent(&o, ":1.2", 7);
                if (!a || !b) {
                        ok = false;
                        break;
                }
                if (!a->ping_out)
                        bus_outbox_ping_sent(a);
                if (!b->ping_out)
                        bus_outbox_ping_sent(b);
                if (round % 3 == 0)
                        (void) bus_outbox_confirmed(a);
                if (bus_outbox_bytes_of(&o, ":1.1") + bus_outbox_bytes_of(&o, ":1.2") != o.total)
                        ok = false;
        }
        CHECK(ok, "1,000 rounds of answers and Ping()s: the clients' shares add up to the whole");
        CHECK_UINT_EQ(bus_outbox_bytes_of(&o, ":1.2"), 7000, "the client that never answers has all of it counted");
        bus_outbox_done(&o);
        CHECK_UINT_EQ(o.n_clients, 0, "done leaves nothing");
}

/* A broadcast (no destination) is no one client's doing: not counted. */
static void test_broadcast(void) {
        BusOutbox o;

        bus_outbox_init(&o, MiB, 16 * MiB);
        CHECK(bus_outbox_sent(&o, NULL, 5 * MiB) == NULL, "a signal to all");
        CHECK_UINT_EQ(o.total, 0, "is not counted");
        bus_outbox_done(&o);
}

int main(void) {
        test_confirmed_before_ping();
        test_failed_and_gone();
        test_admit_per_client();
        test_admit_total();
        test_many();
        test_broadcast();
        return tap_done();
}
