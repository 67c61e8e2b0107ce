/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "audit-branch.h"
#include "audit-check.h"
#include "audit-list.h"
#include "audit-verify.h"
#include "json-util.h"
#include "string-util.h"

#define VERIFY_ENTRIES_MAX 1000000U

typedef struct Entries {
        AuditEntry *entries;
        size_t n;
} Entries;

static void entries_done(Entries *e) {
        free(e->entries);
}

static bool commit_id_ok(const char *s) {
        return strlen(s) == 40 && strspn(s, "0123456789abcdef") == 40;
}

/* Reads the task's entries in the order journald (or, for a central
 * journal, systemd-journal-remote) has them. */
static int verify_read_journal(Entries *v, const char *id) {
        _cleanup_(sd_journal_closep) sd_journal *j = NULL;
        char match[64];
        int r;

        r = audit_journal_open(&j);
        if (r < 0)
                return r;
        /* SECURITY: any process may log AGENTFAB_TASK= or AGENTFAB_COMMIT=;
         * only what journald attributes to agentfab.service counts. In a
         * central journal that is what each host's journald said, as its
         * systemd-journal-upload sent it: the central journal is only as
         * good as the upload's TLS client authentication (agentfabd(8)). */
        snprintf(match, sizeof(match), "AGENTFAB_TASK=%s", id);
        r = sd_journal_add_match(j, match, 0);
        if (r >= 0)
                r = sd_journal_add_match(j, "_SYSTEMD_UNIT=agentfab.service", 0);
        if (r < 0)
                return r;

        SD_JOURNAL_FOREACH(j) {
                static const char *const fields[] = {
                        "AGENTFAB_EVENT", "AGENTFAB_COMMIT", "AGENTFAB_STEP", "AGENTFAB_HOST",
                        "AGENTFAB_EPOCH", "AGENTFAB_FROM_HOST", "AGENTFAB_FROM_EPOCH",
                };
                AuditEntry *e, *n;

                if (v->n >= VERIFY_ENTRIES_MAX)
                        return -E2BIG;
                n = reallocarray(v->entries, v->n + 1, sizeof(AuditEntry));
                if (!n)
                        return -ENOMEM;
                v->entries = n;
                e = &v->entries[v->n++];
                *e = (AuditEntry) { .step = UINT_MAX };
                for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                        const void *data;
                        size_t l, k = strlen(fields[i]) + 1;

                        if (sd_journal_get_data(j, fields[i], &data, &l) < 0 || l < k)
                                continue;
                        audit_entry_set(e, fields[i], (const char *) data + k, l - k);
                }
        }
        return 0;
}

/* The branch as the daemon lists it (ListCommits()), and the task's state. */
static int branch_from_daemon(sd_bus *bus, const char *id, const char *path, char **ret_state, json_object *branch) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *commit, *subject;
        uint32_t step;
        int r;

        r = sd_bus_get_property_string(bus, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE, "State", &error, ret_state);
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
        return r;
}

int audit_verify(sd_bus *bus, const char *id, const char *path, const char *repository, bool json) {
        _cleanup_free_ char *state = NULL;
        _cleanup_(entries_done) Entries v = {};
        _cleanup_(audit_check_done) AuditCheck c = {};
        _cleanup_json_ json_object *branch = json_object_new_array();
        _cleanup_strv_free_ char **from_repository = NULL;
        _cleanup_free_ char **commits = NULL;
        size_t n_branch;
        int r;

        if (!branch)
                return -ENOMEM;

        if (repository) {
                /* No daemon knows the task here: its state is unknown, and
                 * the branch is what the fleet published. */
                _cleanup_free_ char *error = NULL;

                r = audit_branch_from_repository(repository, id, &from_repository, &n_branch, &error);
                if (r < 0) {
                        fprintf(stderr, "%s\n", error ?: strerror(-r));
                        return r;
                }
        } else {
                r = branch_from_daemon(bus, id, path, &state, branch);
                if (r < 0)
                        return r;
        }

        r = verify_read_journal(&v, id);
        if (r < 0) {
                fprintf(stderr, "Cannot read the journal: %s%s\n", strerror(-r),
                        geteuid() != 0 ? " (reading the system journal needs membership in group systemd-journal or adm)" : "");
                return r;
        }
        if (v.n == 0) {
                fprintf(stderr, "No journal entries of agentfab.service for task %s%s.\n", id,
                        geteuid() != 0 ? " (reading the system journal needs membership in group systemd-journal or adm)" : "");
                return -ENOENT;
        }

        if (!from_repository) {
                n_branch = json_object_array_length(branch);
                commits = calloc(n_branch + 1, sizeof(char *));
                if (!commits)
                        return -ENOMEM;
                for (size_t k = 0; k < n_branch; k++)
                        commits[k] = (char *) json_object_get_string(json_object_array_get_idx(branch, k));
        }
        r = audit_check(v.entries, v.n, from_repository ?: commits, n_branch, state, &c);
        if (r < 0)
                return r;

        if (json) {
                _cleanup_json_ json_object *o = json_object_new_object();
                _cleanup_json_ json_object *gaps = json_object_new_array();

                if (!o || !gaps)
                        return -ENOMEM;
                for (size_t i = 0; i < c.n_gaps; i++)
                        if (json_object_array_add(gaps, json_object_new_string(c.gaps[i])) < 0)
                                return -ENOMEM;
                if (json_add_string(o, "task", id) < 0 || json_add_uint64(o, "commits", n_branch) < 0 ||
                    json_add_uint64(o, "entries", v.n) < 0 ||
                    json_object_object_add(o, "gaps", json_object_get(gaps)) < 0)
                        return -ENOMEM;
                printf("%s\n", json_to_line(o));
        } else {
                for (size_t i = 0; i < c.n_gaps; i++)
                        printf("gap: %s\n", c.gaps[i]);
                printf("Task %s: %zu commit%s on the branch, %zu journal entr%s checked: ", id, n_branch,
                       n_branch == 1 ? "" : "s", v.n, v.n == 1 ? "y" : "ies");
                if (c.n_gaps == 0)
                        printf("no gaps.\n");
                else
                        printf("%zu gap%s.\n", c.n_gaps, c.n_gaps == 1 ? "" : "s");
        }
        return (int) MIN(c.n_gaps, (size_t) INT_MAX);
}
