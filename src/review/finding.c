/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "finding.h"
#include "json-util.h"
#include "string-table.h"

static const char *const finding_kind_table[_FINDING_KIND_MAX] = {
        [FINDING_SECRET] = "secret",
        [FINDING_STATIC_CHECK] = "static-check",
        [FINDING_DEPENDENCY] = "dependency",
        [FINDING_VULNERABLE_DEPENDENCY] = "vulnerable-dependency",
        [FINDING_COVERAGE] = "coverage",
        [FINDING_REVIEW_ERROR] = "review-error",
};

DEFINE_STRING_TABLE_LOOKUP(finding_kind, FindingKind);

static const char *const finding_severity_table[_FINDING_SEVERITY_MAX] = {
        [FINDING_ERROR] = "error",
        [FINDING_WARNING] = "warning",
        [FINDING_NOTE] = "note",
};

DEFINE_STRING_TABLE_LOOKUP(finding_severity, FindingSeverity);

static void finding_done(Finding *f) {
        free(f->file);
        free(f->rule);
        free(f->message);
        *f = (Finding) {};
}

void finding_list_done(FindingList *l) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                finding_done(&l->items[i]);
        free(l->items);
        l->items = NULL;
        l->n = l->allocated = l->n_dropped = 0;
        memset(l->n_errors, 0, sizeof(l->n_errors));
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if there is none. */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
        unsigned char b = s[0];
        size_t k = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;

        if (k == 0 || k > n || (k == 2 && b < 0xC2) || (k == 4 && b > 0xF4))
                return 0;
        for (size_t j = 1; j < k; j++)
                if ((s[j] & 0xC0) != 0x80)
                        return 0;
        /* Overlong three- and four-byte forms and UTF-16 surrogates. */
        if (k == 3 && ((b == 0xE0 && s[1] < 0xA0) || (b == 0xED && s[1] >= 0xA0)))
                return 0;
        if (k == 4 && ((b == 0xF0 && s[1] < 0x90) || (b == 0xF4 && s[1] >= 0x90)))
                return 0;
        return k;
}

/* One input character at s[0..n): its escaped form in esc (at most 4
 * bytes), its width there, and how many input bytes it took. */
static size_t escape_one(const unsigned char *s, size_t n, char esc[static 5], size_t *ret_width) {
        size_t k;

        if (s[0] < 0x20 || s[0] == 0x7F) {
                if (s[0] == '\n')
                        memcpy(esc, "\\n", *ret_width = 2);
                else if (s[0] == '\t')
                        memcpy(esc, "\\t", *ret_width = 2);
                else if (s[0] == '\r')
                        memcpy(esc, "\\r", *ret_width = 2);
                else {
                        /* Not snprintf(): fuzzed checker output is full of these. */
                        static const char hex[] = "0123456789ABCDEF";
                        memcpy(esc, (char[]) { '\\', 'x', hex[s[0] >> 4], hex[s[0] & 0xF] }, 4);
                        *ret_width = 4;
                }
                return 1;
        }
        k = utf8_sequence(s, n);
        if (k > 0) {
                memcpy(esc, s, k);
                *ret_width = k;
                return k;
        }
        esc[0] = '?';
        *ret_width = 1;
        return 1;
}

char *finding_escape(const char *s, size_t n, size_t max) {
        const unsigned char *u = (const unsigned char *) s;
        size_t total = 0, limit, out = 0;
        bool cut;
        char esc[5], *r;

        assert(max >= 8);

        if (!s)
                n = 0;
        /* First the whole width, to know whether a cut (and room for "…") is needed.
         * Printable ASCII, most of what a finding holds, is itself: one byte
         * wide, without a call of escape_one() for each byte. */
        for (size_t i = 0, w; i < n && total <= max;) {
                if (u[i] >= 0x20 && u[i] < 0x7F) {
                        i++;
                        total++;
                        continue;
                }
                i += escape_one(u + i, n - i, esc, &w);
                total += w;
        }
        cut = total > max;
        limit = cut ? max - strlen("…") : max;

        /* Only what is needed: a finding keeps three of these, a review up
         * to FINDING_LIST_MAX_DEFAULT findings. */
        r = malloc((cut ? max : total) + 1);
        if (!r)
                return NULL;
        for (size_t i = 0, w, k; i < n;) {
                if (u[i] >= 0x20 && u[i] < 0x7F) {
                        if (out + 1 > limit)
                                break;
                        r[out++] = (char) u[i++];
                        continue;
                }
                k = escape_one(u + i, n - i, esc, &w);
                if (out + w > limit)
                        break;
                memcpy(r + out, esc, w);
                out += w;
                i += k;
        }
        if (cut) {
                memcpy(r + out, "…", strlen("…"));
                out += strlen("…");
        }
        r[out] = '\0';
        return r;
}

/* Counts a finding; 1 when there is room to keep it, 0 when the list is
 * full (then it is only counted). */
