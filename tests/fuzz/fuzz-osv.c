/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One osv.dev advisory record (JSON), checked against the packages and
 * versions it names itself (every affected[].package with each version of
 * its versions[] and its range events), as osv_check() checks a change.
 * Invariants: one finding per change the record covers (none without an
 * "id" or when withdrawn), an error exactly for HIGH and CRITICAL; a
 * version listed in versions[] is always covered; the cheap text test that
 * osv_check() makes before parsing never rejects a record that covers a
 * change; CVSS scores within 0..10 in steps of 0.1; version comparison
 * antisymmetric, reflexive and transitive over the versions named; the
 * findings survive JSON and markdown. */
#include <math.h>

#include "fuzz-review.h"
#include "osv.h"

#define CHANGES_MAX 12

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

static json_object *get(json_object *o, const char *key, json_type type) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
                return NULL;
        return v;
}

typedef struct Want {
        DependencyChange change;
        bool listed;    /* in versions[] of an entry naming the package */
} Want;

static void want_add(Want *w, size_t *n, Ecosystem e, const char *name, const char *version, bool listed) {
        if (*n >= CHANGES_MAX || !version)
                return;
        w[*n] = (Want) {
                .change = { .ecosystem = e, .manifest = (char *) "fuzz", .name = (char *) name, .check_version = (char *) version },
                .listed = listed,
        };
        (*n)++;
}

