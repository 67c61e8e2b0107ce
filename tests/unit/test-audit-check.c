/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>
#include <stdarg.h>

#include "audit-check.h"
#include "tap.h"

/* A task's journal entries, made up: each entry a list of "FIELD=VALUE"
 * strings, as the journal reader hands them to audit_entry_set(). */
typedef struct Journal {
        AuditEntry e[64];
        size_t n;
} Journal;

static void add(Journal *j, ...) {
        AuditEntry *e = &j->e[j->n++];
        va_list ap;
        const char *f;

        *e = (AuditEntry) { .step = UINT_MAX };
        va_start(ap, j);
        while ((f = va_arg(ap, const char *))) {
                const char *eq = strchr(f, '=');
                char name[64];

                snprintf(name, sizeof(name), "%.*s", (int) (eq - f), f);
                audit_entry_set(e, name, eq + 1, strlen(eq + 1));
        }
        va_end(ap);
}

/* A commit id made of one hex digit. */
static const char *C(char c) {
        static char ids[16][41];
        static unsigned next = 0;
        char *s = ids[next++ % 16];

        memset(s, c, 40);
        s[40] = '\0';
        return s;
}

static char buf[8][160];
static unsigned nbuf = 0;
static const char *F(const char *fmt, ...) _printf_(1, 2);
static const char *F(const char *fmt, ...) {
        char *s = buf[nbuf++ % 8];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(s, sizeof(buf[0]), fmt, ap);
        va_end(ap);
        return s;
}

#define STEP(j, host, epoch, step, commit) \
        add(j, "AGENTFAB_EVENT=step", F("AGENTFAB_HOST=%s", host), F("AGENTFAB_EPOCH=%u", epoch), \
            F("AGENTFAB_STEP=%u", step), F("AGENTFAB_COMMIT=%s", commit), NULL)
#define EVENT(j, event, host, epoch) \
        add(j, "AGENTFAB_EVENT=" event, F("AGENTFAB_HOST=%s", host), F("AGENTFAB_EPOCH=%u", epoch), NULL)
#define TAKEOVER(j, host, epoch, from, from_epoch, step, commit) \
        add(j, "AGENTFAB_EVENT=takeover", F("AGENTFAB_HOST=%s", host), F("AGENTFAB_EPOCH=%u", epoch), \
            F("AGENTFAB_FROM_HOST=%s", from), F("AGENTFAB_FROM_EPOCH=%u", from_epoch), \
            F("AGENTFAB_STEP=%u", step), F("AGENTFAB_COMMIT=%s", commit), NULL)

static bool has_gap(const AuditCheck *c, const char *needle) {
        for (size_t i = 0; i < c->n_gaps; i++)
                if (strstr(c->gaps[i], needle))
                        return true;
        return false;
}

static void print_gaps(const AuditCheck *c) {
        for (size_t i = 0; i < c->n_gaps; i++)
                printf("# gap: %s\n", c->gaps[i]);
}

/* The commits of steps 1-3: a, b, c; step 3's first try at epoch 1 made d. */
static char a[41], b[41], cc[41], d[41], tip[41];

/* A task worked on by one host, claimed once: what a fleet does most of
 * the time must verify without a gap, epoch 0 (the submission, on another
 * host) included. */
static void test_one_epoch(void) {
        _cleanup_(audit_check_done) AuditCheck c = {};
        Journal j = {};
        char *branch[] = { a, b };

        EVENT(&j, "submitted", "host-b", 0);
        EVENT(&j, "sandbox", "host-a", 1);
        STEP(&j, "host-a", 1, 1, a);
        STEP(&j, "host-a", 1, 2, b);
        add(&j, "AGENTFAB_EVENT=delivered", "AGENTFAB_HOST=host-a", "AGENTFAB_EPOCH=1", F("AGENTFAB_COMMIT=%s", b), NULL);
        CHECK_INT_EQ(audit_check(j.e, j.n, branch, 2, "succeeded", &c), 0, "checked");
        print_gaps(&c);
        CHECK_UINT_EQ(c.n_gaps, 0, "one host at epoch 1, the submission at epoch 0 on another: no gap");
}

/* The takeover as agentfabd writes it: host-a died during step 3 (its
 * unacknowledged commit d journaled, never on the branch), host-b claimed
 * the task at epoch 2 after step 2 and did step 3 again. Only the takeover
 * entry makes that accepted; without it, the same entries are a gap. */
static void test_takeover(void) {
        char *branch[] = { a, b, cc };

        for (int with = 0; with < 2; with++) {
                _cleanup_(audit_check_done) AuditCheck c = {};
                Journal j = {};

                EVENT(&j, "submitted", "host-a", 0);
                STEP(&j, "host-a", 1, 1, a);
                STEP(&j, "host-a", 1, 2, b);
                STEP(&j, "host-a", 1, 3, d);
                if (with)
                        TAKEOVER(&j, "host-b", 2, "host-a", 1, 2, b);
                EVENT(&j, "sandbox", "host-b", 2);
                STEP(&j, "host-b", 2, 3, cc);
                CHECK_INT_EQ(audit_check(j.e, j.n, branch, 3, "running", &c), 0, "checked");
                if (with) {
                        print_gaps(&c);
                        CHECK_UINT_EQ(c.n_gaps, 0, "a marked takeover: the redone step 3 (%.7s) off the branch is accepted", d);
                } else {
                        CHECK(has_gap(&c, "epoch 2: the entries go from 'host-a' at epoch 1 to 'host-b' at epoch 2 without a takeover entry"),
                              "no takeover entry: the change of epoch is reported");
                        CHECK(has_gap(&c, F("journal: the commit of step 3, %s, is not on the branch", d)),
                              "and the old epoch's step 3 is not accepted as redone");
                }
        }
}