static int finding_list_reserve(FindingList *l, FindingSeverity severity, FindingKind kind) {
        if (kind < 0 || kind >= _FINDING_KIND_MAX || severity < 0 || severity >= _FINDING_SEVERITY_MAX)
                return -EINVAL;

        if (severity == FINDING_ERROR)
                l->n_errors[kind]++;
        if (l->n >= (l->max ?: FINDING_LIST_MAX_DEFAULT)) {
                l->n_dropped++;
                return 0;
        }
        if (l->n >= l->allocated) {
                size_t k = MAX(l->allocated * 2, (size_t) 16);
                Finding *t = realloc(l->items, k * sizeof(Finding));
                if (!t)
                        return -ENOMEM;
                l->items = t;
                l->allocated = k;
        }
        return 1;
}

static int finding_list_append(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                               const char *rule, const char *message, size_t message_len) {
        Finding f = { .kind = kind, .severity = severity, .line = line };

        f.message = finding_escape(message, message_len, FINDING_MESSAGE_MAX);
        if (!f.message)
                return -ENOMEM;
        if (file) {
                f.file = finding_escape(file, strlen(file), FINDING_FILE_MAX);
                if (!f.file) {
                        finding_done(&f);
                        return -ENOMEM;
                }
        }
        if (rule) {
                f.rule = finding_escape(rule, strlen(rule), FINDING_RULE_MAX);
                if (!f.rule) {
                        finding_done(&f);
                        return -ENOMEM;
                }
        }
        l->items[l->n++] = f;
        return 0;
}

int finding_list_addv(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                      const char *rule, const char *format, va_list ap) {
        _cleanup_free_ char *raw = NULL;
        int n, r;

        assert(l);
        assert(format);

        r = finding_list_reserve(l, severity, kind);
        if (r <= 0)
                return r;
        n = vasprintf(&raw, format, ap);
        if (n < 0) {
                raw = NULL;
                return -ENOMEM;
        }
        return finding_list_append(l, kind, severity, file, line, rule, raw, (size_t) n);
}

int finding_list_add_text(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                          const char *rule, const char *message, size_t message_len) {
        int r;

        assert(l);
        assert(message || message_len == 0);

        r = finding_list_reserve(l, severity, kind);
        if (r <= 0)
                return r;
        return finding_list_append(l, kind, severity, file, line, rule, message ?: "", message_len);
}

int finding_list_add(FindingList *l, FindingKind kind, FindingSeverity severity, const char *file, unsigned line,
                     const char *rule, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = finding_list_addv(l, kind, severity, file, line, rule, format, ap);
        va_end(ap);
        return r;
}

size_t finding_list_count(const FindingList *l, FindingKind kind, FindingSeverity at_least) {
        size_t c = 0;

        for (size_t i = 0; l && i < l->n; i++)
                if ((kind == _FINDING_KIND_INVALID || l->items[i].kind == kind) && l->items[i].severity <= at_least)
                        c++;
        return c;
}

size_t finding_list_errors(const FindingList *l, FindingKind kind) {
        if (!l || kind < 0 || kind >= _FINDING_KIND_MAX)
                return 0;
        return l->n_errors[kind];
}

static int finding_compare(const Finding *a, const Finding *b) {
        int r;

        if (a->severity != b->severity)
                return a->severity < b->severity ? -1 : 1;
        if (a->kind != b->kind)
                return a->kind < b->kind ? -1 : 1;
        r = strcmp(strempty(a->file), strempty(b->file));
        if (r != 0)
                return r;
        if (a->line != b->line)
                return a->line < b->line ? -1 : 1;
        return 0;
}

void finding_list_sort(FindingList *l) {
        /* Insertion sort: stable, and lists are bounded (FINDING_LIST_MAX_DEFAULT). */
        for (size_t i = 1; l && i < l->n; i++) {
                Finding f = l->items[i];
                size_t j = i;
                while (j > 0 && finding_compare(&l->items[j - 1], &f) > 0) {
                        l->items[j] = l->items[j - 1];
                        j--;
                }
                l->items[j] = f;
        }
}

/* A member of a new object under a literal key: json-c neither copies the
 * key nor looks for an earlier one (a review of 500 findings writes 3,000). */
