/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "checker-output.h"
#include "json-util.h"
#include "string-util.h"

typedef struct Collect {
        const char *checker;
        const ReviewFile *changed;
        size_t n_changed;
        FindingList *out;
        CheckerStats stats;
} Collect;

static int collect(Collect *c, const char *path, size_t path_len, unsigned line, FindingSeverity severity,
                   const char *tool, const char *rule, const char *message, size_t message_len) {
        _cleanup_free_ char *p = NULL, *full_rule = NULL;

        c->stats.total++;
        p = review_path_normalize(path, path_len);
        if (!p || !review_files_line_changed(c->changed, c->n_changed, p, line))
                return 0;
        if (c->stats.kept >= CHECKER_FINDINGS_MAX) {
                c->stats.dropped++;
                return 0;
        }
        c->stats.kept++;
        if (!isempty(rule) && asprintf(&full_rule, "%s/%s", tool, rule) < 0)
                return -ENOMEM;
        return finding_list_add_text(c->out, FINDING_STATIC_CHECK, severity, p, line, full_rule ?: tool, message,
                                     strnlen(message, MIN(message_len, (size_t) FINDING_MESSAGE_MAX * 2)));
}

static const char *skip_bom(const char *buf, size_t *size) {
        if (*size >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) {
                *size -= 3;
                return buf + 3;
        }
        return buf;
}

/* ---- SARIF ---- */

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

static FindingSeverity sarif_level(const char *level) {
        /* SARIF 2.1.0 §3.27.10: "warning" when absent. "none" is informational. */
        if (!level || streq(level, "warning"))
                return FINDING_WARNING;
        if (streq(level, "error"))
                return FINDING_ERROR;
        return FINDING_NOTE;
}

/* The levels of a run's rules (tool.driver.rules[].defaultConfiguration.level),
 * sorted by id: a result without a level of its own takes its rule's. Sorted
 * once per run, so that a log of many rules and many results costs
 * n log n, not rules times results. */
typedef struct RuleLevel {
        const char *id;
        const char *level;
        size_t index;           /* in rules[]: of equal ids, the first counts */
} RuleLevel;

typedef struct RuleLevels {
        RuleLevel *items;
        size_t n;
} RuleLevels;

static int rule_level_compare(const void *a, const void *b) {
        const RuleLevel *x = a, *y = b;
        int r = strcmp(x->id, y->id);
        return r != 0 ? r : x->index < y->index ? -1 : x->index > y->index;
}

static int rule_levels_build(json_object *driver, RuleLevels *ret) {
        json_object *rules = get(driver, "rules", json_type_array);
        size_t n = rules ? json_object_array_length(rules) : 0, k = 0;
        RuleLevel *items;

        *ret = (RuleLevels) {};
        if (n == 0)
                return 0;
        items = calloc(n, sizeof(RuleLevel));
        if (!items)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *r = json_object_array_get_idx(rules, i);
                const char *id = get_string(r, "id");
                if (id)
                        items[k++] = (RuleLevel) {
                                .id = id,
                                .level = get_string(get(r, "defaultConfiguration", json_type_object), "level"),
                                .index = i,
                        };
        }
        if (k > 1)
                qsort(items, k, sizeof(RuleLevel), rule_level_compare);
        *ret = (RuleLevels) { .items = items, .n = k };
        return 0;
}

