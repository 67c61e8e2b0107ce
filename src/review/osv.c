/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "osv.h"
#include "string-table.h"
#include "string-util.h"

static const char *const osv_severity_table[_OSV_SEVERITY_MAX] = {
        [OSV_SEVERITY_UNKNOWN] = "unknown",
        [OSV_SEVERITY_LOW] = "LOW",
        [OSV_SEVERITY_MODERATE] = "MODERATE",
        [OSV_SEVERITY_HIGH] = "HIGH",
        [OSV_SEVERITY_CRITICAL] = "CRITICAL",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(osv_severity, OsvSeverity);

/* ---- CVSS ---- */

typedef struct Metric {
        const char *name;
        const char *values;     /* the letters it takes */
        double weights[4];
        double value;
        char letter;
} Metric;

static int cvss_metrics(const char *s, Metric *m, size_t n) {
        while (*s) {
                const char *slash = strchr(s, '/') ?: s + strlen(s), *colon = memchr(s, ':', (size_t) (slash - s));

                if (!colon || colon == s || slash - colon != 2)
                        return -EINVAL;
                for (size_t i = 0; i < n; i++) {
                        const char *pos;
                        if (strlen(m[i].name) != (size_t) (colon - s) || strncmp(m[i].name, s, (size_t) (colon - s)) != 0)
                                continue;
                        pos = strchr(m[i].values, colon[1]);
                        if (!pos || colon[1] == '\0' || m[i].letter)
                                return -EINVAL;
                        m[i].letter = colon[1];
                        m[i].value = m[i].weights[pos - m[i].values];
                }
                s = *slash ? slash + 1 : slash;
        }
        for (size_t i = 0; i < n; i++)
                if (!m[i].letter)
                        return -EINVAL;
        return 0;
}

/* CVSS 3.1's Roundup: the smallest number of one decimal place not below x,
 * computed on integers so that 4.000000001 does not become 4.1. */
static double cvss3_roundup(double x) {
        long i = lround(x * 100000.0);
        if (i % 10000 == 0)
                return (double) i / 100000.0;
        return (double) (i / 10000 + 1) / 10.0;
}

static int cvss3_score(const char *s, double *ret) {
        Metric m[] = {
                { .name = "AV", .values = "NALP", .weights = { 0.85, 0.62, 0.55, 0.2 } },
                { .name = "AC", .values = "LH", .weights = { 0.77, 0.44 } },
                { .name = "PR", .values = "NLH", .weights = { 0.85, 0.62, 0.27 } },
                { .name = "UI", .values = "NR", .weights = { 0.85, 0.62 } },
                { .name = "S", .values = "UC", .weights = { 0, 1 } },
                { .name = "C", .values = "HLN", .weights = { 0.56, 0.22, 0 } },
                { .name = "I", .values = "HLN", .weights = { 0.56, 0.22, 0 } },
                { .name = "A", .values = "HLN", .weights = { 0.56, 0.22, 0 } },
        };
        double iss, impact, expl, pr;
        bool changed;
        int r;

        r = cvss_metrics(s, m, ELEMENTSOF(m));
        if (r < 0)
                return r;
        changed = m[4].letter == 'C';
        pr = m[2].value;
        if (changed && m[2].letter == 'L')
                pr = 0.68;
        else if (changed && m[2].letter == 'H')
                pr = 0.5;
        iss = 1 - (1 - m[5].value) * (1 - m[6].value) * (1 - m[7].value);
        impact = changed ? 7.52 * (iss - 0.029) - 3.25 * pow(iss - 0.02, 15) : 6.42 * iss;
        expl = 8.22 * m[0].value * m[1].value * pr * m[3].value;
        if (impact <= 0)
                *ret = 0;
        else if (changed)
                *ret = cvss3_roundup(MIN(1.08 * (impact + expl), 10.0));
        else
                *ret = cvss3_roundup(MIN(impact + expl, 10.0));
        return 0;
}

static int cvss2_score(const char *s, double *ret) {
        Metric m[] = {
                { .name = "AV", .values = "LAN", .weights = { 0.395, 0.646, 1.0 } },
                { .name = "AC", .values = "HML", .weights = { 0.35, 0.61, 0.71 } },
                { .name = "Au", .values = "MSN", .weights = { 0.45, 0.56, 0.704 } },
                { .name = "C", .values = "NPC", .weights = { 0, 0.275, 0.660 } },
                { .name = "I", .values = "NPC", .weights = { 0, 0.275, 0.660 } },
                { .name = "A", .values = "NPC", .weights = { 0, 0.275, 0.660 } },
        };
        double impact, expl;
        int r;

        r = cvss_metrics(s, m, ELEMENTSOF(m));
        if (r < 0)
                return r;
        impact = 10.41 * (1 - (1 - m[3].value) * (1 - m[4].value) * (1 - m[5].value));
        expl = 20 * m[0].value * m[1].value * m[2].value;
        *ret = round(((0.6 * impact) + (0.4 * expl) - 1.5) * (impact == 0 ? 0 : 1.176) * 10.0) / 10.0;
        if (*ret < 0)
                *ret = 0;
        return 0;
}

int cvss_base_score(const char *vector, double *ret) {
        _cleanup_free_ char *v = NULL;
        size_t n;

        if (!vector || !ret)
                return -EINVAL;
        n = strlen(vector);
        if (n == 0 || n > 256)
                return -EINVAL;
        if (strneq(vector, "CVSS:4.", 7))
                return -EOPNOTSUPP;
        if (strneq(vector, "CVSS:3.0/", 9) || strneq(vector, "CVSS:3.1/", 9))
                return cvss3_score(vector + 9, ret);
        if (strneq(vector, "CVSS:2.0/", 9))
                return cvss2_score(vector + 9, ret);
        if (vector[0] == '(' && vector[n - 1] == ')') {
                v = strndup(vector + 1, n - 2);
                if (!v)
                        return -ENOMEM;
                vector = v;
        }
        if (strneq(vector, "AV:", 3))
                return cvss2_score(vector, ret);
        return -EINVAL;
}

/* ---- records ---- */

static json_object *get(json_object *o, const char *key, json_type type) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
                return NULL;
        return v;
}