/* A forged or shuffled epoch: an entry of host-a relabelled to epoch 2,
 * another host's entry at epoch 1. */
static void test_two_hosts_one_epoch(void) {
        _cleanup_(audit_check_done) AuditCheck c = {};
        Journal j = {};
        char *branch[] = { a, b };

        STEP(&j, "host-a", 1, 1, a);
        EVENT(&j, "command", "host-b", 1);
        STEP(&j, "host-a", 1, 2, b);
        CHECK_INT_EQ(audit_check(j.e, j.n, branch, 2, NULL, &c), 0, "checked");
        CHECK(has_gap(&c, "epoch 1: entries from two hosts, 'host-a' and 'host-b'"), "two hosts at one epoch are reported");
        CHECK_UINT_EQ(c.n_gaps, 1, "once");
}

/* A takeover entry must say where the task was: the host and epoch before
 * it, a step that epoch reached, its checkpoint; and the new epoch's steps
 * come after it and past its step. */
static void test_takeover_wrong(void) {
        char *branch[] = { a, b, cc };
        _cleanup_(audit_check_done) AuditCheck c1 = {}, c2 = {}, c3 = {}, c4 = {};
        Journal j1 = {}, j2 = {}, j3 = {}, j4 = {};

        STEP(&j1, "host-a", 1, 1, a);
        STEP(&j1, "host-a", 1, 2, b);
        TAKEOVER(&j1, "host-b", 2, "host-c", 1, 2, b);
        STEP(&j1, "host-b", 2, 3, cc);
        CHECK_INT_EQ(audit_check(j1.e, j1.n, branch, 3, NULL, &c1), 0, "checked");
        CHECK(has_gap(&c1, "epoch 2: the takeover by 'host-b' names 'host-c' at epoch 1, but the entries before it are of 'host-a' at epoch 1"),
              "a takeover that names another host is reported");

        STEP(&j2, "host-a", 1, 1, a);
        TAKEOVER(&j2, "host-b", 2, "host-a", 1, 2, b);
        STEP(&j2, "host-b", 2, 3, cc);
        CHECK_INT_EQ(audit_check(j2.e, j2.n, branch, 3, NULL, &c2), 0, "checked");
        CHECK(has_gap(&c2, "epoch 2: the takeover goes on after step 2, but epoch 1 recorded no step past 1"),
              "a takeover after a step the old epoch never reached is reported");
        CHECK(has_gap(&c2, F("branch: commit %s has no step or verified entry in the journal", b)),
              "and the branch's commit without a step entry");

        STEP(&j3, "host-a", 1, 1, a);
        STEP(&j3, "host-a", 1, 2, b);
        STEP(&j3, "host-b", 2, 3, cc);
        TAKEOVER(&j3, "host-b", 2, "host-a", 1, 2, b);
        CHECK_INT_EQ(audit_check(j3.e, j3.n, branch, 3, NULL, &c3), 0, "checked");
        CHECK(has_gap(&c3, "epoch 2: step 3 is recorded before the takeover entry"), "a step before its takeover is reported");

        STEP(&j4, "host-a", 1, 1, a);
        STEP(&j4, "host-a", 1, 2, b);
        TAKEOVER(&j4, "host-b", 2, "host-a", 1, 1, a);
        STEP(&j4, "host-b", 2, 2, b);
        STEP(&j4, "host-b", 2, 3, cc);
        TAKEOVER(&j4, "host-c", 4, "host-b", 3, 3, cc);
        CHECK_INT_EQ(audit_check(j4.e, j4.n, branch, 3, NULL, &c4), 0, "checked");
        CHECK(!has_gap(&c4, "epoch 2:"), "a takeover after step 1 with steps 2 and 3 again: accepted");
        CHECK(has_gap(&c4, "epoch 4: the takeover by 'host-c' names 'host-b' at epoch 3, but the entries before it are of 'host-b' at epoch 2"),
              "a takeover from an epoch the journal lacks is reported");
        print_gaps(&c4);
}

/* A step that the takeover's own host repeats from before the takeover
 * would be on the branch twice. */
