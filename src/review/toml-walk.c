/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "toml-walk.h"

typedef struct Toml {
        const char *p, *end;
        unsigned line;
        char *table[TOML_PATH_MAX];
        size_t n_table;
        unsigned table_index;
        char *key[TOML_PATH_MAX];
        size_t n_key;
        toml_callback_t cb;
        void *userdata;
        char **ret_error;
} Toml;

static int toml_error(Toml *t, const char *what) {
        if (t->ret_error) {
                free(*t->ret_error);
                if (asprintf(t->ret_error, "line %u: %s", t->line, what) < 0)
                        *t->ret_error = NULL;
        }
        return -EBADMSG;
}

static void path_clear(char **path, size_t *n, size_t to) {
        while (*n > to)
                free(path[--*n]);
}

static void skip_ws(Toml *t) {
        while (t->p < t->end && (*t->p == ' ' || *t->p == '\t'))
                t->p++;
}

static void skip_comment(Toml *t) {
        if (t->p < t->end && *t->p == '#')
                while (t->p < t->end && *t->p != '\n')
                        t->p++;
}

/* Whitespace, comments and newlines (inside arrays). */
static void skip_all(Toml *t) {
        for (;;) {
                skip_ws(t);
                skip_comment(t);
                if (t->p < t->end && (*t->p == '\n' || *t->p == '\r')) {
                        if (*t->p == '\n')
                                t->line++;
                        t->p++;
                        continue;
                }
                return;
        }
}

static int end_of_line(Toml *t) {
        skip_ws(t);
        skip_comment(t);
        if (t->p < t->end && *t->p == '\r')
                t->p++;
        if (t->p < t->end && *t->p != '\n')
                return toml_error(t, "expected the end of the line");
        return 0;
}

static bool has(Toml *t, const char *s) {
        size_t n = strlen(s);
        return (size_t) (t->end - t->p) >= n && memcmp(t->p, s, n) == 0;
}

static void put_utf8(FILE *f, unsigned long c) {
        if (c < 0x80)
                fputc((int) c, f);
        else if (c < 0x800) {
                fputc((int) (0xC0 | (c >> 6)), f);
                fputc((int) (0x80 | (c & 0x3F)), f);
        } else if (c < 0x10000) {
                fputc((int) (0xE0 | (c >> 12)), f);
                fputc((int) (0x80 | ((c >> 6) & 0x3F)), f);
                fputc((int) (0x80 | (c & 0x3F)), f);
        } else if (c <= 0x10FFFF) {
                fputc((int) (0xF0 | (c >> 18)), f);
                fputc((int) (0x80 | ((c >> 12) & 0x3F)), f);
                fputc((int) (0x80 | ((c >> 6) & 0x3F)), f);
                fputc((int) (0x80 | (c & 0x3F)), f);
        } else
                fputc('?', f);
}

/* A string at t->p (which is at a quote): basic or literal, one line or
 * multi-line. */