static const char *get_string(json_object *o, const char *key) {
        json_object *v = get(o, key, json_type_string);
        return v ? json_object_get_string(v) : NULL;
}

static OsvSeverity severity_from_word(const char *s) {
        if (!s)
                return OSV_SEVERITY_UNKNOWN;
        if (strcasecmp(s, "CRITICAL") == 0)
                return OSV_SEVERITY_CRITICAL;
        if (strcasecmp(s, "HIGH") == 0 || strcasecmp(s, "IMPORTANT") == 0)
                return OSV_SEVERITY_HIGH;
        if (strcasecmp(s, "MODERATE") == 0 || strcasecmp(s, "MEDIUM") == 0)
                return OSV_SEVERITY_MODERATE;
        if (strcasecmp(s, "LOW") == 0)
                return OSV_SEVERITY_LOW;
        return OSV_SEVERITY_UNKNOWN;
}

static OsvSeverity severity_from_score(double s) {
        return s >= 9.0 ? OSV_SEVERITY_CRITICAL : s >= 7.0 ? OSV_SEVERITY_HIGH : s >= 4.0 ? OSV_SEVERITY_MODERATE :
               OSV_SEVERITY_LOW;
}

OsvSeverity osv_record_severity(json_object *record, double *ret_score) {
        json_object *severity = get(record, "severity", json_type_array), *affected = get(record, "affected", json_type_array);
        OsvSeverity best = severity_from_word(get_string(get(record, "database_specific", json_type_object), "severity"));
        double score = -1;

        for (size_t i = 0; affected && i < json_object_array_length(affected); i++) {
                json_object *a = json_object_array_get_idx(affected, i);
                best = MAX(best, severity_from_word(get_string(get(a, "database_specific", json_type_object), "severity")));
                best = MAX(best, severity_from_word(get_string(get(a, "ecosystem_specific", json_type_object), "severity")));
        }
        for (size_t i = 0; severity && i < json_object_array_length(severity); i++) {
                json_object *s = json_object_array_get_idx(severity, i);
                const char *type = get_string(s, "type"), *vector = get_string(s, "score");
                double v;

                if (!type || !vector || !(streq(type, "CVSS_V3") || streq(type, "CVSS_V2")))
                        continue;
                if (cvss_base_score(vector, &v) < 0)
                        continue;
                score = MAX(score, v);
                best = MAX(best, severity_from_score(v));
        }
        if (ret_score)
                *ret_score = score;
        return best;
}

