/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The head of one proxy request, as sandboxed code sends it to the egress
 * proxy. Parsed strictly from a buffer: no allocation, no I/O, every length
 * bounded, so that the parser can be fed any bytes (tests, fuzzing). */

#define HTTP_HEAD_MAX 16384             /* request line and headers, CRLFCRLF included */
#define HTTP_HEADERS_MAX 100
#define HTTP_TARGET_MAX 8192
#define HTTP_HOST_MAX 255
#define HTTP_METHOD_MAX 16
/* What http_request_build_forward() may add to a head: the new Host and
 * Connection lines. */
#define HTTP_FORWARD_HEAD_MAX (HTTP_HEAD_MAX + HTTP_HOST_MAX + 64)

typedef enum HttpRequestKind {
        HTTP_REQUEST_CONNECT,           /* CONNECT host:port: a tunnel, TLS end to end */
        HTTP_REQUEST_FORWARD,           /* METHOD http://host[:port]/path: forwarded in origin-form */
} HttpRequestKind;

typedef struct HttpHeader {
        const char *name;               /* into the parsed buffer, not NUL-terminated */
        size_t name_len;
        const char *value;              /* without surrounding whitespace */
        size_t value_len;
} HttpHeader;

typedef struct HttpRequest {
        HttpRequestKind kind;
        char method[HTTP_METHOD_MAX];
        char host[HTTP_HOST_MAX + 1];   /* lower case, without brackets or a trailing dot */
        bool host_bracketed;            /* written as [IPv6] */
        uint16_t port;
        const char *path;               /* FORWARD: path and query of the target, into the buffer; "/" when it has
                                         * neither; begins with '?' when it has a query only (forwarded as "/?...") */
        size_t path_len;
        size_t head_len;                /* bytes of the head, CRLFCRLF included */
        bool has_content_length;
        uint64_t content_length;
        HttpHeader headers[HTTP_HEADERS_MAX];
        size_t n_headers;
} HttpRequest;

/* Parses the head at the start of buf[0..n). Returns 0 when more bytes are
 * needed (no CRLFCRLF yet, and fewer than HTTP_HEAD_MAX bytes), 1 with *ret
 * filled when a whole head was parsed, or a negative errno with
 * *ret_status (an HTTP status for the reply: 400, 414, 431, 501, 505) and
 * *ret_error (a static text) set. Anything not clearly valid is refused:
 * obs-fold, NUL, bare CR or LF, control characters, bad ports, userinfo,
 * fragments, origin-form targets, conflicting body framing. */
int http_request_parse(const char *buf, size_t n, HttpRequest *ret, int *ret_status, const char **ret_error);

/* Writes the head to send upstream for a FORWARD request: origin-form
 * target, HTTP/1.1, a Host line naming host_text (and the port unless 80),
 * every end-to-end header of the request, no hop-by-hop header (those
 * named by Connection included) and no Proxy-* header, and "Connection:
 * close". Returns its length, or -ENOBUFS if out is too small. */
int http_request_build_forward(const HttpRequest *r, const char *host_text, char *out, size_t size);

/* Whether name[0..n) is a header a proxy must not pass on. */
bool http_header_is_hop_by_hop(const HttpRequest *r, const char *name, size_t n);
