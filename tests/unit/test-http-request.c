/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>

#include "http-request.h"
#include "tap.h"

static int parse(const char *s, HttpRequest *r, int *status) {
        const char *error = NULL;
        *status = 0;
        return http_request_parse(s, strlen(s), r, status, &error);
}

/* Fails with the given status. */
static bool refused(const char *s, int status) {
        HttpRequest r;
        int st, k = parse(s, &r, &st);
        return k < 0 && st == status;
}

/* The two kinds of request a proxy serves, parsed as clients send them. */
static void test_valid(void) {
        HttpRequest r;
        int st;

        CHECK(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nUser-Agent: pip\r\n\r\n", &r, &st) == 1 &&
              r.kind == HTTP_REQUEST_CONNECT && streq(r.host, "pypi.org") && r.port == 443 && r.n_headers == 2,
              "CONNECT host:port");
        CHECK(parse("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n", &r, &st) == 1 && r.host_bracketed &&
              streq(r.host, "2001:db8::1") && r.port == 8443, "CONNECT [IPv6]:port");
        CHECK(parse("GET http://Registry.Example.ORG./simple/x/?a=1 HTTP/1.1\r\nHost: other\r\n\r\n", &r, &st) == 1 &&
              r.kind == HTTP_REQUEST_FORWARD && streq(r.host, "registry.example.org") && r.port == 80 &&
              r.path_len == strlen("/simple/x/?a=1") && strneq(r.path, "/simple/x/?a=1", r.path_len),
              "absolute-URI: host lower-cased, root dot dropped, origin-form path kept");
        CHECK(parse("GET http://example.org HTTP/1.0\r\n\r\n", &r, &st) == 1 && r.path_len == 1 && r.path[0] == '/',
              "absolute-URI without a path: /");
        CHECK(parse("POST http://10.0.0.1:8080/x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", &r, &st) == 1 &&
              r.port == 8080 && r.has_content_length && r.content_length == 5 &&
              r.head_len == strlen("POST http://10.0.0.1:8080/x HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
              "a body's length; the head ends before it");
        CHECK_ERRNO(parse("CONNECT a.b:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r, &st), 1,
                    "Transfer-Encoding on a CONNECT is no body of ours");
}

/* A head comes in pieces: each prefix asks for more, never fails. */
static void test_incremental(void) {
        const char *s = "GET http://example.org/a HTTP/1.1\r\nAccept: */*\r\nX-A: b\r\n\r\n";
        HttpRequest r;
        const char *error;
        int st;
        bool ok = true;

        for (size_t i = 0; i < strlen(s); i++)
                ok = ok && http_request_parse(s, i, &r, &st, &error) == 0;
        CHECK(ok, "every proper prefix of a head needs more");
        CHECK_ERRNO(http_request_parse(s, strlen(s), &r, &st, &error), 1, "the whole head parses");
}

/* Everything a strict proxy refuses: ambiguity in a head is how requests
 * are smuggled past a policy. */
static void test_refused(void) {
        HttpRequest r;
        const char *error;
        int st;

        CHECK(refused("GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n", 400), "origin-form: not a proxy request");
        CHECK(refused("GET https://example.org/ HTTP/1.1\r\n\r\n", 501), "https:// absolute-URI: CONNECT only");
        CHECK(refused("GET ftp://example.org/ HTTP/1.1\r\n\r\n", 400), "other schemes");
        CHECK(refused("GET http://user:pw@example.org/ HTTP/1.1\r\n\r\n", 400), "userinfo");
        CHECK(refused("GET http://example.org/#frag HTTP/1.1\r\n\r\n", 400), "fragment");
        CHECK(refused("CONNECT example.org HTTP/1.1\r\n\r\n", 400), "CONNECT without a port");
        CHECK(refused("CONNECT example.org:0 HTTP/1.1\r\n\r\n", 400), "port 0");
        CHECK(refused("CONNECT example.org:65536 HTTP/1.1\r\n\r\n", 400), "port 65536");
        CHECK(refused("CONNECT example.org:+443 HTTP/1.1\r\n\r\n", 400), "port with a sign");
        CHECK(refused("CONNECT example.org:443x HTTP/1.1\r\n\r\n", 400), "port with garbage");
        CHECK(refused("CONNECT example.org:000443 HTTP/1.1\r\n\r\n", 400), "port of six digits");
        CHECK(refused("CONNECT [::1%25lo]:443 HTTP/1.1\r\n\r\n", 400), "IPv6 zone index");
        CHECK(refused("CONNECT [::1]x:443 HTTP/1.1\r\n\r\n", 400), "garbage after ]");
        CHECK(refused("GET http://exa%6dple.org/ HTTP/1.1\r\n\r\n", 400), "percent-encoded host");
        CHECK(refused("GET http://a..b/ HTTP/1.1\r\n\r\n", 400), "empty label");
        CHECK(refused("GET http://example.org/ HTTP/2.0\r\n\r\n", 505), "HTTP/2.0");
        CHECK(refused("GET http://example.org/ HTTP/1.1 \r\n\r\n", 505), "trailing space in the request line");
        CHECK(refused("GET  http://example.org/ HTTP/1.1\r\n\r\n", 400), "two spaces");
        CHECK(refused("VERYLONGMETHODNAME http://e/ HTTP/1.1\r\n\r\n", 501), "method too long");
        CHECK(refused("G(T http://e/ HTTP/1.1\r\n\r\n", 400), "method not a token");
        CHECK(refused("GET http://e/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400), "obs-fold");
        CHECK(refused("GET http://e/ HTTP/1.1\r\nX: a\rb\r\n\r\n", 400), "bare CR");
        CHECK(refused("GET http://e/ HTTP/1.1\nX: a\r\n\r\n", 400), "bare LF");
        CHECK(refused("GET http://e/ HTTP/1.1\r\nX: a\x01\r\n\r\n", 400), "control character in a value");
        CHECK(refused("GET http://e/ HTTP/1.1\r\nX Y: a\r\n\r\n", 400), "space in a header name");
        CHECK(refused("GET http://e/ HTTP/1.1\r\n: a\r\n\r\n", 400), "empty header name");
        CHECK(refused("GET http://e/ HTTP/1.1\r\nNoColon\r\n\r\n", 400), "header without a colon");
        CHECK(refused("POST http://e/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400),
              "two Content-Length headers");
        CHECK(refused("POST http://e/ HTTP/1.1\r\nContent-Length: 1,1\r\n\r\n", 400), "a Content-Length list");
        CHECK(refused("POST http://e/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400), "a negative Content-Length");
        CHECK(refused("POST http://e/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
              "Transfer-Encoding on a forwarded request");

        /* A NUL is refused as soon as it arrives, before the head is whole. */
        static const char nul[] = "GET http://e/ HTTP/1.1\r\nX: a\0b";
        CHECK(http_request_parse(nul, sizeof(nul) - 1, &r, &st, &error) < 0 && st == 400, "NUL");

        char *big = malloc(HTTP_HEAD_MAX + 10);
        memset(big, 'a', HTTP_HEAD_MAX + 10);
        memcpy(big, "GET http://e/ HTTP/1.1\r\nX: ", 27);
        CHECK_ERRNO(http_request_parse(big, HTTP_HEAD_MAX - 1, &r, &st, &error), 0, "a large head may still come");
        CHECK(http_request_parse(big, HTTP_HEAD_MAX + 10, &r, &st, &error) < 0 && st == 431, "too large a head");
        free(big);

        char many[8192] = "GET http://e/ HTTP/1.1\r\n";
        for (int i = 0; i <= HTTP_HEADERS_MAX; i++)
                strcat(many, "X: y\r\n");
        strcat(many, "\r\n");
        CHECK(refused(many, 431), "more than %d headers", HTTP_HEADERS_MAX);

        char target[HTTP_TARGET_MAX + 64] = "GET http://e/";
        memset(target + 13, 'a', HTTP_TARGET_MAX);
        strcpy(target + 13 + HTTP_TARGET_MAX, " HTTP/1.1\r\n\r\n");
        CHECK(refused(target, 414), "target too long");
}

/* What goes upstream: origin-form, our Host, no hop-by-hop or Proxy-*
 * header, Connection: close. */
static void test_forward(void) {
        const char *s = "GET http://example.org:8080/p?q HTTP/1.0\r\n"
                        "Host: evil.example\r\n"
                        "Proxy-Authorization: Basic eA==\r\n"
                        "Proxy-Connection: keep-alive\r\n"
                        "Connection: keep-alive, X-Secret\r\n"
                        "X-Secret: 1\r\n"
                        "Keep-Alive: 5\r\n"
                        "Upgrade: h2c\r\n"
                        "Accept: */*\r\n\r\n";
        char out[HTTP_FORWARD_HEAD_MAX];
        HttpRequest r;
        int st;

        CHECK_ERRNO(parse(s, &r, &st), 1, "parsed");
        int n = http_request_build_forward(&r, "example.org", out, sizeof(out));
        CHECK(n > 0, "built");
        out[MAX(n, 0)] = '\0';
        CHECK_STR_EQ(out, "GET /p?q HTTP/1.1\r\nHost: example.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n",
                     "rewritten head: origin-form, our Host, end-to-end headers, Connection: close");
        CHECK_ERRNO(http_request_build_forward(&r, "example.org", out, 20), -ENOBUFS, "too small a buffer");

        /* A query without a path (found by fuzz-proxy-request): the request
         * line upstream must still be origin-form, "/?x", never "?x". */
        CHECK_ERRNO(parse("GET http://example.org?x=1 HTTP/1.1\r\n\r\n", &r, &st), 1, "parsed, query without path");
        n = http_request_build_forward(&r, "example.org", out, sizeof(out));
        out[MAX(n, 0)] = '\0';
        CHECK(n > 0 && streq(out, "GET /?x=1 HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n"),
              "forwarded as /?x=1: %s", out);
}

/* A deterministic fuzzer: mutated heads never make the parser read or
 * write outside its buffer (run under ASan) or return inconsistent results. */
static void test_fuzz(void) {
        static const char *const seeds[] = {
                "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
                "GET http://[::1]:80/a HTTP/1.1\r\nContent-Length: 0\r\nConnection: x, y\r\n\r\n",
                "POST http://0177.0.0.1/x HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
        };
        static const char alphabet[] = "\r\n :[]/@%#.0123456789aZ\t\x01\x7f\x80";
        uint32_t x = 12345;
        bool ok = true;
        char buf[256], out[HTTP_FORWARD_HEAD_MAX];

        for (unsigned i = 0; i < 200000; i++) {
                const char *seed = seeds[i % ELEMENTSOF(seeds)];
                size_t n = strlen(seed);
                memcpy(buf, seed, n);
                for (unsigned k = 0; k < 1 + i % 4; k++) {
                        x = x * 1103515245 + 12345;
                        size_t pos = (x >> 8) % n;
                        x = x * 1103515245 + 12345;
                        switch ((x >> 16) % 3) {
                        case 0: buf[pos] = alphabet[(x >> 4) % (sizeof(alphabet) - 1)]; break;
                        case 1: n = pos + 1; break;                  /* truncate */
                        case 2: buf[pos] = (char) (x >> 20); break;  /* any byte */
                        }
                }
                /* A heap copy of exactly n bytes, so that ASan sees any overread. */
                char *copy = malloc(n);
                memcpy(copy, buf, n);
                HttpRequest r;
                const char *error = NULL;
                int st = 0;
                int k = http_request_parse(copy, n, &r, &st, &error);
                if (k == 1) {
                        ok = ok && r.head_len <= n;
                        if (r.kind == HTTP_REQUEST_FORWARD)
                                ok = ok && http_request_build_forward(&r, r.host, out, sizeof(out)) > 0;
                } else if (k < 0)
                        ok = ok && st >= 400 && st < 600 && error;
                else
                        ok = ok && k == 0;
                free(copy);
        }
        CHECK(ok, "200000 mutated heads: consistent results");
}

int main(void) {
        test_valid();
        test_incremental();
        test_refused();
        test_forward();
        test_fuzz();
        return tap_done();
}