static char *name_normalize(Ecosystem e, const char *s, size_t n) {
        char *r = malloc(n + 1);
        size_t k = 0;

        if (!r)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (e == ECOSYSTEM_PYPI) {
                        if (c == '-' || c == '_' || c == '.') {
                                if (k > 0 && r[k - 1] == '-')
                                        continue;
                                c = '-';
                        }
                        c = (char) tolower((unsigned char) c);
                }
                r[k++] = c;
        }
        r[k] = '\0';
        return r;
}

static bool name_equal(Ecosystem e, const char *a, const char *b) {
        _cleanup_free_ char *x = NULL, *y = NULL;

        if (e != ECOSYSTEM_PYPI)
                return streq(a, b);
        x = name_normalize(e, a, strlen(a));
        y = name_normalize(e, b, strlen(b));
        return x && y && streq(x, y);
}

#define RANGE_EVENTS_MAX 256U

typedef struct Event {
        const char *version;    /* NULL: "introduced": "0" */
        char type;              /* 'i', 'f', 'l' */
} Event;

/* 1: inside, 0: outside, <0: a version that does not parse. */
static int range_affects(Ecosystem e, json_object *events, const char *version) {
        Event ev[RANGE_EVENTS_MAX];
        size_t n = 0;
        bool affected = false;
        int r, c;

        for (size_t i = 0; i < json_object_array_length(events) && n < ELEMENTSOF(ev); i++) {
                json_object *o = json_object_array_get_idx(events, i);
                const char *v;

                if ((v = get_string(o, "introduced")))
                        ev[n++] = (Event) { .version = streq(v, "0") ? NULL : v, .type = 'i' };
                else if ((v = get_string(o, "fixed")))
                        ev[n++] = (Event) { .version = v, .type = 'f' };
                else if ((v = get_string(o, "last_affected")))
                        ev[n++] = (Event) { .version = v, .type = 'l' };
        }
        /* Sorted by version (insertion sort: n is small and bounded). */
        for (size_t i = 1; i < n; i++) {
                Event x = ev[i];
                size_t j = i;
                while (j > 0) {
                        if (!ev[j - 1].version)
                                c = x.version ? -1 : 0;
                        else if (!x.version)
                                c = 1;
                        else {
                                r = version_compare(e, ev[j - 1].version, x.version, &c);
                                if (r < 0)
                                        return r;
                        }
                        if (c <= 0)
                                break;
                        ev[j] = ev[j - 1];
                        j--;
                }
                ev[j] = x;
        }
        for (size_t i = 0; i < n; i++) {
                if (!ev[i].version)
                        c = 1;
                else {
                        r = version_compare(e, version, ev[i].version, &c);
                        if (r < 0)
                                return r;
                }
                if (ev[i].type == 'i' && c >= 0)
                        affected = true;
                else if (ev[i].type == 'f' && c >= 0)
                        affected = false;
                else if (ev[i].type == 'l' && c > 0)
                        affected = false;
        }
        return affected;
}

