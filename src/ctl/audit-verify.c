/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "audit-list.h"
#include "audit-verify.h"
#include "json-util.h"
#include "string-util.h"

#define VERIFY_ENTRIES_MAX 1000000U

typedef struct JournalCommit {
        char commit[41];
        unsigned step;          /* UINT_MAX: not a step (a verified entry) */
        bool undoable;          /* a later reset or rejection may have taken it off the branch */
} JournalCommit;

typedef struct Verify {
        JournalCommit *commits;
        size_t n_commits;
        char delivered[41];     /* the last delivered entry's commit */
        unsigned n_entries;
        json_object *gaps;      /* array of strings */
} Verify;

static void verify_done(Verify *v) {
        free(v->commits);
        json_object_put(v->gaps);
}

static bool commit_id_ok(const char *s) {
        return strlen(s) == 40 && strspn(s, "0123456789abcdef") == 40;
}

static int verify_gap(Verify *v, const char *fmt, ...) _printf_(2, 3);
static int verify_gap(Verify *v, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        return json_object_array_add(v->gaps, json_object_new_string(s)) < 0 ? -ENOMEM : 0;
}

static JournalCommit *verify_find(Verify *v, const char *commit) {
        for (size_t i = 0; i < v->n_commits; i++)
                if (streq(v->commits[i].commit, commit))
                        return &v->commits[i];
        return NULL;
}

