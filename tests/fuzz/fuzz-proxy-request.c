/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress proxy's request head, as sandboxed code sends it
 * (http_request_parse()), the host in it as the proxy judges it
 * (proxy_host_parse()), and the head forwarded upstream
 * (http_request_build_forward()). The input is what arrives on the
 * connection.
 *
 * Invariants: "need more" only while there is no CRLFCRLF and fewer than
 * HTTP_HEAD_MAX bytes; a refusal carries one of the documented statuses and
 * a text; an accepted head ends in CRLFCRLF within the buffer, every prefix
 * of it needs more, and what follows it changes nothing; an address literal
 * written out and parsed again is the same address; a forwarded head has no
 * hop-by-hop or Proxy-* header and ends "Connection: close", and put back in
 * absolute form it parses to the same method, host, port and path and is
 * forwarded to the very same bytes. */
#include <arpa/inet.h>
#include <strings.h>

#include "fuzz.h"
#include "http-request.h"
#include "proxy-policy.h"

/* A heap copy of exactly n bytes, so that ASan sees any overread. */
static int parse(const char *buf, size_t n, HttpRequest *r, int *status, const char **error) {
        char *copy = malloc(n ? n : 1);
        if (!copy)
                abort();
        memcpy(copy, buf, n);
        int k = http_request_parse(copy, n, r, status, error);
        free(copy);
        return k;
}

static void check_host(const HttpRequest *r) {
        ProxyHost h, again;
        char text[INET6_ADDRSTRLEN];

        if (proxy_host_parse(r->host, r->host_bracketed, &h) < 0)
                return;
        if (!h.is_address) {
                FUZZ_CHECK(h.name[0] && strlen(h.name) <= HTTP_HOST_MAX, "a name");
                return;
        }
        FUZZ_CHECK(h.address.family == AF_INET || h.address.family == AF_INET6, "family");
        proxy_address_to_string(&h.address, text, sizeof(text));
        FUZZ_CHECK(proxy_host_parse(text, h.address.family == AF_INET6, &again) == 0 && again.is_address &&
                   proxy_address_equal(&h.address, &again.address), "'%s' means %s, which parses back to itself", r->host, text);
        FUZZ_CHECK(address_classify(&h.address) == address_classify(&again.address), "the same class");
}