static void check_versions(Ecosystem e, const Want *w, size_t n) {
        int c[CHANGES_MAX][CHANGES_MAX];
        bool ok[CHANGES_MAX][CHANGES_MAX];

        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++) {
                        int r = version_compare(e, w[i].change.check_version, w[j].change.check_version, &c[i][j]);
                        ok[i][j] = r >= 0;
                        if (ok[i][j])
                                c[i][j] = c[i][j] < 0 ? -1 : c[i][j] > 0;
                }
        for (size_t i = 0; i < n; i++) {
                if (ok[i][i])
                        FUZZ_CHECK(c[i][i] == 0, "'%s' != itself", w[i].change.check_version);
                for (size_t j = 0; j < n; j++) {
                        FUZZ_CHECK(ok[i][j] == ok[j][i] && (!ok[i][j] || c[i][j] == -c[j][i]), "'%s' <=> '%s' not antisymmetric",
                                   w[i].change.check_version, w[j].change.check_version);
                        for (size_t k = 0; k < n; k++)
                                if (ok[i][j] && ok[j][k] && ok[i][k] && c[i][j] <= 0 && c[j][k] <= 0)
                                        FUZZ_CHECK(c[i][k] <= 0 && (c[i][k] < 0 || (c[i][j] == 0 && c[j][k] == 0)),
                                                   "'%s' <= '%s' <= '%s' but not transitively (%s)", w[i].change.check_version,
                                                   w[j].change.check_version, w[k].change.check_version, ecosystem_to_string(e));
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *j = NULL;
        Want w[CHANGES_MAX];
        DependencyChange changes[CHANGES_MAX];
        json_object *affected, *id;
        FindingList l = {};
        size_t n = 0, covered = 0;
        double score = -2;
        OsvSeverity sev;
        bool withdrawn, has_id;
        int r;

        if (size > 256 * 1024)
                return 0;
        if (json_parse_strict((const char *) data, size, &j) < 0 || !json_object_is_type(j, json_type_object)) {
                FUZZ_CHECK(osv_record_check((const char *) data, size, NULL, 0, &l) < 0, "a record that is not an object accepted");
                return 0;
        }
        withdrawn = get(j, "withdrawn", json_type_string);
        has_id = json_object_object_get_ex(j, "id", &id) && json_object_is_type(id, json_type_string);

        /* The changes: what the record names. */
        affected = get(j, "affected", json_type_array);
        for (size_t i = 0; affected && i < json_object_array_length(affected) && i < 4; i++) {
                json_object *a = json_object_array_get_idx(affected, i), *pkg = get(a, "package", json_type_object);
                json_object *eco = get(pkg, "ecosystem", json_type_string), *name = get(pkg, "name", json_type_string);
                json_object *versions = get(a, "versions", json_type_array), *ranges = get(a, "ranges", json_type_array);
                Ecosystem e;

                if (!eco || !name || (e = ecosystem_from_string(json_object_get_string(eco))) < 0)
                        continue;
                for (size_t k = 0; versions && k < json_object_array_length(versions) && k < 4; k++) {
                        json_object *v = json_object_array_get_idx(versions, k);
                        if (json_object_is_type(v, json_type_string))
                                want_add(w, &n, e, json_object_get_string(name), json_object_get_string(v), true);
                }
                for (size_t k = 0; ranges && k < json_object_array_length(ranges) && k < 2; k++) {
                        json_object *events = get(json_object_array_get_idx(ranges, k), "events", json_type_array);
                        for (size_t x = 0; events && x < json_object_array_length(events) && x < 4; x++) {
                                json_object *ev = json_object_array_get_idx(events, x);
                                static const char *const keys[] = { "introduced", "fixed", "last_affected" };
                                for (size_t y = 0; y < ELEMENTSOF(keys); y++) {
                                        json_object *v = get(ev, keys[y], json_type_string);
                                        if (v)
                                                want_add(w, &n, e, json_object_get_string(name), json_object_get_string(v), false);
                                }
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                changes[i] = w[i].change;

        r = osv_record_check((const char *) data, size, changes, n, &l);
        FUZZ_CHECK(r >= 0, "a record that parsed refused: %d", r);

        sev = osv_record_severity(j, &score);
        FUZZ_CHECK(sev >= OSV_SEVERITY_UNKNOWN && sev < _OSV_SEVERITY_MAX, "severity %d", (int) sev);
        FUZZ_CHECK(score == -1 || (score >= 0 && score <= 10 && fabs(score * 10 - round(score * 10)) < 1e-6), "score %g", score);

        for (size_t i = 0; i < n; i++) {
                r = osv_record_affects(j, w[i].change.ecosystem, w[i].change.name, w[i].change.check_version);
                FUZZ_CHECK(r == 0 || r == 1, "affects: %d", r);
                if (w[i].listed && !withdrawn)
                        FUZZ_CHECK(r == 1, "%s %s is listed in versions[] but not covered", w[i].change.name, w[i].change.check_version);
                if (withdrawn)
                        FUZZ_CHECK(r == 0, "a withdrawn record covers %s", w[i].change.name);
                if (r == 1)
                        FUZZ_CHECK(osv_text_may_name(w[i].change.ecosystem, (const char *) data, size, w[i].change.name),
                                   "the text test skips a record that covers %s %s", w[i].change.name, w[i].change.check_version);
                covered += r == 1;
        }
        FUZZ_CHECK(l.n == (has_id ? covered : 0), "%zu findings for %zu covered changes", l.n, covered);
        for (size_t i = 0; i < l.n; i++) {
                FUZZ_CHECK(l.items[i].kind == FINDING_VULNERABLE_DEPENDENCY, "kind %d", (int) l.items[i].kind);
                FUZZ_CHECK((l.items[i].severity == FINDING_ERROR) == (sev >= OSV_SEVERITY_HIGH), "severity %d for %s",
                           (int) l.items[i].severity, osv_severity_to_string(sev));
        }
        fuzz_check_findings(&l);
        finding_list_done(&l);

        for (Ecosystem e = 0; e < _ECOSYSTEM_MAX; e++) {
                Want same[CHANGES_MAX];
                size_t k = 0;
                for (size_t i = 0; i < n; i++)
                        if (w[i].change.ecosystem == e)
                                same[k++] = w[i];
                check_versions(e, same, k);
        }
        return 0;
}