static const char *sarif_rule_level(const RuleLevels *levels, const char *rule_id) {
        size_t lo = 0, hi = levels->n;

        if (!rule_id)
                return NULL;
        /* The first entry of that id. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(levels->items[mid].id, rule_id) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < levels->n && streq(levels->items[lo].id, rule_id) ? levels->items[lo].level : NULL;
}

static int sarif_result(Collect *c, const RuleLevels *levels, const char *tool, json_object *result) {
        json_object *locations = get(result, "locations", json_type_array);
        const char *rule = get_string(result, "ruleId"), *level = get_string(result, "level");
        const char *text = get_string(get(result, "message", json_type_object), "text");
        int r;

        if (!level)
                level = sarif_rule_level(levels, rule);
        if (!text)
                text = "(no message)";

        /* A result without a location in the workspace says nothing about the change. */
        for (size_t i = 0; locations && i < json_object_array_length(locations); i++) {
                json_object *phys = get(json_object_array_get_idx(locations, i), "physicalLocation", json_type_object);
                const char *uri = get_string(get(phys, "artifactLocation", json_type_object), "uri");
                json_object *start = get(get(phys, "region", json_type_object), "startLine", json_type_int);
                int64_t line = start ? json_object_get_int64(start) : 0;

                if (!uri || line < 1 || line > UINT32_MAX)
                        continue;
                r = collect(c, uri, strlen(uri), (unsigned) line, sarif_level(level), tool, rule, text, strlen(text));
                if (r < 0)
                        return r;
        }
        return 0;
}

int checker_parse_sarif(const char *checker, const char *buf, size_t size, const ReviewFile *changed, size_t n_changed,
                        FindingList *out, CheckerStats *ret_stats, char **ret_error) {
        _cleanup_json_ json_object *j = NULL;
        Collect c = { .checker = checker ?: "checker", .changed = changed, .n_changed = n_changed, .out = out };
        json_object *runs;
        const char *version;
        int r;

        assert(buf || size == 0);
        assert(out);

        if (size > CHECKER_OUTPUT_MAX)
                return error_set(ret_error, -EFBIG, "Output of %zu bytes exceeds the limit of %u.", size, CHECKER_OUTPUT_MAX);
        buf = skip_bom(buf, &size);
        r = json_parse_strict(buf, size, &j);
        if (r < 0)
                return error_set(ret_error, r, "Not a JSON document (or nested deeper than 64).");
        version = get_string(j, "version");
        runs = get(j, "runs", json_type_array);
        if (!json_object_is_type(j, json_type_object) || !version || !strneq(version, "2.", 2) || !runs)
                return error_set(ret_error, -EBADMSG, "Not a SARIF 2.x log (no \"version\": \"2.x\" or no \"runs\" array).");

        for (size_t i = 0; i < json_object_array_length(runs); i++) {
                json_object *run = json_object_array_get_idx(runs, i);
                json_object *driver = get(get(run, "tool", json_type_object), "driver", json_type_object);
                json_object *results = get(run, "results", json_type_array);
                const char *tool = get_string(driver, "name") ?: c.checker;
                RuleLevels levels;

                if (!results)
                        continue;
                r = rule_levels_build(driver, &levels);
                if (r < 0)
                        return r;
                for (size_t k = 0; k < json_object_array_length(results) && r >= 0; k++) {
                        json_object *result = json_object_array_get_idx(results, k);
                        if (json_object_is_type(result, json_type_object))
                                r = sarif_result(&c, &levels, tool, result);
                }
                free(levels.items);
                if (r < 0)
                        return r;
        }
        if (ret_stats)
                *ret_stats = c.stats;
        return 0;
}

/* ---- FILE:LINE[:COL]: SEVERITY: MESSAGE ---- */

static bool parse_uint(const char **p, const char *end, unsigned *ret) {
        uint64_t v = 0;
        const char *s = *p;

        if (s >= end || !isdigit((unsigned char) *s))
                return false;
        for (; s < end && isdigit((unsigned char) *s); s++) {
                v = v * 10 + (uint64_t) (*s - '0');
                if (v > UINT32_MAX)
                        return false;
        }
        *p = s;
        *ret = (unsigned) v;
        return true;
}

static const struct {
        const char *word;
        FindingSeverity severity;
} line_severities[] = {
        { "fatal error", FINDING_ERROR },
        { "error", FINDING_ERROR },
        { "warning", FINDING_WARNING },
        { "note", FINDING_NOTE },
        { "style", FINDING_NOTE },
        { "information", FINDING_NOTE },
        { "info", FINDING_NOTE },
        { "performance", FINDING_NOTE },
        { "portability", FINDING_NOTE },
};