static void check_forward(const HttpRequest *r, const char *buf) {
        static char out[HTTP_FORWARD_HEAD_MAX + 1], out2[HTTP_FORWARD_HEAD_MAX + 1];
        char host_text[HTTP_HOST_MAX + 3];

        /* Only what the proxy forwards: a host its policy can judge (it
         * refuses the rest, "a..", say, before anything is built). */
        ProxyHost h;
        if (proxy_host_parse(r->host, r->host_bracketed, &h) < 0)
                return;
        snprintf(host_text, sizeof(host_text), r->host_bracketed ? "[%s]" : "%s", r->host);
        int n = http_request_build_forward(r, host_text, out, HTTP_FORWARD_HEAD_MAX);
        FUZZ_CHECK(n > 0 && (size_t) n <= HTTP_FORWARD_HEAD_MAX, "forward head built (%d)", n);
        out[n] = '\0';
        FUZZ_CHECK(strlen(out) == (size_t) n, "no NUL");
        FUZZ_CHECK(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0, "ends the head");
        FUZZ_CHECK(strstr(out, "\r\nConnection: close\r\n\r\n"), "Connection: close, last");
        const char *target = strchr(out, ' ');
        FUZZ_CHECK(target && target[1] == '/', "origin-form upstream: '%.40s'", out);

        /* Header lines: none hop-by-hop, none Proxy-*. */
        for (const char *l = strstr(out, "\r\n") + 2; l < out + n - 2;) {
                const char *e = strstr(l, "\r\n"), *colon = memchr(l, ':', (size_t) (e - l));
                FUZZ_CHECK(colon, "a header line");
                size_t nl = (size_t) (colon - l);
                FUZZ_CHECK(strncasecmp(l, "proxy-", 6) != 0, "no Proxy-* header passed on");
                /* Host and Connection are the builder's own lines. */
                if (!(nl == 10 && strncasecmp(l, "connection", 10) == 0) && !(nl == 4 && strncasecmp(l, "host", 4) == 0))
                        FUZZ_CHECK(!http_header_is_hop_by_hop(r, l, nl), "no hop-by-hop header '%.*s' passed on", (int) nl, l);
                l = e + 2;
        }

        /* Back to absolute form: the same request, forwarded the same. */
        const char *sp = strchr(out, ' ');
        size_t cap = (size_t) n + HTTP_HOST_MAX + 32;
        char *abs = malloc(cap);
        if (!abs)
                abort();
        int m = snprintf(abs, cap, "%.*s http://%s:%u%s", (int) (sp - out), out, host_text, (unsigned) r->port, sp + 1);
        HttpRequest r2;
        int st = 0;
        const char *error = NULL;
        int k = http_request_parse(abs, (size_t) m, &r2, &st, &error);
        if (k == 1) {
                size_t slash = r->path[0] != '/';   /* "?q" went upstream as "/?q" */
                FUZZ_CHECK(streq(r2.method, r->method) && streq(r2.host, r->host) && r2.port == r->port &&
                           r2.path_len == r->path_len + slash && memcmp(r2.path + slash, r->path, r->path_len) == 0,
                           "the same request again");
                /* Unless a header is called "close": our own "Connection:
                 * close" makes it hop-by-hop the second time. */
                bool named_close = false;
                for (size_t i = 0; i < r->n_headers; i++)
                        named_close = named_close || (r->headers[i].name_len == 5 && strncasecmp(r->headers[i].name, "close", 5) == 0);
                int n2 = http_request_build_forward(&r2, host_text, out2, HTTP_FORWARD_HEAD_MAX);
                FUZZ_CHECK(named_close || (n2 == n && memcmp(out, out2, (size_t) n) == 0), "forwarded twice, the same head");
        } else
                /* Only when the head grew past a limit: the longer target,
                 * or our Host and Connection lines past 100 headers. */
                FUZZ_CHECK(k < 0 && ((size_t) m > HTTP_HEAD_MAX - 64 || r->n_headers + 2 > HTTP_HEADERS_MAX),
                           "forwarded head refused in absolute form: %s\n%s", strempty(error), abs);
        free(abs);
        (void) buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf = (const char *) data;
        HttpRequest r;
        int status = 0;
        const char *error = NULL;

        if (size > 2 * HTTP_HEAD_MAX)
                return -1;
        char *copy = malloc(size ? size : 1);
        if (!copy)
                abort();
        memcpy(copy, data, size);
        int k = http_request_parse(copy, size, &r, &status, &error);
        if (k == 0) {
                FUZZ_CHECK(size < HTTP_HEAD_MAX && !memmem(buf, size, "\r\n\r\n", 4), "need more only without a whole head");
        } else if (k < 0) {
                FUZZ_CHECK(status == 400 || status == 414 || status == 431 || status == 501 || status == 505, "status %d", status);
                FUZZ_CHECK(error && *error, "a reason");
        } else {
                FUZZ_CHECK(k == 1 && r.head_len >= 4 && r.head_len <= size && r.head_len <= HTTP_HEAD_MAX, "head length");
                FUZZ_CHECK(memcmp(buf + r.head_len - 4, "\r\n\r\n", 4) == 0, "head ends in CRLFCRLF");
                FUZZ_CHECK(r.n_headers <= HTTP_HEADERS_MAX, "%zu headers", r.n_headers);
                FUZZ_CHECK(r.host[0] && strlen(r.host) <= HTTP_HOST_MAX, "a host");
                for (const char *c = r.host; *c; c++)
                        FUZZ_CHECK(!(*c >= 'A' && *c <= 'Z'), "host in lower case");
                for (size_t i = 0; i < r.n_headers; i++)
                        FUZZ_CHECK(r.headers[i].name >= copy && r.headers[i].value + r.headers[i].value_len <= copy + r.head_len,
                                   "header %zu inside the head", i);
                if (r.kind == HTTP_REQUEST_FORWARD)
                        /* No path in the target: "/" (a static string);
                         * a query only: "?..." */
                        FUZZ_CHECK(r.path_len > 0 && (r.path[0] == '/' || r.path[0] == '?') &&
                                   ((r.path >= copy && r.path + r.path_len <= copy + r.head_len) || r.path_len == 1),
                                   "origin-form path inside the head");

                /* Every prefix needs more; what follows changes nothing. */
                HttpRequest p;
                int ps = 0;
                const char *pe = NULL;
                size_t cuts[] = { r.head_len - 1, r.head_len / 2, r.head_len - 2 };
                for (size_t i = 0; i < ELEMENTSOF(cuts); i++)
                        FUZZ_CHECK(parse(buf, cuts[i], &p, &ps, &pe) == 0, "a prefix of %zu bytes needs more (%s)", cuts[i], strempty(pe));
                HttpRequest exact;
                char *head = malloc(r.head_len);
                if (!head)
                        abort();
                memcpy(head, buf, r.head_len);
                FUZZ_CHECK(http_request_parse(head, r.head_len, &exact, &ps, &pe) == 1 && exact.head_len == r.head_len &&
                           exact.kind == r.kind && streq(exact.host, r.host) && exact.port == r.port &&
                           exact.n_headers == r.n_headers && exact.content_length == r.content_length,
                           "the head alone parses the same");
                free(head);

                check_host(&r);
                if (r.kind == HTTP_REQUEST_FORWARD)
                        check_forward(&r, buf);
        }
        free(copy);
        return 0;
}
