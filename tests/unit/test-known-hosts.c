/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "fs-util.h"
#include "known-hosts.h"
#include "ledger.h"
#include "tap.h"

/* A host key blob as a server sends it: string "ssh-ed25519", string key. */
static size_t make_blob(uint8_t seed, uint8_t out[static 51]) {
        static const char type[] = "ssh-ed25519";
        size_t n = 0;

        out[n++] = 0, out[n++] = 0, out[n++] = 0, out[n++] = 11;
        memcpy(out + n, type, 11), n += 11;
        out[n++] = 0, out[n++] = 0, out[n++] = 0, out[n++] = 32;
        for (unsigned i = 0; i < 32; i++)
                out[n++] = (uint8_t) (seed + i * 7);
        return n;
}

static void base64(const uint8_t *in, size_t n, char *out) {
        static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t o = 0;

        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (i + 1 < n ? (uint32_t) in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
                out[o++] = t[v >> 18 & 63];
                out[o++] = t[v >> 12 & 63];
                out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
                out[o++] = i + 2 < n ? t[v & 63] : '=';
        }
        out[o] = '\0';
}

int main(void) {
        uint8_t a[51], b[51];
        char a64[80], b64[80], text[2048];
        size_t an = make_blob(1, a), bn = make_blob(99, b);

        base64(a, an, a64);
        base64(b, bn, b64);

        /* The one thing that lets an ssh fetch go on: the presented key is the
         * one listed for that host. */
        snprintf(text, sizeof(text), "git.example.org ssh-ed25519 %s comment here\n", a64);
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, a, an), KNOWN_HOSTS_MATCH, "listed key matches");
        CHECK_INT_EQ(known_hosts_check(text, "GIT.Example.org", 22, a, an), KNOWN_HOSTS_MATCH, "host names compare case-insensitively");
        /* A changed key is an attack until shown otherwise: refused, and
         * told apart from an unknown host. */
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, b, bn), KNOWN_HOSTS_MISMATCH, "another key is a mismatch");
        CHECK_INT_EQ(known_hosts_check(text, "other.example.org", 22, a, an), KNOWN_HOSTS_UNKNOWN,
                     "the right key for another host is unknown: keys are per host");
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 2222, a, an), KNOWN_HOSTS_UNKNOWN,
                     "a plain host entry is for port 22 only");

        /* ssh writes other ports as [host]:port. */
        snprintf(text, sizeof(text), "[127.0.0.1]:2222 ssh-ed25519 %s\n", a64);
        CHECK_INT_EQ(known_hosts_check(text, "127.0.0.1", 2222, a, an), KNOWN_HOSTS_MATCH, "[host]:port matches that port");
        CHECK_INT_EQ(known_hosts_check(text, "127.0.0.1", 22, a, an), KNOWN_HOSTS_UNKNOWN, "[host]:port is not port 22");
        CHECK_INT_EQ(known_hosts_check(text, "127.0.0.1", 222, a, an), KNOWN_HOSTS_UNKNOWN, "nor a prefix of the port");
        snprintf(text, sizeof(text), "[127.0.0.1]:22 ssh-ed25519 %s\n", a64);
        CHECK_INT_EQ(known_hosts_check(text, "127.0.0.1", 22, a, an), KNOWN_HOSTS_MATCH, "[host]:22 is port 22");

        /* Comments, blank lines, lists, wildcards and negations, as ssh reads them. */
        snprintf(text, sizeof(text),
                 "# git.example.org ssh-ed25519 %s\n"
                 "\n   \t\n"
                 "gitlab.example.org,git.example.org ssh-ed25519 %s\r\n"
                 "*.example.net,!evil.example.net ssh-ed25519 %s\n", b64, a64, a64);
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, a, an), KNOWN_HOSTS_MATCH, "second name of a list, CRLF line");
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, b, bn), KNOWN_HOSTS_MISMATCH, "a commented-out key counts for nothing");
        CHECK_INT_EQ(known_hosts_check(text, "a.example.net", 22, a, an), KNOWN_HOSTS_MATCH, "wildcard");
        CHECK_INT_EQ(known_hosts_check(text, "evil.example.net", 22, a, an), KNOWN_HOSTS_UNKNOWN, "negation");
        CHECK_INT_EQ(known_hosts_check(text, "example.net", 22, a, an), KNOWN_HOSTS_UNKNOWN, "the wildcard needs its dot");

        /* Garbage names nothing, so cannot vouch for a key; nor can hashed
         * entries (unsupported) or a key whose type field lies. */
        snprintf(text, sizeof(text),
                 "git.example.org\n"
                 "git.example.org ssh-ed25519\n"
                 "git.example.org ssh-ed25519 !!!notbase64!!!\n"
                 "git.example.org ssh-ed25519 %.19s\n"
                 "git.example.org ssh-rsa %s\n"
                 "|1|c2FsdA==|aGFzaA== ssh-ed25519 %s\n"
                 "@cert-authority git.example.org ssh-ed25519 %s\n", a64, a64, a64, a64);
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, a, an), KNOWN_HOSTS_UNKNOWN, "garbage, hashed and CA lines match nothing");
        CHECK_INT_EQ(known_hosts_check("", "git.example.org", 22, a, an), KNOWN_HOSTS_UNKNOWN, "empty known hosts");
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, a, 0), _KNOWN_HOSTS_RESULT_INVALID, "an empty key is invalid");

        /* @revoked wins over a listing of the same key. */
        snprintf(text, sizeof(text), "git.example.org ssh-ed25519 %s\n@revoked * ssh-ed25519 %s\n", a64, a64);
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, a, an), KNOWN_HOSTS_REVOKED, "revoked key refused");

        /* Wildcards as ssh matches them; and a line of many stars (found by
         * fuzz-known-hosts) is answered at once: a matcher that tried every
         * split for every star took exponential time, and the test would
         * hang (meson's timeout) instead of passing. */
        snprintf(text, sizeof(text), "g*t.*.o?g,*x*y*z* ssh-ed25519 %s\n", a64);
        CHECK_INT_EQ(known_hosts_check(text, "git.example.org", 22, a, an), KNOWN_HOSTS_MATCH, "stars and '?' match");
        CHECK_INT_EQ(known_hosts_check(text, "gt.x.orgg", 22, a, an), KNOWN_HOSTS_UNKNOWN, "'?' is exactly one character");
        CHECK_INT_EQ(known_hosts_check(text, "AxByCz", 22, a, an), KNOWN_HOSTS_MATCH, "stars match empty and case folds");
        CHECK_INT_EQ(known_hosts_check(text, "zyx", 22, a, an), KNOWN_HOSTS_UNKNOWN, "order matters");
        char stars[400], host[256];
        memset(stars, '*', 300);
        stars[300] = '\0';
        memset(host, 'a', 255);
        host[255] = '\0';
        snprintf(text, sizeof(text), "%sb ssh-ed25519 %s\n", stars, a64);
        CHECK_INT_EQ(known_hosts_check(text, host, 22, a, an), KNOWN_HOSTS_UNKNOWN, "300 stars against 255 characters: no match, at once");
        host[254] = 'b';
        CHECK_INT_EQ(known_hosts_check(text, host, 22, a, an), KNOWN_HOSTS_MATCH, "and a match, at once");

        /* The ledger refuses an ssh fetch it could not check, before any
         * connection (port 9 is discard: nothing should even be tried). */
        char dir[] = "/tmp/test-known-hosts-XXXXXX";
        CHECK(mkdtemp(dir) != NULL, "temporary directory");
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *error = NULL;
        Ledger *l = NULL;
        LedgerOptions o = { .max_bytes = UINT64_MAX, .ssh_key = "not a key" };
        int r = ledger_create(fd, "ssh://git@127.0.0.1:9/x.git", -EBADF, NULL, "agentfab/t", &o, &error, &l);
        CHECK(r == -EPERM && error && strstr(error, "known hosts") && !strstr(error, "not a key"),
              "ssh:// without known hosts is refused (%d, %s)", r, error ?: "-");
        CHECK(faccessat(fd, "ledger.git", F_OK, 0) < 0, "and nothing stays behind");
        free(error);
        error = NULL;
        o.ssh_known_hosts = "";
        r = ledger_create(fd, "ssh://u:pw@127.0.0.1:9/x.git", -EBADF, NULL, "agentfab/t", &o, &error, &l);
        CHECK_ERRNO(r, -EINVAL, "a password in an ssh URL is refused (%d, %s)", r, error ?: "-");
        free(error);
        error = NULL;
        r = ledger_create(fd, "ssh://git@127.0.0.%31:9/x.git", -EBADF, NULL, "agentfab/t", &o, &error, &l);
        CHECK_ERRNO(r, -EINVAL, "an encoded host name is refused: the key is checked for what we connect to (%d)", r);
        free(error);
        close(fd);
        rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
