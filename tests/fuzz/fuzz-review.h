/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the fuzz targets of the review stage (src/review): what must hold
 * for every list of findings, whatever parser made it. */

#include "finding.h"
#include "fuzz.h"
#include "json-util.h"

/* A string a finding may carry: at most max bytes, one line, no control
 * characters (finding_escape()). */
FUZZ_UNINSTRUMENTED static inline void fuzz_check_escaped(const char *s, size_t max, const char *what) {
        if (!s)
                return;
        FUZZ_CHECK(strlen(s) <= max, "%s of %zu bytes, more than %zu", what, strlen(s), max);
        for (const unsigned char *c = (const unsigned char *) s; *c; c++)
                FUZZ_CHECK(*c >= 0x20 && *c != 0x7F, "%s holds control character 0x%02X", what, *c);
}

static inline const char *fuzz_strna(const char *s) {
        return s ?: "(null)";
}

static inline bool fuzz_finding_equal(const Finding *a, const Finding *b) {
        return a->kind == b->kind && a->severity == b->severity && a->line == b->line &&
               fuzz_streq_ptr(a->file, b->file) && fuzz_streq_ptr(a->rule, b->rule) && fuzz_streq_ptr(a->message, b->message);
}

/* Every finding bounded and one line; as JSON (the state file) and read
 * back, the same list; as markdown (the summary, a pull request body),
 * one bullet line per finding and nothing that opens HTML. */
FUZZ_UNINSTRUMENTED static inline void fuzz_check_findings_all(const FindingList *l) {
        _cleanup_json_ json_object *j = NULL;
        _cleanup_free_ char *md = NULL;
        FindingList back = {};
        size_t lines = 0;

        FUZZ_CHECK(l->n <= (l->max ?: FINDING_LIST_MAX_DEFAULT), "%zu findings kept", l->n);
        for (size_t i = 0; i < l->n; i++) {
                const Finding *f = &l->items[i];
                FUZZ_CHECK(f->kind >= 0 && f->kind < _FINDING_KIND_MAX, "kind %d", (int) f->kind);
                FUZZ_CHECK(f->severity >= 0 && f->severity < _FINDING_SEVERITY_MAX, "severity %d", (int) f->severity);
                FUZZ_CHECK(f->message, "a finding without a message");
                fuzz_check_escaped(f->file, FINDING_FILE_MAX, "file");
                fuzz_check_escaped(f->rule, FINDING_RULE_MAX, "rule");
                fuzz_check_escaped(f->message, FINDING_MESSAGE_MAX, "message");
        }

        FUZZ_CHECK(finding_list_to_json(l, &j) >= 0, "findings do not serialise");
        FUZZ_CHECK(finding_list_from_json(j, &back) >= 0, "findings serialised do not read back");
        FUZZ_CHECK(back.n == l->n, "%zu findings written, %zu read back", l->n, back.n);
        for (size_t i = 0; i < l->n; i++)
                FUZZ_CHECK(fuzz_finding_equal(&l->items[i], &back.items[i]), "finding %zu ('%s') changed through JSON ('%s')",
                           i, l->items[i].message, back.items[i].message);
        finding_list_done(&back);

        FUZZ_CHECK(finding_list_to_markdown(l, NULL, &md) >= 0, "findings give no markdown");
        /* Outside code spans a backslash escapes the next byte; inside, nothing does. */
        bool code = false;
        for (const char *c = md; *c; c++) {
                lines += *c == '\n';
                if (code)
                        code = *c != '`';
                else if (*c == '\\' && c[1] != '\0')
                        c++;
                else if (*c == '`')
                        code = true;
                else
                        FUZZ_CHECK(*c != '<' && *c != '@', "markdown passes '%c' outside code: %s", *c, md);
        }
        FUZZ_CHECK(!code, "markdown leaves a code span open: %s", md);
        /* "## Review", blank, the counts line (and a blank after it), the bullets, the dropped line. */
        FUZZ_CHECK(lines == (l->n == 0 ? 3 : 4 + l->n) + (l->n_dropped > 0 ? 2 : 0),
                   "%zu markdown lines for %zu findings", lines, l->n);
}

/* The findings seen by this process, by a 64-bit hash of all their fields:
 * open addressing, emptied when half full. */
#define FUZZ_SEEN_SIZE (1U << 16)
static uint64_t fuzz_seen[FUZZ_SEEN_SIZE];
static size_t fuzz_n_seen;

static inline uint64_t fuzz_hash(uint64_t h, const void *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                h ^= ((const unsigned char *) p)[i];
                h *= UINT64_C(1099511628211);
        }
        return h;
}

static inline uint64_t fuzz_hash_string(uint64_t h, const char *s) {
        /* NULL and "" apart: the first byte says which. */
        h = fuzz_hash(h, s ? "s" : "n", 1);
        return s ? fuzz_hash(h, s, strlen(s) + 1) : h;
}

/* True when this finding was seen before, else remembers it. */
static inline bool fuzz_finding_seen(const Finding *f) {
        uint64_t h = UINT64_C(14695981039346656037);
        int v[3] = { (int) f->kind, (int) f->severity, (int) f->line };

        h = fuzz_hash(h, v, sizeof(v));
        h = fuzz_hash_string(h, f->file);
        h = fuzz_hash_string(h, f->rule);
        h = fuzz_hash_string(h, f->message);
        h |= 1; /* 0 marks a free slot */

        if (fuzz_n_seen >= FUZZ_SEEN_SIZE / 2) {
                memset(fuzz_seen, 0, sizeof(fuzz_seen));
                fuzz_n_seen = 0;
        }
        for (size_t i = h & (FUZZ_SEEN_SIZE - 1);; i = (i + 1) & (FUZZ_SEEN_SIZE - 1)) {
                if (fuzz_seen[i] == h)
                        return true;
                if (fuzz_seen[i] == 0) {
                        fuzz_seen[i] = h;
                        fuzz_n_seen++;
                        return false;
                }
        }
}

/* fuzz_check_findings_all() on the findings this process has not checked
 * yet (with the list's bound and dropped count), and the bounds on all of
 * them. Sound because both round trips treat each finding on its own: its
 * JSON object and its markdown bullet are functions of the finding alone,
 * and what depends on the list (the counts line, the dropped line, the
 * order by severity) is still checked on every list that brings a new
 * finding. And it matters: a mutation changes a line or two of an input,
 * so most findings of a list are its parent's again, and the round trips
 * were two thirds of fuzz-checker-output's time. */
FUZZ_UNINSTRUMENTED static inline void fuzz_check_findings(const FindingList *l) {
        FindingList fresh = { .max = l->max, .n_dropped = l->n_dropped };

        FUZZ_CHECK(l->n <= (l->max ?: FINDING_LIST_MAX_DEFAULT), "%zu findings kept", l->n);
        memcpy(fresh.n_errors, l->n_errors, sizeof(fresh.n_errors));
        if (l->n > 0) {
                fresh.items = malloc(l->n * sizeof(Finding));
                if (!fresh.items)
                        abort();
        }
        for (size_t i = 0; i < l->n; i++) {
                const Finding *f = &l->items[i];
                FUZZ_CHECK(f->message, "a finding without a message");
                fuzz_check_escaped(f->file, FINDING_FILE_MAX, "file");
                fuzz_check_escaped(f->rule, FINDING_RULE_MAX, "rule");
                fuzz_check_escaped(f->message, FINDING_MESSAGE_MAX, "message");
                if (!fuzz_finding_seen(f))
                        fresh.items[fresh.n++] = *f; /* borrowed: not freed below */
        }
        fuzz_check_findings_all(&fresh);
        free(fresh.items);
}
