/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-check.h"
#include "macro.h"
#include "string-util.h"

/* A commit that a step or verified entry names. */
typedef struct JournalCommit {
        const char *commit;
        unsigned step;          /* UINT_MAX: not a step (a verified entry) */
        bool has_epoch;
        uint64_t epoch;
        bool undoable;          /* a later reset, rejection or takeover may have taken it off the branch */
} JournalCommit;

/* What the entries say of one epoch of the task (fleet only). */
typedef struct Epoch {
        uint64_t epoch;
        const char *host;               /* of its first entry */
        const AuditEntry *takeover;     /* its first takeover entry */
        size_t takeover_index;
        unsigned max_step;              /* of its step entries; 0 without */
        bool other_host_said;
} Epoch;

void audit_check_done(AuditCheck *c) {
        for (size_t i = 0; i < c->n_gaps; i++)
                free(c->gaps[i]);
        c->gaps = mfree_ptr(c->gaps);
        c->n_gaps = 0;
}

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long u;

        if (!s[0] || s[0] == '-' || s[0] == '+' || s[0] == ' ')
                return -EINVAL;
        errno = 0;
        u = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0')
                return -EINVAL;
        *ret = (uint64_t) u;
        return 0;
}

static void field_set(char *dst, size_t size, const char *value, size_t n) {
        n = MIN(n, size - 1);
        memcpy(dst, value, n);
        dst[n] = '\0';
}

void audit_entry_set(AuditEntry *e, const char *field, const char *value, size_t n) {
        char v[32];
        uint64_t u;

        if (streq(field, "AGENTFAB_EVENT"))
                field_set(e->event, sizeof(e->event), value, n);
        else if (streq(field, "AGENTFAB_COMMIT"))
                field_set(e->commit, sizeof(e->commit), value, n);
        else if (streq(field, "AGENTFAB_HOST"))
                field_set(e->host, sizeof(e->host), value, n);
        else if (streq(field, "AGENTFAB_FROM_HOST"))
                field_set(e->from_host, sizeof(e->from_host), value, n);
        else {
                /* A number longer than v is no number: cut, it fails to parse. */
                field_set(v, sizeof(v), value, n);
                if (n >= sizeof(v))
                        v[0] = 'x';
                if (streq(field, "AGENTFAB_STEP"))
                        e->step = parse_u64(v, &u) >= 0 && u < UINT_MAX ? (unsigned) u : UINT_MAX;
                else if (streq(field, "AGENTFAB_EPOCH")) {
                        e->has_epoch = parse_u64(v, &u) >= 0;
                        e->epoch = e->has_epoch ? u : 0;
                } else if (streq(field, "AGENTFAB_FROM_EPOCH"))
                        e->from_epoch = parse_u64(v, &u) >= 0 ? u : UINT64_MAX;
        }
}

static bool commit_id_ok(const char *s) {
        return strlen(s) == 40 && strspn(s, "0123456789abcdef") == 40;
}

static int gap(AuditCheck *c, const char *fmt, ...) _printf_(2, 3);
static int gap(AuditCheck *c, const char *fmt, ...) {
        char **n, *s;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        n = reallocarray(c->gaps, c->n_gaps + 1, sizeof(char *));
        if (!n) {
                free(s);
                return -ENOMEM;
        }
        c->gaps = n;
        c->gaps[c->n_gaps++] = s;
        return 0;
}

static bool on_branch(char *const *branch, size_t n_branch, const char *commit) {
        for (size_t k = 0; k < n_branch; k++)
                if (streq(branch[k], commit))
                        return true;
        return false;
}

static bool is_step(const AuditEntry *e) {
        return streq(e->event, "step") && e->step != UINT_MAX;
}

static Epoch *epoch_find(Epoch *epochs, size_t n, uint64_t epoch) {
        for (size_t i = 0; i < n; i++)
                if (epochs[i].epoch == epoch)
                        return &epochs[i];
        return NULL;
}

static int epoch_compare(const void *a, const void *b) {
        const Epoch *x = a, *y = b;
        return x->epoch < y->epoch ? -1 : x->epoch > y->epoch;
}

/* The fleet's checks: one host per epoch, and each change of epoch marked
 * by its takeover. Marks in commits the old epoch's steps past a
 * takeover's step as undoable: the unacknowledged step, done again by the
 * new host, is not on the branch. */
