/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "string-util.h"

int free_and_strdup(char **p, const char *s) {
        char *t = NULL;

        if (s) {
                t = strdup(s);
                if (!t)
                        return -ENOMEM;
        }
        free(*p);
        *p = t;
        return 0;
}

bool string_is_safe(const char *s, bool allow_newline) {
        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                if (*c == '\n' || *c == '\t') {
                        if (!allow_newline)
                                return false;
                        continue;
                }
                if (*c < ' ' || *c == 127)
                        return false;
        }
        return true;
}

char *strshorten_line(const char *s, size_t n) {
        size_t l = strcspn(s, "\n");
        bool cut = s[l] != '\0';

        if (l > n) {
                l = n;
                /* Do not cut a UTF-8 sequence in half. */
                while (l > 0 && ((unsigned char) s[l] & 0xC0) == 0x80)
                        l--;
                cut = true;
        }

        char *r = malloc(l + sizeof("…"));
        if (!r)
                return NULL;
        memcpy(r, s, l);
        strcpy(r + l, cut ? "…" : "");
        return r;
}

void utf8_sanitize(char *s, size_t n) {
        for (size_t i = 0; i < n;) {
                unsigned char b = (unsigned char) s[i];
                size_t k = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
                bool ok = k > 0 && i + k <= n && (k != 2 || b >= 0xC2) && b != 0;
                for (size_t j = 1; ok && j < k; j++)
                        ok = ((unsigned char) s[i + j] & 0xC0) == 0x80;
                if (!ok) {
                        s[i++] = '?';
                        continue;
                }
                i += k;
        }
}

void utf8_blank_c1(char *s) {
        for (unsigned char *c = (unsigned char *) s; *c; c++)
                if (c[0] == 0xC2 && c[1] >= 0x80 && c[1] <= 0x9F)
                        c[0] = c[1] = ' ';
}

char *text_escape_controls(const char *s) {
        size_t n = 0;
        char *ret, *p;

        for (const unsigned char *c = (const unsigned char *) s; *c; c++)
                n += (*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f ? 4 :
                     *c == 0xC2 && c[1] >= 0x80 && c[1] <= 0x9F ? 6 : 1;
        ret = p = malloc(n + 1);
        if (!ret)
                return NULL;
        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                if ((*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f)
                        p += sprintf(p, "\\x%02x", *c);
                else if (*c == 0xC2 && c[1] >= 0x80 && c[1] <= 0x9F) {
                        p += sprintf(p, "\\u00%02x", c[1]);
                        c++;
                } else
                        *p++ = (char) *c;
        }
        *p = '\0';
        return ret;
}

int safe_atou64(const char *s, uint64_t *ret) {
        char *end = NULL;
        unsigned long long v;

        if (isempty(s) || !isdigit((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -errno;
        if (*end != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int parse_sec(const char *s, uint64_t *ret_usec) {
        static const struct {
                const char *suffix;
                uint64_t usec;
        } units[] = {
                { "",    USEC_PER_SEC },
                { "s",   USEC_PER_SEC },
                { "sec", USEC_PER_SEC },
                { "ms",  USEC_PER_MSEC },
                { "min", 60 * USEC_PER_SEC },
                { "m",   60 * USEC_PER_SEC },
                { "h",   3600 * USEC_PER_SEC },
        };
        char *end = NULL;
        unsigned long long v;

        if (streq(s, "infinity")) {
                *ret_usec = UINT64_MAX;
                return 0;
        }
        if (!isdigit((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (streq(end, units[i].suffix)) {
                        if (v > UINT64_MAX / units[i].usec)
                                return -ERANGE;
                        *ret_usec = v * units[i].usec;
                        return 0;
                }
        return -EINVAL;
}

int parse_boolean(const char *s) {
        if (streq(s, "1") || strcasecmp(s, "yes") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "on") == 0)
                return 1;
        if (streq(s, "0") || strcasecmp(s, "no") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "off") == 0)
                return 0;
        return -EINVAL;
}

size_t strv_length(char **l) {
        size_t n = 0;
        for (; l && *l; l++)
                n++;
        return n;
}

int strv_extend(char ***l, const char *s) {
        size_t n = strv_length(*l);
        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        char **t = realloc(*l, sizeof(char *) * (n + 2));
        if (!t) {
                free(c);
                return -ENOMEM;
        }
        t[n] = c;
        t[n + 1] = NULL;
        *l = t;
        return 0;
}

int strv_env_set(char ***l, const char *assignment) {
        const char *eq = strchr(assignment, '=');

        if (!eq || eq == assignment)
                return -EINVAL;
        size_t k = (size_t) (eq - assignment) + 1;
        for (char **e = *l; e && *e; e++)
                if (strneq(*e, assignment, k))
                        return free_and_strdup(e, assignment);
        return strv_extend(l, assignment);
}

int parse_size(const char *s, uint64_t *ret) {
        char *end = NULL;
        unsigned long long v;
        uint64_t mult = 1;

        if (!isdigit((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -errno;
        if (streq(end, "K"))
                mult = 1024ULL;
        else if (streq(end, "M"))
                mult = 1024ULL * 1024;
        else if (streq(end, "G"))
                mult = 1024ULL * 1024 * 1024;
        else if (!streq(end, ""))
                return -EINVAL;
        if (v > UINT64_MAX / mult)
                return -ERANGE;
        *ret = v * mult;
        return 0;
}

char *strv_join(char **l, const char *sep) {
        size_t n = 1, k = strlen(sep);
        for (char **i = l; i && *i; i++)
                n += strlen(*i) + k;
        char *r = malloc(n), *p = r;
        if (!r)
                return NULL;
        *p = '\0';
        for (char **i = l; i && *i; i++) {
                if (i != l)
                        p = stpcpy(p, sep);
                p = stpcpy(p, *i);
        }
        return r;
}

const char *skip_heading(const char *s) {
        const char *p = s;

        if (!s)
                return s;
        for (;;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                size_t i = 0;

                while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
                        i++;
                bool blank = i == len;
                bool heading = !blank && len <= 40 && p[len - (p[len - 1] == '\r' ? 2 : 1)] == ':';
                if (!nl || !(blank || heading))
                        return blank && !nl ? s : p;
                p = nl + 1;
        }
}

void format_timestamp(uint64_t usec, char *buf, size_t n) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;

        if (usec == 0 || !localtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                snprintf(buf, n, "n/a");
}

/* Copies a line without ANSI escape sequences (colored runner output). */
void strip_ansi_line(const char *s, size_t l, char *buf, size_t size) {
        size_t n = 0;

        for (size_t i = 0; i < l && n + 1 < size; i++) {
                if (s[i] == '\x1b') {
                        if (i + 1 < l && s[i + 1] == '[') {
                                i += 2;
                                while (i < l && !(s[i] >= '@' && s[i] <= '~'))
                                        i++;
                        }
                        continue;
                }
                if (s[i] == '\r')
                        continue;
                buf[n++] = s[i];
        }
        buf[n] = '\0';
}

int error_set(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;
        char *m;

        if (!ret_error)
                return r;
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(*ret_error);
        *ret_error = m;
        return r;
}