static int parse_line(Collect *c, const char *tool, const char *s, const char *end) {
        /* The file name ends at the first ":DIGITS:" (names may hold ':' elsewhere). */
        for (const char *colon = s; (colon = memchr(colon, ':', (size_t) (end - colon))); colon++) {
                const char *p = colon + 1, *msg, *msg_end = end, *rule = NULL;
                unsigned line, col;
                FindingSeverity severity = _FINDING_SEVERITY_INVALID;
                _cleanup_free_ char *rule_copy = NULL;

                if (colon == s || !parse_uint(&p, end, &line) || p >= end || *p != ':')
                        continue;
                p++;
                if (parse_uint(&p, end, &col)) {
                        if (p >= end || *p != ':')
                                return 0;
                        p++;
                }
                while (p < end && *p == ' ')
                        p++;
                for (size_t i = 0; i < ELEMENTSOF(line_severities); i++) {
                        size_t l = strlen(line_severities[i].word);
                        if ((size_t) (end - p) > l && strncasecmp(p, line_severities[i].word, l) == 0 && p[l] == ':') {
                                severity = line_severities[i].severity;
                                p += l + 1;
                                break;
                        }
                }
                if (severity < 0 || line == 0)
                        return 0;
                while (p < end && *p == ' ')
                        p++;
                msg = p;
                /* A trailing "[RULE]": gcc's [-Wformat=], shellcheck's [SC2086], cppcheck's [nullPointer]. */
                while (msg_end > msg && isspace((unsigned char) msg_end[-1]))
                        msg_end--;
                if (msg_end > msg && msg_end[-1] == ']') {
                        const char *open = msg_end - 1;
                        while (open > msg && open[-1] != '[' && open[-1] != ' ')
                                open--;
                        if (open > msg && open[-1] == '[' && msg_end - 1 > open && msg_end - open <= 128) {
                                rule_copy = strndup(open, (size_t) (msg_end - 1 - open));
                                if (!rule_copy)
                                        return -ENOMEM;
                                rule = rule_copy;
                                msg_end = open - 1;
                                while (msg_end > msg && msg_end[-1] == ' ')
                                        msg_end--;
                        }
                }
                return collect(c, s, (size_t) (colon - s), line, severity, tool, rule, msg, (size_t) (msg_end - msg));
        }
        return 0;
}

int checker_parse_lines(const char *checker, const char *buf, size_t size, const ReviewFile *changed, size_t n_changed,
                        FindingList *out, CheckerStats *ret_stats, char **ret_error) {
        Collect c = { .checker = checker ?: "checker", .changed = changed, .n_changed = n_changed, .out = out };
        const char *end;
        int r;

        assert(buf || size == 0);
        assert(out);

        if (size > CHECKER_OUTPUT_MAX)
                return error_set(ret_error, -EFBIG, "Output of %zu bytes exceeds the limit of %u.", size, CHECKER_OUTPUT_MAX);
        buf = skip_bom(buf, &size);
        end = buf + size;
        for (const char *s = buf; s < end;) {
                const char *nl = memchr(s, '\n', (size_t) (end - s)), *e = nl ?: end;

                if (e > s && e[-1] == '\r')
                        e--;
                r = parse_line(&c, c.checker, s, e);
                if (r < 0)
                        return r;
                s = nl ? nl + 1 : end;
        }
        if (ret_stats)
                *ret_stats = c.stats;
        return 0;
}

int checker_parse(const char *checker, const char *buf, size_t size, const ReviewFile *changed, size_t n_changed,
                  FindingList *out, CheckerStats *ret_stats, char **ret_error) {
        size_t i = 0, n = size;
        const char *b = skip_bom(buf, &n);

        while (i < n && isspace((unsigned char) b[i]))
                i++;
        if (i < n && b[i] == '{')
                return checker_parse_sarif(checker, buf, size, changed, n_changed, out, ret_stats, ret_error);
        return checker_parse_lines(checker, buf, size, changed, n_changed, out, ret_stats, ret_error);
}
