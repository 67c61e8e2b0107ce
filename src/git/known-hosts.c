/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "known-hosts.h"

/* Bounds on one entry: an RSA-16384 key is about 2 KiB of blob. */
#define HOST_KEY_MAX 4096U
#define HOST_NAME_MAX_LEN 255U

static int base64_value(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Decodes [s, s+n) (padded base64) into out; -EINVAL on anything else. */
static int base64_decode(const char *s, size_t n, uint8_t *out, size_t max, size_t *ret_len) {
        size_t len = 0, pad = 0;
        uint32_t acc = 0;
        unsigned bits = 0;

        if (n == 0 || n % 4 != 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int v;

                if (s[i] == '=') {
                        /* Padding only at the end, at most two. */
                        if (i < n - 2)
                                return -EINVAL;
                        pad++;
                        continue;
                }
                if (pad > 0)
                        return -EINVAL;
                v = base64_value(s[i]);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        if (len >= max)
                                return -E2BIG;
                        out[len++] = (uint8_t) (acc >> bits);
                }
        }
        *ret_len = len;
        return 0;
}

/* '*' and '?' wildcards, ASCII case folded, as host names compare. Only the
 * last '*' is ever backtracked to: a later star matches whatever an earlier
 * one would have, so this is O(pattern * host), where trying every split for
 * every star would be exponential in the number of stars ("*****...x"). */
static bool wildcard_match(const char *p, size_t pn, const char *s, size_t sn) {
        size_t pi = 0, si = 0, star = SIZE_MAX, star_si = 0;

        while (si < sn) {
                if (pi < pn && p[pi] == '*') {
                        star = pi++;
                        star_si = si;
                } else if (pi < pn && (p[pi] == '?' || tolower((unsigned char) p[pi]) == tolower((unsigned char) s[si]))) {
                        pi++;
                        si++;
                } else if (star != SIZE_MAX) {
                        pi = star + 1;
                        si = ++star_si;
                } else
                        return false;
        }
        while (pi < pn && p[pi] == '*')
                pi++;
        return pi == pn;
}

/* One pattern: "host" (port 22 only) or "[host]:port". */
static bool pattern_match(const char *p, size_t pn, const char *host, unsigned port) {
        size_t hn = strlen(host);

        if (pn > 0 && p[0] == '[') {
                const char *close = memchr(p, ']', pn);
                unsigned long q = 0;
                size_t digits;

                if (!close || (size_t) (close - p) + 2 >= pn || close[1] != ':')
                        return false;
                digits = pn - (size_t) (close - p) - 2;
                if (digits == 0 || digits > 5)
                        return false;
                for (size_t i = 0; i < digits; i++) {
                        if (!isdigit((unsigned char) close[2 + i]))
                                return false;
                        q = q * 10 + (unsigned long) (close[2 + i] - '0');
                }
                return q == port && wildcard_match(p + 1, (size_t) (close - p) - 1, host, hn);
        }
        return port == 22 && wildcard_match(p, pn, host, hn);
}

/* 1 if the comma-separated list names the host, 0 if not (or a negation
 * rules it out), -EINVAL for a hashed or otherwise unusable list. */
static int patterns_match(const char *list, size_t n, const char *host, unsigned port) {
        bool matched = false;

        if (n > 0 && list[0] == '|')
                return -EINVAL;         /* hashed: not supported */
        for (size_t i = 0; i < n;) {
                size_t e = i;
                bool negated;

                while (e < n && list[e] != ',')
                        e++;
                negated = e > i && list[i] == '!';
                if (pattern_match(list + i + negated, e - i - negated, host, port)) {
                        if (negated)
                                return 0;
                        matched = true;
                }
                i = e + 1;
        }
        return matched;
}

/* The key type named inside a blob: uint32 length, then the name. */
static bool blob_type_is(const uint8_t *blob, size_t len, const char *type, size_t type_len) {
        uint32_t l;

        if (len < 4)
                return false;
        l = (uint32_t) blob[0] << 24 | (uint32_t) blob[1] << 16 | (uint32_t) blob[2] << 8 | blob[3];
        return l == type_len && len - 4 >= l && memcmp(blob + 4, type, type_len) == 0;
}

static size_t field(const char **p, const char *end, const char **ret) {
        const char *s = *p;

        while (s < end && (*s == ' ' || *s == '\t'))
                s++;
        *ret = s;
        while (s < end && *s != ' ' && *s != '\t')
                s++;
        *p = s;
        return (size_t) (s - *ret);
}

KnownHostsResult known_hosts_check(const char *text, const char *host, unsigned port, const void *key, size_t key_len) {
        bool named = false, matched = false;
        uint8_t blob[HOST_KEY_MAX];

        if (!text || !host || !key || key_len == 0 || strlen(host) > HOST_NAME_MAX_LEN)
                return _KNOWN_HOSTS_RESULT_INVALID;

        for (const char *line = text; *line;) {
                const char *end = line + strcspn(line, "\n"), *p = line, *f;
                size_t n, blob_len, type_len;
                const char *type;
                bool revoked = false;

                line = *end ? end + 1 : end;

                n = field(&p, end, &f);
                if (n == 0 || f[0] == '#')
                        continue;
                if (f[0] == '@') {
                        if (n != 8 || memcmp(f, "@revoked", 8) != 0)
                                continue;       /* @cert-authority: not supported */
                        revoked = true;
                        n = field(&p, end, &f);
                }
                if (patterns_match(f, n, host, port) <= 0)
                        continue;
                type_len = field(&p, end, &type);
                n = field(&p, end, &f);
                /* A CR of a file written on another system ends the key too. */
                if (n > 0 && f[n - 1] == '\r')
                        n--;
                if (type_len == 0 || base64_decode(f, n, blob, sizeof(blob), &blob_len) < 0 ||
                    !blob_type_is(blob, blob_len, type, type_len))
                        continue;       /* garbage: names nothing */

                if (blob_len == key_len && memcmp(blob, key, key_len) == 0) {
                        if (revoked)
                                return KNOWN_HOSTS_REVOKED;
                        matched = true;
                }
                if (!revoked)
                        named = true;
        }
        return matched ? KNOWN_HOSTS_MATCH : named ? KNOWN_HOSTS_MISMATCH : KNOWN_HOSTS_UNKNOWN;
}
