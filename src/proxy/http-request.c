/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http-request.h"
#include "macro.h"

/* RFC 9110 tchar: what a method or a header name is made of. */
static bool is_tchar(unsigned char c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c);
}

/* A field value byte: visible ASCII, space, tab, or obs-text. */
static bool is_value_char(unsigned char c) {
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int fail(int status, const char *error, int *ret_status, const char **ret_error) {
        *ret_status = status;
        *ret_error = error;
        return -EBADMSG;
}

static bool memcaseeq(const char *a, size_t n, const char *b) {
        return strlen(b) == n && strncasecmp(a, b, n) == 0;
}

/* A port: 1 to 5 digits, 1..65535. */
static int parse_port(const char *s, size_t n, uint16_t *ret) {
        unsigned v = 0;

        if (n == 0 || n > 5)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

/* host [":" port] of an authority, with no userinfo. The host is either
 * "[IPv6]" (hex digits, ':' and '.', no zone) or a name or IPv4 literal
 * made of letters, digits, '-', '_' and '.'. Anything else (percent
 * encoding, '@', spaces) is refused here, so that no later step ever sees
 * a host that the resolver could read differently from us. */
static int parse_authority(const char *s, size_t n, bool port_required, HttpRequest *r) {
        const char *host, *colon = NULL;
        size_t host_len;

        if (n == 0)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = memchr(s, ']', n);
                if (!end || end == s + 1)
                        return -EINVAL;
                host = s + 1;
                host_len = (size_t) (end - host);
                for (size_t i = 0; i < host_len; i++)
                        if (!strchr("0123456789abcdefABCDEF:.", host[i]))
                                return -EINVAL;
                if (end + 1 < s + n) {
                        if (end[1] != ':')
                                return -EINVAL;
                        colon = end + 1;
                }
                r->host_bracketed = true;
        } else {
                colon = memchr(s, ':', n);
                host = s;
                host_len = colon ? (size_t) (colon - s) : n;
                for (size_t i = 0; i < host_len; i++) {
                        char c = s[i];
                        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                              c == '-' || c == '_' || c == '.'))
                                return -EINVAL;
                }
                /* One trailing dot is the root: "example.org." is "example.org". */
                if (host_len > 1 && host[host_len - 1] == '.')
                        host_len--;
                if (host_len == 0 || host[0] == '.' || memmem(host, host_len, "..", 2))
                        return -EINVAL;
                r->host_bracketed = false;
        }
        if (host_len > HTTP_HOST_MAX)
                return -EINVAL;
        for (size_t i = 0; i < host_len; i++)
                r->host[i] = (char) ((host[i] >= 'A' && host[i] <= 'Z') ? host[i] - 'A' + 'a' : host[i]);
        r->host[host_len] = '\0';

        if (colon)
                return parse_port(colon + 1, (size_t) (s + n - colon - 1), &r->port);
        if (port_required)
                return -EINVAL;
        r->port = 80;
        return 0;
}

static int parse_target(const char *t, size_t n, HttpRequest *r, int *ret_status, const char **ret_error) {
        if (r->kind == HTTP_REQUEST_CONNECT) {
                if (parse_authority(t, n, true, r) < 0)
                        return fail(400, "CONNECT needs host:port", ret_status, ret_error);
                return 0;
        }

        if (n > 0 && t[0] == '/')
                return fail(400, "not a proxy request (origin-form target)", ret_status, ret_error);
        if (n >= 8 && strncasecmp(t, "https://", 8) == 0)
                return fail(501, "https:// is reached with CONNECT", ret_status, ret_error);
        if (n < 7 || strncasecmp(t, "http://", 7) != 0)
                return fail(400, "only http:// targets are forwarded", ret_status, ret_error);
        t += 7;
        n -= 7;

        size_t a = 0;
        while (a < n && t[a] != '/' && t[a] != '?' && t[a] != '#')
                a++;
        if (memchr(t, '#', n))
                return fail(400, "a fragment in the target", ret_status, ret_error);
        if (memchr(t, '@', a))
                return fail(400, "userinfo in the target", ret_status, ret_error);
        if (parse_authority(t, a, false, r) < 0)
                return fail(400, "invalid host or port in the target", ret_status, ret_error);

        r->path = a < n ? t + a : "/";
        r->path_len = a < n ? n - a : 1;
        return 0;
}