static void test_step_again(void) {
        _cleanup_(audit_check_done) AuditCheck c = {};
        Journal j = {};
        char *branch[] = { a, b, cc };

        STEP(&j, "host-a", 1, 1, a);
        STEP(&j, "host-a", 1, 2, b);
        TAKEOVER(&j, "host-b", 2, "host-a", 1, 2, b);
        STEP(&j, "host-b", 2, 2, cc);
        CHECK_INT_EQ(audit_check(j.e, j.n, branch, 3, NULL, &c), 0, "checked");
        CHECK(has_gap(&c, "epoch 2: step 2 again, but the takeover goes on after step 2"), "a step at or before the takeover's is reported");
        CHECK(has_gap(&c, F("epoch 2: the takeover's checkpoint %s", b)) == false, "its checkpoint is step 2's commit: not reported");
}

/* The checks of a host alone stay as they were: a gap each way, the tip,
 * and a reset's undone steps accepted. */
static void test_host_alone(void) {
        _cleanup_(audit_check_done) AuditCheck c = {}, c2 = {};
        Journal j = {}, j2 = {};
        char *branch[] = { a, tip };

        add(&j, "AGENTFAB_EVENT=step", "AGENTFAB_STEP=1", F("AGENTFAB_COMMIT=%s", a), NULL);
        add(&j, "AGENTFAB_EVENT=step", "AGENTFAB_STEP=2", F("AGENTFAB_COMMIT=%s", b), NULL);
        add(&j, "AGENTFAB_EVENT=step", "AGENTFAB_STEP=3", "AGENTFAB_COMMIT=not-a-commit", NULL);
        CHECK_INT_EQ(audit_check(j.e, j.n, branch, 2, "succeeded", &c), 0, "checked");
        CHECK(has_gap(&c, F("journal: the commit of step 2, %s, is not on the branch", b)), "journal → branch");
        CHECK(has_gap(&c, F("branch: commit %s has no step or verified entry in the journal", tip)), "branch → journal");
        CHECK(has_gap(&c, "journal: a step entry names 'not-a-commit', which is not a commit id"), "a bad commit id");
        CHECK(has_gap(&c, "delivered: the task succeeded, but the journal has no delivered entry"), "no delivery");
        CHECK_UINT_EQ(c.n_gaps, 4, "four gaps, nothing else (no epoch check without epochs)");

        add(&j2, "AGENTFAB_EVENT=step", "AGENTFAB_STEP=1", F("AGENTFAB_COMMIT=%s", a), NULL);
        add(&j2, "AGENTFAB_EVENT=step", "AGENTFAB_STEP=2", F("AGENTFAB_COMMIT=%s", b), NULL);
        add(&j2, "AGENTFAB_EVENT=reset", "AGENTFAB_STEP=1", NULL);
        add(&j2, "AGENTFAB_EVENT=step", "AGENTFAB_STEP=2", F("AGENTFAB_COMMIT=%s", tip), NULL);
        add(&j2, "AGENTFAB_EVENT=delivered", F("AGENTFAB_COMMIT=%s", tip), NULL);
        CHECK_INT_EQ(audit_check(j2.e, j2.n, branch, 2, "succeeded", &c2), 0, "checked");
        print_gaps(&c2);
        CHECK_UINT_EQ(c2.n_gaps, 0, "a reset's undone step 2 is accepted, the delivered tip matches");
}

/* Numbers that are not numbers are not taken as epoch 0 or step 0. */
static void test_fields(void) {
        AuditEntry e = { .step = UINT_MAX };

        audit_entry_set(&e, "AGENTFAB_EPOCH", "12x", 3);
        CHECK(!e.has_epoch, "epoch '12x' is none");
        audit_entry_set(&e, "AGENTFAB_EPOCH", "7", 1);
        CHECK(e.has_epoch && e.epoch == 7, "epoch 7");
        audit_entry_set(&e, "AGENTFAB_STEP", "-1", 2);
        CHECK_UINT_EQ(e.step, UINT_MAX, "step '-1' is none");
        audit_entry_set(&e, "AGENTFAB_FROM_EPOCH", "", 0);
        CHECK(e.from_epoch == UINT64_MAX, "an empty from-epoch names no epoch");
        audit_entry_set(&e, "AGENTFAB_HOST", "host-abc", 6);
        CHECK_STR_EQ(e.host, "host-a", "a value is taken with its length, not to a NUL");

        /* Values longer than the fields: a number cut to its first digits
         * would be another number; a commit id with more after it must not
         * become a valid one. */
        char digits[64], longer[100];
        memset(digits, '1', sizeof(digits));
        audit_entry_set(&e, "AGENTFAB_EPOCH", digits, sizeof(digits));
        CHECK(!e.has_epoch, "a 64-digit epoch is none, not its first digits");
        snprintf(longer, sizeof(longer), "%sffff", C('a'));
        audit_entry_set(&e, "AGENTFAB_COMMIT", longer, strlen(longer));
        CHECK_UINT_EQ(strlen(e.commit), 44, "a 44-character commit stays 44 characters, not a commit id");
}

int main(void) {
        memcpy(a, C('a'), 41);
        memcpy(b, C('b'), 41);
        memcpy(cc, C('c'), 41);
        memcpy(d, C('d'), 41);
        memcpy(tip, C('e'), 41);
        test_one_epoch();
        test_takeover();
        test_two_hosts_one_epoch();
        test_takeover_wrong();
        test_step_again();
        test_host_alone();
        test_fields();
        return tap_done();
}
