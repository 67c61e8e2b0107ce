/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker-output.h"
#include "coverage.h"
#include "dependencies.h"
#include "json-util.h"
#include "osv.h"
#include "review-fuzz.h"
#include "review-settings.h"
#include "secret-scan.h"
#include "toml-walk.h"
#include "version.h"

/* Bounded: a fuzzer's input is small, and these never need more. */
#define FUZZ_INPUT_MAX (1U * 1024U * 1024U)

static char *copy(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

static void check_escaped(const char *s, size_t max) {
        if (!s)
                return;
        if (strlen(s) > max)
                abort();
        for (const unsigned char *c = (const unsigned char *) s; *c; c++)
                if (*c < 0x20 || *c == 0x7F)
                        abort();
}

/* Every finding is bounded and one line; serialising does not fail. */
static void check_findings(FindingList *l) {
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *md = NULL;

        for (size_t i = 0; i < l->n; i++) {
                check_escaped(l->items[i].file, FINDING_FILE_MAX);
                check_escaped(l->items[i].rule, FINDING_RULE_MAX);
                check_escaped(l->items[i].message, FINDING_MESSAGE_MAX);
                if (!l->items[i].message)
                        abort();
        }
        if (finding_list_to_json(l, &j) < 0 || finding_list_to_markdown(l, NULL, &md) < 0)
                abort();
        finding_list_done(l);
}

/* A fixed set of changed lines the checker parsers filter against. */
static const ReviewLine fuzz_lines[] = { { 1, "", 0 }, { 2, "", 0 }, { 3, "", 0 }, { 10, "", 0 } };
static const ReviewFile fuzz_files[] = {
        { "a.c", fuzz_lines, ELEMENTSOF(fuzz_lines) },
        { "src/b.sh", fuzz_lines, ELEMENTSOF(fuzz_lines) },
};

int review_fuzz_secret_scan(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ ReviewLine *lines = NULL;
        FindingList l = {};
        size_t n = 0;
        ReviewFile f = { .path = "fuzz.txt" };

        if (size > FUZZ_INPUT_MAX)
                return 0;
        text = copy(data, size);
        lines = calloc(size + 1, sizeof(ReviewLine));
        if (!lines)
                abort();
        for (char *s = text, *nl; s; s = nl) {
                nl = strchr(s, '\n');
                if (nl)
                        *nl++ = '\0';
                lines[n] = (ReviewLine) { (unsigned) n + 1, s, strlen(s) };
                n++;
        }
        f.lines = lines;
        f.n_lines = n;
        if (secret_scan_files(NULL, &f, 1, &l) < 0)
                abort();
        check_findings(&l);
        return 0;
}

static int fuzz_checker(const uint8_t *data, size_t size, bool sarif) {
        _cleanup_free_ char *error = NULL;
        FindingList l = {};

        if (size > FUZZ_INPUT_MAX)
                return 0;
        if (sarif)
                (void) checker_parse_sarif("fuzz", (const char *) data, size, fuzz_files, ELEMENTSOF(fuzz_files), &l, NULL, &error);
        else
                (void) checker_parse_lines("fuzz", (const char *) data, size, fuzz_files, ELEMENTSOF(fuzz_files), &l, NULL, &error);
        check_findings(&l);
        return 0;
}

int review_fuzz_sarif(const uint8_t *data, size_t size) {
        return fuzz_checker(data, size, true);
}

int review_fuzz_checker_lines(const uint8_t *data, size_t size) {
        return fuzz_checker(data, size, false);
}

int review_fuzz_manifest(const uint8_t *data, size_t size) {
        DependencyList l = {};
        _cleanup_free_ char *error = NULL;
        ManifestKind k;

        if (size < 1 || size > FUZZ_INPUT_MAX)
                return 0;
        k = (ManifestKind) (data[0] % _MANIFEST_KIND_MAX);
        if (manifest_parse(k, (const char *) data + 1, size - 1, &l, &error) >= 0)
                for (size_t i = 0; i < l.n; i++) {
                        _cleanup_free_ char *v = NULL;
                        if (!l.entries[i].key || !l.entries[i].name)
                                abort();
                        if (l.entries[i].version)
                                v = dependency_check_version(manifest_kind_ecosystem(k), k, l.entries[i].version);
                }
        dependency_list_done(&l);
        return 0;
}

static int toml_nop(const TomlValue *v, void *userdata) {
        if (!v->value || v->n_key > TOML_PATH_MAX || v->n_table > TOML_PATH_MAX)
                abort();
        return 0;
}

int review_fuzz_toml(const uint8_t *data, size_t size) {
        _cleanup_free_ char *error = NULL;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        (void) toml_walk((const char *) data, size, toml_nop, NULL, &error);
        return 0;
}

int review_fuzz_osv_record(const uint8_t *data, size_t size) {
        static char name_pypi[] = "pyyaml", name_npm[] = "lodash", v1[] = "5.3.1", v2[] = "4.17.20";
        DependencyChange changes[] = {
                { .ecosystem = ECOSYSTEM_PYPI, .manifest = name_pypi, .name = name_pypi, .check_version = v1 },
                { .ecosystem = ECOSYSTEM_NPM, .manifest = name_npm, .name = name_npm, .check_version = v2 },
        };
        FindingList l = {};

        if (size > FUZZ_INPUT_MAX)
                return 0;
        (void) osv_record_check((const char *) data, size, changes, ELEMENTSOF(changes), &l);
        check_findings(&l);
        return 0;
}

int review_fuzz_version(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        char *b;

        if (size > 4096)
                return 0;
        s = copy(data, size);
        b = strchr(s, '\n');
        if (!b)
                return 0;
        *b++ = '\0';
        for (Ecosystem e = 0; e < _ECOSYSTEM_MAX; e++) {
                int x, y;
                bool okx = version_compare(e, s, b, &x) >= 0, oky = version_compare(e, b, s, &y) >= 0;
                /* Antisymmetric, and a version equals itself. */
                if (okx != oky || (okx && x != -y) || (okx && version_compare(e, s, s, &x) >= 0 && x != 0))
                        abort();
        }
        return 0;
}

int review_fuzz_cvss(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        double d;

        if (size > 4096)
                return 0;
        s = copy(data, size);
        if (cvss_base_score(s, &d) >= 0 && !(d >= 0 && d <= 10))
                abort();
        return 0;
}

static int fuzz_coverage(const uint8_t *data, size_t size, bool xml) {
        _cleanup_free_ char *error = NULL;
        Coverage c;
        int r;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        r = xml ? coverage_parse_cobertura((const char *) data, size, &c, &error) :
                  coverage_parse_lcov((const char *) data, size, &c, &error);
        if (r >= 0 && !(c.percent >= 0 && c.percent <= 100))
                abort();
        if (r < 0 && r != -ENOMEM && !error)
                abort();        /* every failure says why */
        return 0;
}

int review_fuzz_lcov(const uint8_t *data, size_t size) {
        return fuzz_coverage(data, size, false);
}

int review_fuzz_cobertura(const uint8_t *data, size_t size) {
        return fuzz_coverage(data, size, true);
}

int review_fuzz_repo_settings(const uint8_t *data, size_t size) {
        ReviewRepoSettings s = {};

        if (size > FUZZ_INPUT_MAX)
                return 0;
        (void) review_repo_settings_parse((const char *) data, size, &s);
        for (char **g = s.secret_scan_ignore; g && *g; g++)
                if (!review_glob_is_valid(*g))
                        abort();
        review_repo_settings_done(&s);
        return 0;
}

int review_fuzz_findings_json(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *j = NULL;
        FindingList l = {};

        if (size > FUZZ_INPUT_MAX)
                return 0;
        if (json_parse_strict((const char *) data, size, &j) < 0)
                return 0;
        (void) finding_list_from_json(j, &l);
        check_findings(&l);
        return 0;
}

int review_fuzz_path(const uint8_t *data, size_t size) {
        _cleanup_free_ char *p = NULL;

        if (size > 8192)
                return 0;
        p = review_path_normalize((const char *) data, size);
        if (!p)
                return 0;
        if (p[0] == '/' || p[0] == '\0' || streq(p, "..") || strneq(p, "../", 3) || strstr(p, "/../") ||
            (strlen(p) >= 3 && streq(p + strlen(p) - 3, "/..")) || strstr(p, "//"))
                abort();
        check_escaped(p, 4096);
        return 0;
}

const ReviewFuzzTarget review_fuzz_targets[] = {
        { "secret-scan", review_fuzz_secret_scan },
        { "sarif", review_fuzz_sarif },
        { "checker-lines", review_fuzz_checker_lines },
        { "manifest", review_fuzz_manifest },
        { "toml", review_fuzz_toml },
        { "osv-record", review_fuzz_osv_record },
        { "version", review_fuzz_version },
        { "cvss", review_fuzz_cvss },
        { "lcov", review_fuzz_lcov },
        { "cobertura", review_fuzz_cobertura },
        { "repo-settings", review_fuzz_repo_settings },
        { "findings-json", review_fuzz_findings_json },
        { "path", review_fuzz_path },
        {}
};
