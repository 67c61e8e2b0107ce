/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <math.h>
#include <stdio.h>

#include "json-util.h"
#include "osv.h"
#include "string-util.h"
#include "tap.h"

static void test_cvss(void) {
        /* Scores the specifications' calculators give for these vectors. */
        static const struct { const char *v; double s; } t[] = {
                { "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", 9.8 },
                { "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:L/I:L/A:L", 7.3 },
                { "CVSS:3.0/AV:N/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H", 9.9 },
                { "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:L/I:N/A:N", 5.3 },
                { "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N", 0.0 },
                { "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N/E:P/RL:O", 6.1 },
                { "AV:N/AC:L/Au:N/C:P/I:P/A:P", 7.5 },
                { "(AV:N/AC:L/Au:N/C:C/I:C/A:C)", 10.0 },
        };
        double s;

        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                CHECK(cvss_base_score(t[i].v, &s) == 0 && fabs(s - t[i].s) < 0.001, "%s = %.1f (%.1f)", t[i].v, t[i].s, s);
        CHECK_ERRNO(cvss_base_score("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N", &s), -EOPNOTSUPP, "CVSS 4 not scored");
        CHECK_ERRNO(cvss_base_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H", &s), -EINVAL, "a missing metric");
        CHECK_ERRNO(cvss_base_score("CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", &s), -EINVAL, "a bad value");
        CHECK_ERRNO(cvss_base_score("CVSS:3.1/AV:N/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", &s), -EINVAL, "a metric twice");
        CHECK(cvss_base_score("CVSS:3.1/", &s) == -EINVAL && cvss_base_score("", &s) == -EINVAL, "empty");
}

static json_object *parse(const char *s) {
        json_object *j = NULL;
        (void) json_parse_strict(s, strlen(s), &j);
        return j;
}

static void test_ranges(void) {
        _cleanup_json_ json_object *r = parse(
                "{\"id\":\"X\",\"affected\":[{\"package\":{\"ecosystem\":\"PyPI\",\"name\":\"Foo_Bar\"},"
                "\"ranges\":[{\"type\":\"ECOSYSTEM\",\"events\":[{\"fixed\":\"1.5\"},{\"introduced\":\"1.0\"},"
                "{\"introduced\":\"2.0rc1\"},{\"last_affected\":\"2.1\"}]}]}]}");

        /* Events in any order, several intervals, last_affected inclusive, PEP 503 names. */
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "1.0"), 1, "introduced is inclusive");
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_PYPI, "foo.bar", "1.4.9"), 1, "inside");
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "1.5"), 0, "fixed is exclusive");
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "0.9"), 0, "before");
        CHECK(osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "2.0b1") == 0 &&
              osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "2.0rc1") == 1 &&
              osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "2.1") == 1 &&
              osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "2.1.post1") == 0, "second interval with last_affected");
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_NPM, "foo-bar", "1.0.0"), 0, "another ecosystem");
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_PYPI, "foo-baz", "1.0"), 0, "another package");
        CHECK_ERRNO(osv_record_affects(r, ECOSYSTEM_PYPI, "foo-bar", "not a version"), 0, "unparsable version: not covered");

        _cleanup_json_ json_object *s = parse("{\"id\":\"Y\",\"severity\":[{\"type\":\"CVSS_V3\",\"score\":\"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:L/I:N/A:N\"}],"
                                              "\"database_specific\":{\"severity\":\"HIGH\"}}");
        double score;
        CHECK(osv_record_severity(s, &score) == OSV_SEVERITY_HIGH && fabs(score - 5.3) < 0.001, "the highest of word and score");
}

static size_t len(const char *s) {
        return s ? strlen(s) : 0;
}

#define DIFF(path, old, new) dependencies_diff(path, old, len(old), new, strlen(new), &c, NULL)

static const Finding *find(const FindingList *l, const char *rule, const char *what) {
        for (size_t i = 0; i < l->n; i++)
                if (streq_ptr(l->items[i].rule, rule) && strstr(l->items[i].message, what))
                        return &l->items[i];
        return NULL;
}

