/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "audit-list.h"
#include "bus-client.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

static const char *journal_directory = NULL;
static char **journal_files = NULL;
static bool journal_merge = false;

void audit_set_journal_source(const char *directory, char **files, bool merge) {
        journal_directory = directory;
        journal_files = files;
        journal_merge = merge;
}

int audit_journal_open(sd_journal **ret) {
        if (journal_directory)
                return sd_journal_open_directory(ret, journal_directory, 0);
        if (journal_files && journal_files[0])
                return sd_journal_open_files(ret, (const char **) journal_files, 0);
        /* --merge: the journals of other machines too, as journalctl --merge
         * (those systemd-journal-remote writes under /var/log/journal/remote). */
        return sd_journal_open(ret, journal_merge ? 0 : SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
}

int journal_field(sd_journal *j, const char *field, char *buf, size_t n) {
        const void *data;
        size_t l, k = strlen(field) + 1;

        buf[0] = '\0';
        if (sd_journal_get_data(j, field, &data, &l) < 0 || l < k)
                return -ENOENT;
        l -= k;
        if (l >= n)
                l = n - 1;
        memcpy(buf, (const char *) data + k, l);
        buf[l] = '\0';
        return 0;
}

int audit_list(const char *id, bool json) {
        _cleanup_(sd_journal_closep) sd_journal *j = NULL;
        char match[64];
        unsigned n = 0;
        int r;

        r = audit_journal_open(&j);
        if (r < 0) {
                fprintf(stderr, "Failed to open the journal: %s\n", strerror(-r));
                return EXIT_FAIL;
        }

        /* SECURITY: any process may log AGENTFAB_TASK=; only entries that
         * journald itself attributes to agentfab.service are the audit trail. */
        snprintf(match, sizeof(match), "AGENTFAB_TASK=%s", id);
        r = sd_journal_add_match(j, match, 0);
        if (r >= 0)
                r = sd_journal_add_match(j, "_SYSTEMD_UNIT=agentfab.service", 0);
        if (r < 0)
                return EXIT_FAIL;

        SD_JOURNAL_FOREACH(j) {
                char message[4096], event[64], uid[32];
                uint64_t usec = 0;

                n++;
                (void) sd_journal_get_realtime_usec(j, &usec);
                (void) journal_field(j, "MESSAGE", message, sizeof(message));
                (void) journal_field(j, "AGENTFAB_EVENT", event, sizeof(event));
                (void) journal_field(j, "AGENTFAB_UID", uid, sizeof(uid));

                if (json) {
                        _cleanup_json_ json_object *o = json_object_new_object();
                        const void *data;
                        size_t l;

                        (void) json_add_uint64(o, "usec", usec);
                        SD_JOURNAL_FOREACH_DATA(j, data, l) {
                                const char *eq = memchr(data, '=', l);
                                if (!eq || !strneq(data, "AGENTFAB_", 9) ) {
                                        if (!eq || !(strneq(data, "MESSAGE=", 8) || strneq(data, "MESSAGE_ID=", 11)))
                                                continue;
                                }
                                _cleanup_free_ char *k = strndup(data, (size_t) (eq - (const char *) data));
                                _cleanup_free_ char *v = strndup(eq + 1, l - (size_t) (eq - (const char *) data) - 1);
                                if (k && v)
                                        (void) json_add_string(o, k, v);
                        }
                        printf("%s\n", json_to_line(o));
                } else {
                        char when[64];
                        format_timestamp(usec, when, sizeof(when));
                        printf("%s  %-10s %-6s %s\n", when, event, isempty(uid) ? "-" : uid, message);
                }
        }

        if (n == 0) {
                fprintf(stderr, "No audit entries for task %s%s.\n", id,
                        geteuid() != 0 ? " (reading the system journal needs membership in group systemd-journal or adm)" : "");
                return EXIT_NO_TASK;
        }
        return EXIT_OK;
}