static int parse_request_line(const char *p, size_t n, HttpRequest *r, int *ret_status, const char **ret_error) {
        const char *sp1 = memchr(p, ' ', n);
        if (!sp1 || sp1 == p)
                return fail(400, "malformed request line", ret_status, ret_error);
        size_t mlen = (size_t) (sp1 - p);
        if (mlen >= HTTP_METHOD_MAX)
                return fail(501, "unknown method", ret_status, ret_error);
        for (size_t i = 0; i < mlen; i++)
                if (!is_tchar((unsigned char) p[i]))
                        return fail(400, "malformed method", ret_status, ret_error);
        memcpy(r->method, p, mlen);
        r->method[mlen] = '\0';
        r->kind = streq(r->method, "CONNECT") ? HTTP_REQUEST_CONNECT : HTTP_REQUEST_FORWARD;

        const char *t = sp1 + 1, *end = p + n;
        const char *sp2 = memchr(t, ' ', (size_t) (end - t));
        if (!sp2 || sp2 == t)
                return fail(400, "malformed request line", ret_status, ret_error);
        size_t tlen = (size_t) (sp2 - t);
        if (tlen > HTTP_TARGET_MAX)
                return fail(414, "target too long", ret_status, ret_error);
        for (size_t i = 0; i < tlen; i++)
                if ((unsigned char) t[i] <= 0x20 || (unsigned char) t[i] >= 0x7f)
                        return fail(400, "invalid character in the target", ret_status, ret_error);

        const char *v = sp2 + 1;
        size_t vlen = (size_t) (end - v);
        if (vlen != 8 || (memcmp(v, "HTTP/1.1", 8) != 0 && memcmp(v, "HTTP/1.0", 8) != 0))
                return fail(505, "only HTTP/1.0 and HTTP/1.1", ret_status, ret_error);

        return parse_target(t, tlen, r, ret_status, ret_error);
}

static int parse_header(const char *p, size_t n, HttpRequest *r, int *ret_status, const char **ret_error) {
        if (p[0] == ' ' || p[0] == '\t')
                return fail(400, "obsolete line folding", ret_status, ret_error);
        const char *colon = memchr(p, ':', n);
        if (!colon || colon == p)
                return fail(400, "malformed header line", ret_status, ret_error);
        for (const char *c = p; c < colon; c++)
                if (!is_tchar((unsigned char) *c))
                        return fail(400, "malformed header name", ret_status, ret_error);
        const char *v = colon + 1, *end = p + n;
        for (const char *c = v; c < end; c++)
                if (!is_value_char((unsigned char) *c))
                        return fail(400, "control character in a header", ret_status, ret_error);
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;

        if (r->n_headers >= HTTP_HEADERS_MAX)
                return fail(431, "too many headers", ret_status, ret_error);
        HttpHeader *h = &r->headers[r->n_headers++];
        *h = (HttpHeader) { .name = p, .name_len = (size_t) (colon - p), .value = v, .value_len = (size_t) (end - v) };

        if (memcaseeq(h->name, h->name_len, "Content-Length")) {
                uint64_t cl = 0;
                /* SECURITY: one Content-Length, digits only: a second one
                 * or a list is how requests are smuggled past a proxy. */
                if (r->has_content_length || h->value_len == 0 || h->value_len > 15)
                        return fail(400, "invalid Content-Length", ret_status, ret_error);
                for (size_t i = 0; i < h->value_len; i++) {
                        if (h->value[i] < '0' || h->value[i] > '9')
                                return fail(400, "invalid Content-Length", ret_status, ret_error);
                        cl = cl * 10 + (uint64_t) (h->value[i] - '0');
                }
                r->has_content_length = true;
                r->content_length = cl;
        } else if (memcaseeq(h->name, h->name_len, "Transfer-Encoding") && r->kind == HTTP_REQUEST_FORWARD)
                /* Forwarded bodies are framed by Content-Length only, so
                 * that exactly the request's body is passed on. */
                return fail(501, "Transfer-Encoding in a forwarded request", ret_status, ret_error);
        return 0;
}