static void test_database(void) {
        DependencyChanges c = {};
        FindingList l = {};
        OsvStats st = {};
        _cleanup_free_ char *error = NULL;
        const Finding *f;

        CHECK_INT_EQ(DIFF("requirements.txt", "requests==2.31.0\n",
                          "PyYAML==5.3.1\ndjango==3.2.1\nrequests==2.28.0\nhttpx==0.1\n"), 0, "requirements");
        CHECK_INT_EQ(DIFF("package-lock.json", "{\"packages\":{}}",
                          "{\"packages\":{\"node_modules/minimist\":{\"version\":\"1.2.5\"},\"node_modules/lodash\":{\"version\":\"4.17.20\"},"
                          "\"node_modules/x/node_modules/lodash\":{\"version\":\"4.17.21\"}}}"), 0, "lock");
        CHECK_INT_EQ(DIFF("go.mod", NULL, "require golang.org/x/net v0.7.0\n"), 0, "go.mod");
        CHECK_INT_EQ(DIFF("Cargo.lock", NULL, "[[package]]\nname = \"smallvec\"\nversion = \"0.6.9\"\n[[package]]\nname = \"smallvec\"\nversion = \"1.0.0\"\n"), 0,
                     "Cargo.lock");
        CHECK_INT_EQ(c.n, 10, "10 changes: %zu", c.n);

        CHECK_ERRNO(osv_check(OSV_TEST_DB, &c, &l, &st, &error), 0, "database read: %s", strempty(error));
        CHECK(st.records_skipped == 1 && st.files_read == 9, "9 .json files read, the broken one skipped: %u %u", st.files_read,
              st.records_skipped);
        f = find(&l, "TEST-PYPI-0001", "pyyaml 5.3.1");
        CHECK(f && f->severity == FINDING_ERROR && f->kind == FINDING_VULNERABLE_DEPENDENCY && strstr(f->message, "CRITICAL") &&
              strstr(f->message, "CVE-0000-0001") && streq(f->file, "requirements.txt"), "PyYAML: %s", f ? f->message : "");
        f = find(&l, "TEST-PYPI-0002", "django 3.2.1");
        CHECK(f && f->severity == FINDING_ERROR && strstr(f->message, "CVSS 9.8"), "django by versions[] and a CVSS vector: %s",
              f ? f->message : "");
        f = find(&l, "TEST-PYPI-0003", "requests 2.28.0");
        CHECK(f && f->severity == FINDING_WARNING, "a MODERATE advisory is a warning");
        CHECK(!find(&l, "TEST-PYPI-0004", ""), "withdrawn records are skipped");
        f = find(&l, "TEST-NPM-0001", "minimist 1.2.5");
        CHECK(f && f->severity == FINDING_ERROR && strstr(f->message, "HIGH"), "minimist: CVSS 7.3 is high");
        f = find(&l, "TEST-NPM-0002", "lodash 4.17.20");
        CHECK(f && f->severity == FINDING_ERROR && !find(&l, "TEST-NPM-0002", "4.17.21"), "lodash: last_affected and the affected entry's severity");
        f = find(&l, "TEST-GO-0001", "golang.org/x/net 0.7.0");
        CHECK(f && f->severity == FINDING_WARNING && strstr(f->message, "unknown"), "CVSS 4 only: unknown severity, a warning");
        f = find(&l, "TEST-RUST-0001", "smallvec 0.6.9");
        CHECK(f && f->severity == FINDING_ERROR && !find(&l, "TEST-RUST-0001", "1.0.0"), "smallvec: CVSS 2 score 10");
        CHECK_INT_EQ(l.n, 7, "7 findings in all: %zu", l.n);
        finding_list_done(&l);

        CHECK(osv_check("/nonexistent/osv", &c, &l, NULL, &error) == -ENOENT && strstr(error, "/nonexistent/osv"),
              "a missing database: %s", strempty(error));
        dependency_changes_done(&c);
}

/* The prefilter osv_check() runs before parsing a record: an escape in a key
 * or a name may spell what is looked for, a quote inside a string is no key
 * (a record naming the package only as "n\u0061me" was once skipped). */
static void test_prefilter(void) {
        static const char escaped_key[] =
                "{\"id\":\"X\",\"affected\":[{\"package\":{\"ecosystem\":\"PyPI\",\"n\\u0061me\":\"PyYAML\"},\"versions\":[\"5.3.1\"]}]}";
        static const char in_string[] = "{\"summary\":\"\\\"name\\\": \\\"pyyaml\\\"\",\"x\":\"name\"}";
        DependencyChange c = { .ecosystem = ECOSYSTEM_PYPI, .manifest = (char *) "r.txt", .name = (char *) "pyyaml",
                               .check_version = (char *) "5.3.1" };
        FindingList l = {};

        CHECK(osv_record_check(escaped_key, sizeof(escaped_key) - 1, &c, 1, &l) == 0 && l.n == 1, "the record covers it");
        finding_list_done(&l);
        CHECK(osv_text_may_name(ECOSYSTEM_PYPI, escaped_key, sizeof(escaped_key) - 1, "pyyaml"), "an escaped key is a candidate");
        CHECK(osv_text_may_name(ECOSYSTEM_PYPI, "{\"name\" : \"Flask_Login\"}", 24, "flask-login"), "PEP 503 names");
        CHECK(osv_text_may_name(ECOSYSTEM_NPM, "{\"name\":\"lo\\u0064ash\"}", 23, "lodash"), "an escaped name is a candidate");
        CHECK(!osv_text_may_name(ECOSYSTEM_PYPI, in_string, sizeof(in_string) - 1, "pyyaml"), "a key inside a string is none");
        CHECK(!osv_text_may_name(ECOSYSTEM_NPM, "{\"name\":\"lodash-es\"}", 21, "lodash"), "another name");
}

int main(void) {
        test_cvss();
        test_ranges();
        test_database();
        test_prefilter();
        return tap_done();
}