static int parse_string(Toml *t, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        char q = *t->p;
        bool multi = has(t, q == '"' ? "\"\"\"" : "'''");
        FILE *f;
        int r = 0;

        t->p += multi ? 3 : 1;
        /* A newline right after the opening delimiter is trimmed. */
        if (multi && t->p < t->end && *t->p == '\n') {
                t->p++;
                t->line++;
        } else if (multi && has(t, "\r\n")) {
                t->p += 2;
                t->line++;
        }

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        for (;;) {
                if (t->p >= t->end) {
                        r = toml_error(t, "unterminated string");
                        break;
                }
                char c = *t->p;
                if (multi ? has(t, q == '"' ? "\"\"\"" : "'''") : c == q) {
                        t->p += multi ? 3 : 1;
                        /* Up to two more quotes belong to the string ("""a"""""). */
                        while (multi && t->p < t->end && *t->p == q && has(t, q == '"' ? "\"\"\"" : "'''") == false) {
                                fputc(q, f);
                                t->p++;
                        }
                        break;
                }
                if (c == '\n') {
                        if (!multi) {
                                r = toml_error(t, "newline in a string");
                                break;
                        }
                        t->line++;
                }
                if (c == '\0') {
                        r = toml_error(t, "NUL in a string");
                        break;
                }
                if (c == '\\' && q == '"') {
                        t->p++;
                        if (t->p >= t->end) {
                                r = toml_error(t, "unterminated string");
                                break;
                        }
                        c = *t->p;
                        switch (c) {
                        case 'n': fputc('\n', f); t->p++; continue;
                        case 't': fputc('\t', f); t->p++; continue;
                        case 'r': fputc('\r', f); t->p++; continue;
                        case 'b': fputc('\b', f); t->p++; continue;
                        case 'f': fputc('\f', f); t->p++; continue;
                        case 'e': fputc('\033', f); t->p++; continue;
                        case '"': case '\\': fputc(c, f); t->p++; continue;
                        case 'u': case 'U': {
                                size_t n = c == 'u' ? 4 : 8;
                                unsigned long v = 0;
                                t->p++;
                                if ((size_t) (t->end - t->p) < n) {
                                        r = toml_error(t, "short \\u escape");
                                        break;
                                }
                                for (size_t i = 0; i < n && r >= 0; i++) {
                                        char h = t->p[i];
                                        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
                                                h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                                        if (d < 0)
                                                r = toml_error(t, "bad \\u escape");
                                        v = v * 16 + (unsigned long) d;
                                }
                                if (r < 0)
                                        break;
                                t->p += n;
                                /* No NUL and no surrogates in a decoded string. */
                                put_utf8(f, v == 0 || (v >= 0xD800 && v <= 0xDFFF) ? '?' : v);
                                continue;
                        }
                        default:
                                if (multi && (c == '\n' || c == ' ' || c == '\t' || c == '\r')) {
                                        /* A line-ending backslash trims the whitespace that follows. */
                                        while (t->p < t->end && strchr(" \t\r\n", *t->p)) {
                                                if (*t->p == '\n')
                                                        t->line++;
                                                t->p++;
                                        }
                                        continue;
                                }
                                r = toml_error(t, "unknown escape");
                        }
                        break;
                }
                fputc(c, f);
                t->p++;
        }
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(buf);
        return 0;
}