int http_request_parse(const char *buf, size_t n, HttpRequest *ret, int *ret_status, const char **ret_error) {
        size_t limit = MIN(n, (size_t) HTTP_HEAD_MAX), end = 0;

        /* Bytes no head may carry are refused as soon as they arrive, not
         * only once a whole head is there. */
        for (size_t i = 0; i < limit; i++) {
                if (buf[i] == '\0')
                        return fail(400, "NUL in the request head", ret_status, ret_error);
                if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r'))
                        return fail(400, "bare LF in the request head", ret_status, ret_error);
                if (buf[i] == '\r' && i + 1 < limit && buf[i + 1] != '\n')
                        return fail(400, "bare CR in the request head", ret_status, ret_error);
                if (i >= 3 && memcmp(buf + i - 3, "\r\n\r\n", 4) == 0) {
                        end = i + 1;
                        break;
                }
        }
        if (end == 0) {
                if (n >= HTTP_HEAD_MAX)
                        return fail(431, "request head too large", ret_status, ret_error);
                return 0;
        }

        *ret = (HttpRequest) { .head_len = end };

        const char *p = buf, *stop = buf + end - 2; /* the last CRLF ends the empty line */
        const char *eol = memmem(p, (size_t) (stop - p), "\r\n", 2);
        if (!eol || eol == p)
                return fail(400, "malformed request line", ret_status, ret_error);
        int r = parse_request_line(p, (size_t) (eol - p), ret, ret_status, ret_error);
        if (r < 0)
                return r;

        for (p = eol + 2; p < stop; p = eol + 2) {
                eol = memmem(p, (size_t) (stop - p), "\r\n", 2);
                if (!eol || eol == p)
                        return fail(400, "malformed header line", ret_status, ret_error);
                r = parse_header(p, (size_t) (eol - p), ret, ret_status, ret_error);
                if (r < 0)
                        return r;
        }
        return 1;
}

bool http_header_is_hop_by_hop(const HttpRequest *r, const char *name, size_t n) {
        static const char *const fixed[] = {
                "Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Host",
        };

        if (n >= 6 && strncasecmp(name, "Proxy-", 6) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                if (memcaseeq(name, n, fixed[i]))
                        return true;

        /* And every header the request's Connection headers name. */
        for (size_t i = 0; i < r->n_headers; i++) {
                const HttpHeader *h = &r->headers[i];
                if (!memcaseeq(h->name, h->name_len, "Connection"))
                        continue;
                for (size_t a = 0; a < h->value_len;) {
                        while (a < h->value_len && (h->value[a] == ',' || h->value[a] == ' ' || h->value[a] == '\t'))
                                a++;
                        size_t b = a;
                        while (b < h->value_len && h->value[b] != ',' && h->value[b] != ' ' && h->value[b] != '\t')
                                b++;
                        if (b > a && b - a == n && strncasecmp(h->value + a, name, n) == 0)
                                return true;
                        a = b;
                }
        }
        return false;
}

static int append(char *out, size_t size, size_t *len, const char *s, size_t n) {
        if (n > size - *len)
                return -ENOBUFS;
        memcpy(out + *len, s, n);
        *len += n;
        return 0;
}

int http_request_build_forward(const HttpRequest *r, const char *host_text, char *out, size_t size) {
        char line[HTTP_HOST_MAX + 64];
        size_t len = 0;
        int k;

        if (r->kind != HTTP_REQUEST_FORWARD)
                return -EINVAL;

        /* "http://host?q" has an empty path: origin-form is "/?q", never
         * "?q" (found by fuzz-proxy-request). */
        if (append(out, size, &len, r->method, strlen(r->method)) < 0 ||
            append(out, size, &len, " ", 1) < 0 ||
            (r->path[0] != '/' && append(out, size, &len, "/", 1) < 0) ||
            append(out, size, &len, r->path, r->path_len) < 0 ||
            append(out, size, &len, " HTTP/1.1\r\n", 11) < 0)
                return -ENOBUFS;

        /* SECURITY: the Host line names the host we connected to; the
         * request's own Host header (which may name another) is dropped. */
        if (r->port == 80)
                k = snprintf(line, sizeof(line), "Host: %s\r\n", host_text);
        else
                k = snprintf(line, sizeof(line), "Host: %s:%u\r\n", host_text, (unsigned) r->port);
        if (k < 0 || (size_t) k >= sizeof(line) || append(out, size, &len, line, (size_t) k) < 0)
                return -ENOBUFS;

        for (size_t i = 0; i < r->n_headers; i++) {
                const HttpHeader *h = &r->headers[i];
                if (http_header_is_hop_by_hop(r, h->name, h->name_len))
                        continue;
                if (append(out, size, &len, h->name, h->name_len) < 0 ||
                    append(out, size, &len, ": ", 2) < 0 ||
                    append(out, size, &len, h->value, h->value_len) < 0 ||
                    append(out, size, &len, "\r\n", 2) < 0)
                        return -ENOBUFS;
        }
        if (append(out, size, &len, "Connection: close\r\n\r\n", 21) < 0)
                return -ENOBUFS;
        return (int) len;
}
