/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker-output.h"
#include "coverage.h"
#include "dependencies.h"
#include "json-util.h"
#include "osv.h"
#include "review-settings.h"
#include "review.h"
#include "secret-scan.h"
#include "string-table.h"
#include "string-util.h"

static const char *const review_breaker_table[_REVIEW_BREAKER_MAX] = {
        [REVIEW_BREAKER_SECRET] = "secret",
        [REVIEW_BREAKER_VULNERABLE_DEPENDENCY] = "vulnerable-dependency",
        [REVIEW_BREAKER_REVIEW] = "review",
        [REVIEW_BREAKER_COVERAGE_DROPPED] = "coverage-dropped",
};

DEFINE_STRING_TABLE_LOOKUP(review_breaker, ReviewBreaker);

void review_result_done(ReviewResult *r) {
        if (!r)
                return;
        finding_list_done(&r->findings);
        free(r->reason);
        strv_free(r->warnings);
        *r = (ReviewResult) {};
}

/* SECURITY: a checker may quote the line it is about, and so the secret on
 * it: what it says is kept only with every secret in it redacted. */
static int redact_findings(const SecretScanOptions *so, FindingList *l, size_t first) {
        for (size_t i = first; i < l->n; i++) {
                char **fields[] = { &l->items[i].message, &l->items[i].rule };

                for (size_t f = 0; f < ELEMENTSOF(fields); f++) {
                        char *redacted;

                        if (!*fields[f])
                                continue;
                        redacted = secret_redact_text(so, *fields[f]);
                        if (!redacted)
                                return -ENOMEM;
                        free(*fields[f]);
                        *fields[f] = redacted;
                }
        }
        return 0;
}

static int review_checkers(const ReviewInput *in, FindingList *out) {
        int r;

        for (size_t i = 0; i < in->n_checkers; i++) {
                const ReviewCheckerOutput *c = &in->checkers[i];
                _cleanup_free_ char *error = NULL;
                CheckerStats stats = {};
                const char *name = c->name ?: "checker";

                r = checker_parse(name, c->output ?: "", c->output ? c->size : 0, in->files, in->n_files, out, &stats, &error);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        /* SECURITY: fail closed; a model that breaks a checker's output must not pass its review. */
                        r = finding_list_add(out, FINDING_REVIEW_ERROR, FINDING_ERROR, NULL, 0, name,
                                             "The output of checker '%s' could not be read: %s", name,
                                             error ?: strerror(-r));
                        if (r < 0)
                                return r;
                        continue;
                }
                if (stats.dropped > 0) {
                        r = finding_list_add(out, FINDING_STATIC_CHECK, FINDING_WARNING, NULL, 0, name,
                                             "Checker '%s': %zu more findings on changed lines were not kept (limit %u).",
                                             name, stats.dropped, CHECKER_FINDINGS_MAX);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int review_dependencies(const ReviewConfig *c, const ReviewInput *in, FindingList *out) {
        _cleanup_(dependency_changes_done) DependencyChanges changes = {};
        int r;

        for (size_t i = 0; i < in->n_manifests; i++) {
                const ReviewManifest *m = &in->manifests[i];
                _cleanup_(dependency_list_done) DependencyList probe = {};
                _cleanup_free_ char *error = NULL;
                ManifestKind k = manifest_kind_from_path(m->path);
                const char *old = m->old_text;

                if (k < 0 || !m->new_text)
                        continue;
                /* What the task wrote must parse (a manifest broken on purpose would
                 * hide what it adds); a base that this reader cannot parse only means
                 * that everything counts as added. */
                r = manifest_parse(k, m->new_text, m->new_size, &probe, &error);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        r = finding_list_add(out, FINDING_REVIEW_ERROR, FINDING_ERROR, m->path, 0, "manifest",
                                             "The manifest could not be read: %s", error ?: strerror(-r));
                        if (r < 0)
                                return r;
                        continue;
                }
                error = mfree_ptr(error);
                if (old) {
                        _cleanup_(dependency_list_done) DependencyList base = {};
                        r = manifest_parse(k, old, m->old_size, &base, &error);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0) {
                                r = finding_list_add(out, FINDING_DEPENDENCY, FINDING_WARNING, m->path, 0, "manifest",
                                                     "The base's manifest could not be read (%s); every dependency counts as added.",
                                                     error ?: strerror(-r));
                                if (r < 0)
                                        return r;
                                old = NULL;
                        }
                }
                r = dependencies_diff(m->path, old, m->old_size, m->new_text, m->new_size, &changes, NULL);
                if (r < 0)
                        return r;
        }

        if (c->vulnerability_database && changes.n > 0) {
                _cleanup_free_ char *error = NULL;
                r = osv_check(c->vulnerability_database, &changes, out, NULL, &error);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        r = finding_list_add(out, FINDING_REVIEW_ERROR, FINDING_ERROR, NULL, 0, "vulnerability-database",
                                             "The dependency check could not be done: %s", error ?: strerror(-r));
                        if (r < 0)
                                return r;
                }
        }
        return dependency_changes_to_findings(&changes, out);
}