int osv_record_affects(json_object *record, Ecosystem e, const char *name, const char *version) {
        json_object *affected;

        if (!json_object_is_type(record, json_type_object))
                return -EINVAL;
        if (get_string(record, "withdrawn"))
                return 0;
        affected = get(record, "affected", json_type_array);
        for (size_t i = 0; affected && i < json_object_array_length(affected); i++) {
                json_object *a = json_object_array_get_idx(affected, i), *pkg = get(a, "package", json_type_object);
                json_object *versions = get(a, "versions", json_type_array), *ranges = get(a, "ranges", json_type_array);
                const char *eco = get_string(pkg, "ecosystem"), *pname = get_string(pkg, "name");

                if (!eco || !pname || !streq(eco, ecosystem_to_string(e)) || !name_equal(e, pname, name))
                        continue;
                for (size_t k = 0; versions && k < json_object_array_length(versions); k++) {
                        json_object *v = json_object_array_get_idx(versions, k);
                        int c;
                        if (!json_object_is_type(v, json_type_string))
                                continue;
                        if (streq(json_object_get_string(v), version) ||
                            (version_compare(e, json_object_get_string(v), version, &c) >= 0 && c == 0))
                                return 1;
                }
                for (size_t k = 0; ranges && k < json_object_array_length(ranges); k++) {
                        json_object *range = json_object_array_get_idx(ranges, k), *events = get(range, "events", json_type_array);
                        const char *type = get_string(range, "type");
                        if (!type || !events || !(streq(type, "SEMVER") || streq(type, "ECOSYSTEM")))
                                continue;
                        if (range_affects(e, events, version) > 0)
                                return 1;
                }
        }
        return 0;
}

static int record_findings(json_object *record, const DependencyChange *changes, size_t n_changes, FindingList *out) {
        const char *id = get_string(record, "id"), *summary = get_string(record, "summary");
        json_object *aliases = get(record, "aliases", json_type_array);
        const char *alias = aliases && json_object_array_length(aliases) > 0 ?
                json_object_get_string(json_object_array_get_idx(aliases, 0)) : NULL;
        OsvSeverity sev = OSV_SEVERITY_UNKNOWN;
        bool have_sev = false;
        double score = -1;
        int r;

        if (!id)
                return 0;
        for (size_t i = 0; i < n_changes; i++) {
                const DependencyChange *c = &changes[i];
                _cleanup_free_ char *score_text = NULL;

                if (!c->check_version || !c->name)
                        continue;
                r = osv_record_affects(record, c->ecosystem, c->name, c->check_version);
                if (r <= 0)
                        continue;
                if (!have_sev) {
                        sev = osv_record_severity(record, &score);
                        have_sev = true;
                }
                if (score >= 0 && asprintf(&score_text, ", CVSS %.1f", score) < 0)
                        return -ENOMEM;
                r = finding_list_add(out, FINDING_VULNERABLE_DEPENDENCY,
                                     sev >= OSV_SEVERITY_HIGH ? FINDING_ERROR : FINDING_WARNING, c->manifest, 0, id,
                                     "%s %s (%s) is covered by advisory %s%s%s%s (%s%s)%s%s", c->name, c->check_version,
                                     ecosystem_to_string(c->ecosystem), id, alias ? " (" : "", strempty(alias), alias ? ")" : "",
                                     osv_severity_to_string(sev), strempty(score_text), summary ? ": " : ".", strempty(summary));
                if (r < 0)
                        return r;
        }
        return 0;
}

int osv_record_check(const char *text, size_t size, const DependencyChange *changes, size_t n_changes, FindingList *out) {
        _cleanup_json_ json_object *j = NULL;
        int r;

        if (size > OSV_RECORD_MAX)
                return -EFBIG;
        r = json_parse_strict(text, size, &j);
        if (r < 0)
                return r;
        if (!json_object_is_type(j, json_type_object))
                return -EBADMSG;
        return record_findings(j, changes, n_changes, out);
}

/* The end of the JSON string that begins after t[-1] == '"' (its closing
 * quote, or end), and whether it holds an escape. */
static const char *json_string_end(const char *t, const char *end, bool *ret_escaped) {
        *ret_escaped = false;
        for (; t < end && *t != '"'; t++)
                if (*t == '\\') {
                        *ret_escaped = true;
                        if (t + 1 < end)
                                t++;
                }
        return t;
}

/* Without parsing: does the text name, as some "name": "X", a package looked
 * for? Most records of an export do not, and this keeps a look-up through
 * tens of thousands of them at the cost of reading them. The text is read
 * string by string, so a quote inside a string is never taken for the start
 * of a key; a key or a name with an escape in it (which may decode to
 * "name", or to a wanted package) is taken as a candidate. */