static bool is_bare(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* A dotted key into path (appended to what is there). */
static int parse_key(Toml *t, char **path, size_t *n) {
        int r;

        for (;;) {
                char *k;

                skip_ws(t);
                if (t->p >= t->end)
                        return toml_error(t, "expected a key");
                if (*t->p == '"' || *t->p == '\'') {
                        if (has(t, "\"\"\"") || has(t, "'''"))
                                return toml_error(t, "multi-line string as a key");
                        r = parse_string(t, &k);
                        if (r < 0)
                                return r;
                } else {
                        const char *s = t->p;
                        while (t->p < t->end && is_bare(*t->p))
                                t->p++;
                        if (t->p == s)
                                return toml_error(t, "expected a key");
                        k = strndup(s, (size_t) (t->p - s));
                        if (!k)
                                return -ENOMEM;
                }
                if (*n >= TOML_PATH_MAX) {
                        free(k);
                        return toml_error(t, "key nested too deep");
                }
                path[(*n)++] = k;
                skip_ws(t);
                if (t->p < t->end && *t->p == '.') {
                        t->p++;
                        continue;
                }
                return 0;
        }
}

static int emit(Toml *t, const char *value, bool is_string, bool in_array) {
        TomlValue v = {
                .table = (const char *const *) t->table, .n_table = t->n_table, .table_index = t->table_index,
                .key = (const char *const *) t->key, .n_key = t->n_key,
                .value = value, .is_string = is_string, .in_array = in_array, .line = t->line,
        };
        return t->cb(&v, t->userdata);
}

static int parse_value(Toml *t, unsigned depth, bool in_array);

static int parse_inline_table(Toml *t, unsigned depth) {
        size_t base = t->n_key;
        int r;

        t->p++;         /* '{' */
        skip_all(t);
        if (t->p < t->end && *t->p == '}') {
                t->p++;
                return 0;
        }
        for (;;) {
                r = parse_key(t, t->key, &t->n_key);
                if (r < 0)
                        return r;
                skip_ws(t);
                if (t->p >= t->end || *t->p != '=')
                        return toml_error(t, "expected '=' in an inline table");
                t->p++;
                r = parse_value(t, depth + 1, false);
                if (r < 0)
                        return r;
                path_clear(t->key, &t->n_key, base);
                skip_all(t);
                if (t->p < t->end && *t->p == ',') {
                        t->p++;
                        skip_all(t);
                        continue;
                }
                if (t->p < t->end && *t->p == '}') {
                        t->p++;
                        return 0;
                }
                return toml_error(t, "expected ',' or '}' in an inline table");
        }
}

static int parse_array(Toml *t, unsigned depth) {
        int r;

        t->p++;         /* '[' */
        for (;;) {
                skip_all(t);
                if (t->p >= t->end)
                        return toml_error(t, "unterminated array");
                if (*t->p == ']') {
                        t->p++;
                        return 0;
                }
                r = parse_value(t, depth + 1, true);
                if (r < 0)
                        return r;
                skip_all(t);
                if (t->p < t->end && *t->p == ',') {
                        t->p++;
                        continue;
                }
                if (t->p < t->end && *t->p == ']') {
                        t->p++;
                        return 0;
                }
                return toml_error(t, "expected ',' or ']' in an array");
        }
}

static int parse_value(Toml *t, unsigned depth, bool in_array) {
        _cleanup_free_ char *s = NULL;
        int r;

        if (depth > TOML_DEPTH_MAX)
                return toml_error(t, "values nested too deep");
        skip_ws(t);
        if (t->p >= t->end)
                return toml_error(t, "expected a value");
        switch (*t->p) {
        case '"':
        case '\'':
                r = parse_string(t, &s);
                if (r < 0)
                        return r;
                return emit(t, s, true, in_array);
        case '[':
                return parse_array(t, depth);
        case '{':
                return parse_inline_table(t, depth);
        default: {
                const char *b = t->p;
                while (t->p < t->end && !strchr(",]}#\n\r \t", *t->p))
                        t->p++;
                /* A date and a time may be separated by a space: "1979-05-27 07:32:00". */
                if (t->p - b == 10 && b[4] == '-' && b[7] == '-' && t->end - t->p > 1 && t->p[0] == ' ' &&
                    t->p[1] >= '0' && t->p[1] <= '9') {
                        t->p++;
                        while (t->p < t->end && !strchr(",]}#\n\r \t", *t->p))
                                t->p++;
                }
                if (t->p == b)
                        return toml_error(t, "expected a value");
                s = strndup(b, (size_t) (t->p - b));
                if (!s)
                        return -ENOMEM;
                return emit(t, s, false, in_array);
        }
        }
}

static int parse_header(Toml *t) {
        bool array = has(t, "[[");
        int r;

        t->p += array ? 2 : 1;
        path_clear(t->table, &t->n_table, 0);
        r = parse_key(t, t->table, &t->n_table);
        if (r < 0)
                return r;
        if (!has(t, array ? "]]" : "]"))
                return toml_error(t, "expected ']' after a table name");
        t->p += array ? 2 : 1;
        t->table_index++;
        return end_of_line(t);
}

int toml_walk(const char *text, size_t size, toml_callback_t cb, void *userdata, char **ret_error) {
        Toml t = { .p = text, .end = text + size, .line = 1, .cb = cb, .userdata = userdata, .ret_error = ret_error };
        int r = 0;

        assert(text || size == 0);
        assert(cb);

        if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
                t.p += 3;
        while (r >= 0) {
                skip_all(&t);
                if (t.p >= t.end)
                        break;
                if (*t.p == '[')
                        r = parse_header(&t);
                else {
                        r = parse_key(&t, t.key, &t.n_key);
                        if (r >= 0) {
                                skip_ws(&t);
                                if (t.p >= t.end || *t.p != '=')
                                        r = toml_error(&t, "expected '=' after a key");
                        }
                        if (r >= 0) {
                                t.p++;
                                r = parse_value(&t, 0, false);
                        }
                        if (r >= 0)
                                r = end_of_line(&t);
                        path_clear(t.key, &t.n_key, 0);
                }
        }
        path_clear(t.key, &t.n_key, 0);
        path_clear(t.table, &t.n_table, 0);
        return r < 0 ? r : 0;
}