static int review_coverage(const ReviewConfig *c, const ReviewInput *in, FindingList *out) {
        const ReviewCoverageReports *cov = in->coverage;
        _cleanup_free_ char *error = NULL;
        Coverage base, final;
        double tolerance = c->coverage_tolerance >= 0 ? c->coverage_tolerance : REVIEW_COVERAGE_TOLERANCE_DEFAULT;
        int r;

        if (!cov)
                return 0;
        if (!cov->final)
                return finding_list_add(out, FINDING_REVIEW_ERROR, FINDING_ERROR, cov->path, 0, "coverage-report",
                                        "The test command wrote no coverage report.");
        r = coverage_parse(cov->final, cov->final_size, &final, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return finding_list_add(out, FINDING_REVIEW_ERROR, FINDING_ERROR, cov->path, 0, "coverage-report",
                                        "The final tree's coverage report could not be read: %s", error ?: strerror(-r));
        if (!cov->base)
                return finding_list_add(out, FINDING_COVERAGE, FINDING_WARNING, cov->path, 0, NULL,
                                        "Line coverage %.2f%%; the base has no report to compare with.", final.percent);
        error = mfree_ptr(error);
        r = coverage_parse(cov->base, cov->base_size, &base, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return finding_list_add(out, FINDING_COVERAGE, FINDING_WARNING, cov->path, 0, NULL,
                                        "Line coverage %.2f%%; the base's report could not be read: %s", final.percent,
                                        error ?: strerror(-r));
        r = coverage_compare(&base, &final, tolerance, cov->path, out);
        return r < 0 ? r : 0;
}

/* The first error finding of a kind, for the reason. */
static const Finding *first_error(const FindingList *l, FindingKind k) {
        for (size_t i = 0; i < l->n; i++)
                if (l->items[i].kind == k && l->items[i].severity == FINDING_ERROR)
                        return &l->items[i];
        return NULL;
}

static int set_reason(ReviewResult *res, ReviewBreaker b, size_t n, const char *what, const Finding *f) {
        _cleanup_free_ char *raw = NULL, *where = NULL;

        if (f && f->file && asprintf(&where, " in %s%s%.0u", f->file, f->line > 0 ? ":" : "", f->line) < 0)
                return -ENOMEM;
        if (asprintf(&raw, "%zu %s%s%s%s%s", n, what, strempty(where), f ? ": " : "", f ? f->message : "", "") < 0)
                return -ENOMEM;
        res->reason = finding_escape(raw, strlen(raw), FINDING_MESSAGE_MAX);
        if (!res->reason)
                return -ENOMEM;
        res->tripped = true;
        res->breaker = b;
        return 0;
}

int review_run(const ReviewConfig *c, const ReviewInput *in, ReviewResult *ret) {
        static const ReviewConfig defaults = { .coverage_tolerance = -1 };
        _cleanup_(review_result_done) ReviewResult res = { .breaker = _REVIEW_BREAKER_INVALID };
        _cleanup_(review_repo_settings_done) ReviewRepoSettings settings = {};
        _cleanup_strv_free_ char **ignore = NULL;
        FindingList *l = &res.findings;
        size_t n;
        int r;

        assert(in);
        assert(ret);

        if (!c)
                c = &defaults;
        l->max = c->max_findings;
        for (size_t i = 0; i < in->n_files; i++)
                if (!review_file_is_valid(&in->files[i]))
                        return -EINVAL;

        if (in->repo_settings) {
                r = review_repo_settings_parse(in->repo_settings, in->repo_settings_size, &settings);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        r = strv_extend(&res.warnings, ".agentfab.md is too large; its review settings are ignored.");
                else
                        res.warnings = TAKE_PTR(settings.warnings);
                if (r < 0)
                        return r;
        }
        for (char **g = c->secret_scan_ignore; g && *g; g++)
                if (strv_extend(&ignore, *g) < 0)
                        return -ENOMEM;
        for (char **g = settings.secret_scan_ignore; g && *g; g++)
                if (strv_extend(&ignore, *g) < 0)
                        return -ENOMEM;

        /* Errors first, so that the findings most worth keeping come before the bound. */
        SecretScanOptions so = { .min_entropy = c->secret_min_entropy, .min_length = c->secret_min_length, .ignore_globs = ignore };
        r = secret_scan_files(&so, in->files, in->n_files, l);
        if (r < 0)
                return r;
        size_t first = l->n;
        r = review_checkers(in, l);
        if (r < 0)
                return r;
        r = redact_findings(&so, l, first);
        if (r < 0)
                return r;
        r = review_dependencies(c, in, l);
        if (r < 0)
                return r;
        r = review_coverage(c, in, l);
        if (r < 0)
                return r;

        finding_list_sort(l);

        /* Counted over every error added, also those past the bound. */
        if ((n = finding_list_errors(l, FINDING_SECRET)) > 0)
                r = set_reason(&res, REVIEW_BREAKER_SECRET, n, n == 1 ? "possible secret" : "possible secrets",
                               first_error(l, FINDING_SECRET));
        else if ((n = finding_list_errors(l, FINDING_VULNERABLE_DEPENDENCY)) > 0)
                r = set_reason(&res, REVIEW_BREAKER_VULNERABLE_DEPENDENCY, n,
                               n == 1 ? "dependency with a high or critical advisory" : "dependencies with high or critical advisories",
                               first_error(l, FINDING_VULNERABLE_DEPENDENCY));
        else if ((n = finding_list_errors(l, FINDING_STATIC_CHECK) + finding_list_errors(l, FINDING_REVIEW_ERROR)) > 0)
                r = set_reason(&res, REVIEW_BREAKER_REVIEW, n, n == 1 ? "review error" : "review errors",
                               first_error(l, FINDING_REVIEW_ERROR) ?: first_error(l, FINDING_STATIC_CHECK));
        else if ((n = finding_list_errors(l, FINDING_COVERAGE)) > 0)
                r = set_reason(&res, REVIEW_BREAKER_COVERAGE_DROPPED, n, "coverage drop", first_error(l, FINDING_COVERAGE));
        if (r < 0)
                return r;

        *ret = res;
        res = (ReviewResult) {};
        return 0;
}

int review_result_to_json(const ReviewResult *r, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object(), *findings = NULL;

        assert(r);
        assert(ret);

        if (!o)
                return -ENOMEM;
        if (finding_list_to_json(&r->findings, &findings) < 0)
                return -ENOMEM;
        if (json_object_object_add(o, "breaker", r->tripped ? json_object_new_string(review_breaker_to_string(r->breaker)) : NULL) < 0 ||
            json_object_object_add(o, "reason", r->tripped && r->reason ? json_object_new_string(r->reason) : NULL) < 0 ||
            json_object_object_add(o, "findings", TAKE_PTR(findings)) < 0 ||
            json_add_uint64(o, "dropped", r->findings.n_dropped) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

int review_result_to_markdown(const ReviewResult *r, char **ret) {
        _cleanup_free_ char *body = NULL, *head = NULL;
        int k;

        assert(r);
        assert(ret);

        k = finding_list_to_markdown(&r->findings, "Review", &body);
        if (k < 0)
                return k;
        if (!r->tripped) {
                *ret = TAKE_PTR(body);
                return 0;
        }
        /* The breaker line goes right below the heading. */
        const char *nl = strstr(body, "\n\n");
        if (!nl)
                return -EINVAL;
        if (asprintf(&head, "%.*s\n\n**Stopped for a person: breaker `%s`.**\n\n%s", (int) (nl - body), body,
                     review_breaker_to_string(r->breaker), nl + 2) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(head);
        return 0;
}