static int add_member(json_object *o, const char *literal_key, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_object_add_ex(o, literal_key, v, JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_ADD_CONSTANT_KEY) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int finding_list_to_json(const FindingList *l, json_object **ret) {
        _cleanup_json_ json_object *a = json_object_new_array();

        assert(ret);

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; l && i < l->n; i++) {
                const Finding *f = &l->items[i];
                json_object *o = json_object_new_object();

                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
                if (add_member(o, "kind", json_object_new_string(finding_kind_to_string(f->kind))) < 0 ||
                    add_member(o, "severity", json_object_new_string(finding_severity_to_string(f->severity))) < 0 ||
                    (f->file && add_member(o, "file", json_object_new_string(f->file)) < 0) ||
                    (f->line > 0 && add_member(o, "line", json_object_new_uint64(f->line)) < 0) ||
                    (f->rule && add_member(o, "rule", json_object_new_string(f->rule)) < 0) ||
                    add_member(o, "message", json_object_new_string(f->message)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

static int json_optional_string(json_object *o, const char *key, const char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) {
                *ret = NULL;
                return 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return -EBADMSG;
        *ret = json_object_get_string(v);
        return 0;
}

int finding_list_from_json(json_object *j, FindingList *l) {
        assert(l);

        if (!j || !json_object_is_type(j, json_type_array))
                return -EBADMSG;

        for (size_t i = 0; i < json_object_array_length(j); i++) {
                json_object *o = json_object_array_get_idx(j, i), *v;
                const char *kind, *severity, *file, *rule, *message;
                uint64_t line = 0;
                FindingKind k;
                FindingSeverity s;
                int r;

                if (!json_object_is_type(o, json_type_object))
                        return -EBADMSG;
                if (json_get_string(o, "kind", &kind) < 0 || json_get_string(o, "severity", &severity) < 0 ||
                    json_get_string(o, "message", &message) < 0 ||
                    json_optional_string(o, "file", &file) < 0 || json_optional_string(o, "rule", &rule) < 0)
                        return -EBADMSG;
                k = finding_kind_from_string(kind);
                s = finding_severity_from_string(severity);
                if (k < 0 || s < 0)
                        return -EBADMSG;
                if (json_object_object_get_ex(o, "line", &v) && (json_get_uint64(o, "line", &line) < 0 || line > UINT32_MAX))
                        return -EBADMSG;
                r = finding_list_add_text(l, k, s, file, (unsigned) line, rule, message, strlen(message));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Appends s escaped for a markdown paragraph that GitHub, Gitea and GitLab
 * render: punctuation that starts emphasis, links, images, code, tables or
 * strikethrough gets a backslash; '<', '>' and '&' become entities so that no
 * HTML passes; '@' becomes an entity so that no one is mentioned (and
 * notified) by a checker's message. */
static int markdown_escape(FILE *f, const char *s) {
        for (; s && *s; s++) {
                switch (*s) {
                case '\\': case '`': case '*': case '_': case '[': case ']': case '|': case '~': case '!': case '#':
                        fputc('\\', f);
                        fputc(*s, f);
                        break;
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '&':
                        fputs("&amp;", f);
                        break;
                case '@':
                        fputs("&#64;", f);
                        break;
                default:
                        fputc(*s, f);
                }
        }
        return ferror(f) ? -ENOMEM : 0;
}

/* A code span of a path (and what follows it, ":LINE"): backticks in it
 * would end the span early. */
static void markdown_code(FILE *f, const char *s, const char *suffix) {
        fputc('`', f);
        for (; *s; s++)
                fputc(*s == '`' ? '?' : *s, f);
        fputs(suffix, f);
        fputc('`', f);
}

int finding_list_to_markdown(const FindingList *l, const char *title, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, n_errors, n_warnings;
        FILE *f;
        int r = 0;

        assert(ret);

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        /* The stream is ours alone, and it is written a byte at a time. */
        (void) __fsetlocking(f, FSETLOCKING_BYCALLER);

        n_errors = finding_list_count(l, _FINDING_KIND_INVALID, FINDING_ERROR);
        n_warnings = finding_list_count(l, _FINDING_KIND_INVALID, FINDING_WARNING) - n_errors;
        fprintf(f, "## ");
        r = markdown_escape(f, title ?: "Review");
        fprintf(f, "\n\n");
        if (!l || l->n == 0)
                fprintf(f, "No findings.\n");
        else
                fprintf(f, "%zu error%s, %zu warning%s, %zu note%s.\n\n",
                        n_errors, n_errors == 1 ? "" : "s", n_warnings, n_warnings == 1 ? "" : "s",
                        l->n - n_errors - n_warnings, l->n - n_errors - n_warnings == 1 ? "" : "s");

        /* In the order errors, warnings, notes, without changing the list. */
        for (FindingSeverity s = 0; l && s < _FINDING_SEVERITY_MAX && r >= 0; s++)
                for (size_t i = 0; i < l->n && r >= 0; i++) {
                        const Finding *x = &l->items[i];

                        if (x->severity != s)
                                continue;
                        fprintf(f, "- **%s** %s", finding_severity_to_string(s), finding_kind_to_string(x->kind));
                        if (x->file) {
                                char where[sizeof(":4294967295")] = "";
                                fputc(' ', f);
                                if (x->line > 0)
                                        snprintf(where, sizeof(where), ":%u", x->line);
                                markdown_code(f, x->file, where);
                        }
                        if (x->rule) {
                                fputs(" (", f);
                                markdown_code(f, x->rule, "");
                                fputc(')', f);
                        }
                        fputs(": ", f);
                        r = markdown_escape(f, x->message);
                        fputc('\n', f);
                }
        if (l && l->n_dropped > 0)
                fprintf(f, "\n%zu more finding%s not shown.\n", l->n_dropped, l->n_dropped == 1 ? "" : "s");

        if (fclose(f) != 0 || r < 0)
                return r < 0 ? r : -ENOMEM;
        *ret = TAKE_PTR(buf);
        return 0;
}