static bool text_names_wanted(Ecosystem e, const char *t, size_t n, char *const *wanted, size_t n_wanted) {
        const char *end = t + n;

        for (const char *p = t; (p = memchr(p, '"', (size_t) (end - p)));) {
                const char *key = ++p, *key_end, *v, *q;
                _cleanup_free_ char *name = NULL;
                bool escaped;

                key_end = json_string_end(key, end, &escaped);
                if (key_end >= end)
                        return false;   /* unterminated: not JSON, the parse would refuse it */
                p = key_end + 1;
                while (p < end && isspace((unsigned char) *p))
                        p++;
                if (p >= end || *p != ':')
                        continue;       /* a string value, not a key */
                p++;
                if (!escaped && !(key_end - key == 4 && strneq(key, "name", 4)))
                        continue;
                while (p < end && isspace((unsigned char) *p))
                        p++;
                if (p >= end || *p != '"')
                        continue;
                v = ++p;
                q = json_string_end(v, end, &escaped);
                if (q >= end)
                        return false;
                p = q + 1;
                if (escaped)
                        return true;
                name = name_normalize(e, v, (size_t) (q - v));
                if (!name)
                        return true;
                for (size_t i = 0; i < n_wanted; i++)
                        if (streq(wanted[i], name))
                                return true;
        }
        return false;
}

bool osv_text_may_name(Ecosystem e, const char *text, size_t size, const char *name) {
        _cleanup_free_ char *w = NULL;

        w = name_normalize(e, name, strlen(name));
        if (!w)
                return true;
        return text_names_wanted(e, text, size, &w, 1);
}

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static int check_ecosystem(int db_fd, Ecosystem e, const DependencyChanges *c, FindingList *out, OsvStats *stats) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_strv_free_ char **wanted = NULL;
        size_t n_wanted = 0;
        struct dirent *de;
        int r;

        for (size_t i = 0; i < c->n; i++) {
                char *w;
                if (c->changes[i].ecosystem != e || !c->changes[i].check_version)
                        continue;
                w = name_normalize(e, c->changes[i].name, strlen(c->changes[i].name));
                if (!w)
                        return -ENOMEM;
                r = strv_extend(&wanted, w);
                free(w);
                if (r < 0)
                        return r;
                n_wanted++;
        }
        if (n_wanted == 0)
                return 0;

        d = xopendirat(db_fd, ecosystem_to_string(e), O_NOFOLLOW);
        if (!d)
                return errno == ENOENT ? 0 : -errno;

        while ((errno = 0, de = readdir(d))) {
                _cleanup_free_ char *text = NULL;
                size_t size, l = strlen(de->d_name);

                if (l < 6 || !streq(de->d_name + l - 5, ".json") || de->d_name[0] == '.')
                        continue;
                r = read_file_at(dirfd(d), de->d_name, OSV_RECORD_MAX, &text, &size);
                if (r < 0) {
                        if (r == -ENOMEM)
                                return r;
                        stats->records_skipped++;
                        continue;
                }
                stats->files_read++;
                if (!text_names_wanted(e, text, size, wanted, n_wanted))
                        continue;
                stats->records_parsed++;
                r = osv_record_check(text, size, c->changes, c->n, out);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        stats->records_skipped++;
        }
        return errno > 0 ? -errno : 0;
}

int osv_check(const char *dir, const DependencyChanges *c, FindingList *out, OsvStats *ret_stats, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        OsvStats stats = {};
        int r;

        assert(dir);
        assert(c);
        assert(out);

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                return error_set(ret_error, r, "Cannot open the vulnerability database '%s': %s", dir, strerror(-r));
        }
        for (Ecosystem e = 0; e < _ECOSYSTEM_MAX; e++) {
                r = check_ecosystem(fd, e, c, out, &stats);
                if (r < 0)
                        return error_set(ret_error, r, "Cannot read the vulnerability database '%s/%s': %s", dir,
                                         ecosystem_to_string(e), strerror(-r));
        }
        if (ret_stats)
                *ret_stats = stats;
        return 0;
}