static int check_epochs(const AuditEntry *entries, size_t n_entries, char *const *branch, size_t n_branch,
                        JournalCommit *commits, size_t n_commits, AuditCheck *c) {
        _cleanup_free_ Epoch *epochs = NULL;
        size_t n_epochs = 0;
        int r;

        /* Epoch 0 is the task before any claim (its submission, on whichever
         * host took it): no host holds it, so no host's rule applies. */
        for (size_t i = 0; i < n_entries; i++) {
                const AuditEntry *e = &entries[i];
                Epoch *p;

                if (!e->has_epoch || e->epoch == 0)
                        continue;
                p = epoch_find(epochs, n_epochs, e->epoch);
                if (!p) {
                        Epoch *n = reallocarray(epochs, n_epochs + 1, sizeof(Epoch));
                        if (!n)
                                return -ENOMEM;
                        epochs = n;
                        p = &epochs[n_epochs++];
                        *p = (Epoch) { .epoch = e->epoch, .host = e->host };
                } else if (!streq(p->host, e->host) && !p->other_host_said) {
                        /* Two hosts cannot both hold one claim: the fence
                         * failed, or the entries are not what was written. */
                        p->other_host_said = true;
                        r = gap(c, "epoch %" PRIu64 ": entries from two hosts, '%s' and '%s'", e->epoch, p->host, e->host);
                        if (r < 0)
                                return r;
                }
                if (streq(e->event, "takeover") && !p->takeover) {
                        p->takeover = e;
                        p->takeover_index = i;
                }
                if (is_step(e) && streq(p->host, e->host))
                        p->max_step = MAX(p->max_step, e->step);
        }
        if (n_epochs == 0)
                return 0;
        qsort(epochs, n_epochs, sizeof(Epoch), epoch_compare);

        /* The first claim comes from the queue, without a takeover; a
         * takeover at the first epoch seen names one whose entries are gone. */
        if (epochs[0].takeover) {
                const AuditEntry *t = epochs[0].takeover;
                r = gap(c, "epoch %" PRIu64 ": the takeover by '%s' names '%s' at epoch %" PRIu64
                        ", of which the journal has no entries", epochs[0].epoch, t->host, t->from_host, t->from_epoch);
                if (r < 0)
                        return r;
        }

        for (size_t i = 1; i < n_epochs; i++) {
                const Epoch *p = &epochs[i - 1], *e = &epochs[i];
                const AuditEntry *t = e->takeover;

                if (!t) {
                        r = gap(c, "epoch %" PRIu64 ": the entries go from '%s' at epoch %" PRIu64 " to '%s' at epoch %" PRIu64
                                " without a takeover entry", e->epoch, p->host, p->epoch, e->host, e->epoch);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (t->from_epoch != p->epoch || !streq(t->from_host, p->host)) {
                        r = gap(c, "epoch %" PRIu64 ": the takeover by '%s' names '%s' at epoch %" PRIu64
                                ", but the entries before it are of '%s' at epoch %" PRIu64,
                                e->epoch, t->host, t->from_host, t->from_epoch, p->host, p->epoch);
                        if (r < 0)
                                return r;
                }
                if (t->step == UINT_MAX || t->step > p->max_step) {
                        r = gap(c, "epoch %" PRIu64 ": the takeover goes on after step %s%u, but epoch %" PRIu64
                                " recorded no step past %u", e->epoch, t->step == UINT_MAX ? "(none) " : "",
                                t->step == UINT_MAX ? 0 : t->step, p->epoch, p->max_step);
                        if (r < 0)
                                return r;
                }
                if (!isempty(t->commit) && !on_branch(branch, n_branch, t->commit)) {
                        r = gap(c, "epoch %" PRIu64 ": the takeover's checkpoint %s is not on the branch", e->epoch, t->commit);
                        if (r < 0)
                                return r;
                }

                for (size_t k = 0; k < n_entries; k++) {
                        const AuditEntry *s = &entries[k];

                        if (!is_step(s) || !s->has_epoch)
                                continue;
                        r = 0;
                        /* The old epoch's step that the takeover goes on
                         * after is its checkpoint. */
                        if (s->epoch == p->epoch && s->step == t->step && !isempty(s->commit) &&
                            !isempty(t->commit) && !streq(s->commit, t->commit))
                                r = gap(c, "epoch %" PRIu64 ": the takeover's checkpoint %s is not the commit of step %u, %s",
                                        e->epoch, t->commit, s->step, s->commit);
                        else if (s->epoch == e->epoch && k < e->takeover_index)
                                r = gap(c, "epoch %" PRIu64 ": step %u is recorded before the takeover entry", e->epoch, s->step);
                        else if (s->epoch == e->epoch && s->step <= t->step)
                                r = gap(c, "epoch %" PRIu64 ": step %u again, but the takeover goes on after step %u",
                                        e->epoch, s->step, t->step);
                        if (r < 0)
                                return r;
                }
                /* Past the takeover's step, the old epoch's work was never
                 * acknowledged: the new host does that step again. */
                if (t->step != UINT_MAX)
                        for (size_t k = 0; k < n_commits; k++)
                                if (commits[k].has_epoch && commits[k].epoch == p->epoch && commits[k].step != UINT_MAX &&
                                    commits[k].step > t->step)
                                        commits[k].undoable = true;
        }
        return 0;
}

int audit_check(const AuditEntry *entries, size_t n_entries, char *const *branch, size_t n_branch, const char *state,
                AuditCheck *c) {
        _cleanup_free_ JournalCommit *commits = NULL;
        size_t n_commits = 0;
        const char *delivered = NULL;
        int r;

        for (size_t i = 0; i < n_entries; i++) {
                const AuditEntry *e = &entries[i];

                if (streq(e->event, "step") || streq(e->event, "verified")) {
                        JournalCommit *j = NULL;

                        if (isempty(e->commit))
                                continue;   /* a step that changed nothing; a failed verification */
                        if (!commit_id_ok(e->commit)) {
                                r = gap(c, "journal: a %s entry names '%s', which is not a commit id", e->event, e->commit);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        for (size_t k = 0; k < n_commits && !j; k++)
                                if (streq(commits[k].commit, e->commit))
                                        j = &commits[k];
                        if (!j) {
                                JournalCommit *n = reallocarray(commits, n_commits + 1, sizeof(JournalCommit));
                                if (!n)
                                        return -ENOMEM;
                                commits = n;
                                j = &commits[n_commits++];
                                j->commit = e->commit;
                        }
                        j->step = streq(e->event, "step") ? e->step : UINT_MAX;
                        j->has_epoch = e->has_epoch;
                        j->epoch = e->epoch;
                        j->undoable = false;
                } else if (streq(e->event, "reset")) {
                        /* ResetTo() a checkpoint of step S: what came after it went off the branch. */
                        for (size_t k = 0; k < n_commits; k++)
                                if (e->step == UINT_MAX || commits[k].step > e->step)
                                        commits[k].undoable = true;
                } else if (streq(e->event, "reject")) {
                        /* A rejection undoes the step that tripped the breaker:
                         * the latest one that made a commit, if any did. */
                        for (size_t k = n_commits; k > 0; k--)
                                if (!commits[k - 1].undoable) {
                                        commits[k - 1].undoable = true;
                                        break;
                                }
                } else if (streq(e->event, "delivered") && commit_id_ok(e->commit))
                        delivered = e->commit;
        }

        r = check_epochs(entries, n_entries, branch, n_branch, commits, n_commits, c);
        if (r < 0)
                return r;

        /* Journal → branch. */
        for (size_t i = 0; i < n_commits; i++) {
                const JournalCommit *j = &commits[i];

                if (j->undoable || on_branch(branch, n_branch, j->commit))
                        continue;
                if (j->step != UINT_MAX)
                        r = gap(c, "journal: the commit of step %u, %s, is not on the branch", j->step, j->commit);
                else
                        r = gap(c, "journal: the verified commit %s is not on the branch", j->commit);
                if (r < 0)
                        return r;
        }
        /* Branch → journal. */
        for (size_t k = 0; k < n_branch; k++) {
                bool found = false;

                for (size_t i = 0; i < n_commits && !found; i++)
                        found = streq(commits[i].commit, branch[k]);
                if (found)
                        continue;
                r = gap(c, "branch: commit %s has no step or verified entry in the journal", branch[k]);
                if (r < 0)
                        return r;
        }
        /* The delivered tip. */
        const char *tip = n_branch > 0 ? branch[n_branch - 1] : NULL;
        if (delivered && !streq_ptr(tip, delivered))
                return gap(c, "delivered: the journal says %s was delivered, the branch's tip is %s", delivered,
                           tip ?: "the base");
        if (!delivered && streq_ptr(state, "succeeded"))
                return gap(c, "delivered: the task succeeded, but the journal has no delivered entry");
        return 0;
}