/* Reads the task's entries in the order journald has them. */
static int verify_read_journal(Verify *v, const char *id) {
        _cleanup_(sd_journal_closep) sd_journal *j = NULL;
        char match[64];
        int r;

        r = sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
        if (r < 0)
                return r;
        /* SECURITY: any process may log AGENTFAB_TASK= or AGENTFAB_COMMIT=;
         * only what journald attributes to agentfab.service counts. */
        snprintf(match, sizeof(match), "AGENTFAB_TASK=%s", id);
        r = sd_journal_add_match(j, match, 0);
        if (r >= 0)
                r = sd_journal_add_match(j, "_SYSTEMD_UNIT=agentfab.service", 0);
        if (r < 0)
                return r;

        SD_JOURNAL_FOREACH(j) {
                char event[64], commit[64], step_s[32];
                unsigned step = UINT_MAX;

                if (++v->n_entries > VERIFY_ENTRIES_MAX)
                        return -E2BIG;
                (void) journal_field(j, "AGENTFAB_EVENT", event, sizeof(event));
                (void) journal_field(j, "AGENTFAB_COMMIT", commit, sizeof(commit));
                if (journal_field(j, "AGENTFAB_STEP", step_s, sizeof(step_s)) >= 0) {
                        char *end;
                        unsigned long u = strtoul(step_s, &end, 10);
                        if (*end == '\0' && end != step_s && u < UINT_MAX)
                                step = (unsigned) u;
                }

                if (streq(event, "step") || streq(event, "verified")) {
                        if (isempty(commit))
                                continue;   /* a step that changed nothing; a failed verification */
                        if (!commit_id_ok(commit)) {
                                r = verify_gap(v, "journal: a %s entry names '%s', which is not a commit id", event, commit);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        JournalCommit *c = verify_find(v, commit);
                        if (!c) {
                                JournalCommit *n = reallocarray(v->commits, v->n_commits + 1, sizeof(JournalCommit));
                                if (!n)
                                        return -ENOMEM;
                                v->commits = n;
                                c = &v->commits[v->n_commits++];
                                memcpy(c->commit, commit, 41);
                        }
                        c->step = streq(event, "step") ? step : UINT_MAX;
                        c->undoable = false;
                } else if (streq(event, "reset")) {
                        /* ResetTo() a checkpoint of step S: what came after it went off the branch. */
                        for (size_t i = 0; i < v->n_commits; i++)
                                if (step == UINT_MAX || v->commits[i].step > step)
                                        v->commits[i].undoable = true;
                } else if (streq(event, "reject")) {
                        /* A rejection undoes the step that tripped the breaker:
                         * the latest one that made a commit, if any did. */
                        for (size_t i = v->n_commits; i > 0; i--)
                                if (!v->commits[i - 1].undoable) {
                                        v->commits[i - 1].undoable = true;
                                        break;
                                }
                } else if (streq(event, "delivered") && commit_id_ok(commit))
                        memcpy(v->delivered, commit, 41);
        }
        return 0;
}

int audit_verify(sd_bus *bus, const char *id, const char *path, bool json) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *state = NULL;
        _cleanup_(verify_done) Verify v = {};
        _cleanup_json_ json_object *branch = json_object_new_array();
        const char *commit, *subject;
        uint32_t step;
        int r;

        v.gaps = json_object_new_array();
        if (!v.gaps || !branch)
                return -ENOMEM;

        r = sd_bus_get_property_string(bus, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE, "State", &error, &state);
        if (r >= 0) {
                /* Answered after the task's other work on its repository:
                 * more than sd-bus's default 25 s, as for Export(). */
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
                r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE,
                                                   "ListCommits");
                if (r >= 0)
                        r = sd_bus_call(bus, m, 10 * 60 * 1000000ULL, &error, &reply);
        }
        if (r < 0) {
                fprintf(stderr, "Cannot read the branch of task %s: %s\n", id, error.message ?: strerror(-r));
                return r;
        }
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(sus)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(sus)", &commit, &step, &subject)) > 0) {
                if (!commit_id_ok(commit))
                        return -EBADMSG;
                if (json_object_array_add(branch, json_object_new_string(commit)) < 0)
                        return -ENOMEM;
        }
        if (r < 0)
                return r;

        r = verify_read_journal(&v, id);
        if (r < 0) {
                fprintf(stderr, "Cannot read the journal: %s%s\n", strerror(-r),
                        geteuid() != 0 ? " (reading the system journal needs membership in group systemd-journal or adm)" : "");
                return r;
        }
        if (v.n_entries == 0) {
                fprintf(stderr, "No journal entries of agentfab.service for task %s%s.\n", id,
                        geteuid() != 0 ? " (reading the system journal needs membership in group systemd-journal or adm)" : "");
                return -ENOENT;
        }

        size_t n_branch = json_object_array_length(branch);
        /* Journal → branch. */
        for (size_t i = 0; i < v.n_commits; i++) {
                JournalCommit *c = &v.commits[i];
                bool found = false;

                for (size_t k = 0; k < n_branch && !found; k++)
                        found = streq(json_object_get_string(json_object_array_get_idx(branch, k)), c->commit);
                if (found || c->undoable)
                        continue;
                if (c->step != UINT_MAX)
                        r = verify_gap(&v, "journal: the commit of step %u, %s, is not on the branch", c->step, c->commit);
                else
                        r = verify_gap(&v, "journal: the verified commit %s is not on the branch", c->commit);
                if (r < 0)
                        return r;
        }
        /* Branch → journal. */
        for (size_t k = 0; k < n_branch; k++) {
                const char *c = json_object_get_string(json_object_array_get_idx(branch, k));
                if (verify_find(&v, c))
                        continue;
                r = verify_gap(&v, "branch: commit %s has no step or verified entry in the journal", c);
                if (r < 0)
                        return r;
        }
        /* The delivered tip. */
        const char *tip = n_branch > 0 ? json_object_get_string(json_object_array_get_idx(branch, n_branch - 1)) : NULL;
        if (v.delivered[0] && !streq_ptr(tip, v.delivered))
                r = verify_gap(&v, "delivered: the journal says %s was delivered, the branch's tip is %s", v.delivered,
                               tip ?: "the base");
        else if (!v.delivered[0] && streq(state, "succeeded"))
                r = verify_gap(&v, "delivered: the task succeeded, but the journal has no delivered entry");
        if (r < 0)
                return r;

        size_t n_gaps = json_object_array_length(v.gaps);
        if (json) {
                _cleanup_json_ json_object *o = json_object_new_object();
                if (!o || json_add_string(o, "task", id) < 0 || json_add_uint64(o, "commits", n_branch) < 0 ||
                    json_add_uint64(o, "entries", v.n_entries) < 0 ||
                    json_object_object_add(o, "gaps", json_object_get(v.gaps)) < 0)
                        return -ENOMEM;
                printf("%s\n", json_to_line(o));
        } else {
                for (size_t i = 0; i < n_gaps; i++)
                        printf("gap: %s\n", json_object_get_string(json_object_array_get_idx(v.gaps, i)));
                printf("Task %s: %zu commit%s on the branch, %u journal entr%s checked: ", id, n_branch,
                       n_branch == 1 ? "" : "s", v.n_entries, v.n_entries == 1 ? "y" : "ies");
                if (n_gaps == 0)
                        printf("no gaps.\n");
                else
                        printf("%zu gap%s.\n", n_gaps, n_gaps == 1 ? "" : "s");
        }
        return (int) MIN(n_gaps, (size_t) INT_MAX);
}
