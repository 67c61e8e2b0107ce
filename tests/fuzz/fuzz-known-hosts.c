/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* known_hosts text (SSHKnownHostsCredential=) checked against a host, a port
 * and a key. Invariants: the result is one of the four; and adding a line
 * that names the host with exactly this key always makes it known with this
 * key (MATCH), unless the text already revoked that key (REVOKED). */
#include "fuzz.h"
#include "known-hosts.h"

static void base64_encode(const uint8_t *in, size_t n, char *out) {
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

/* A host the added line can name literally: no field separators, no
 * pattern syntax. */
static bool host_is_literal(const char *h) {
        if (!*h || strlen(h) > 255)
                return false;
        for (const char *c = h; *c; c++)
                if ((unsigned char) *c <= ' ' || strchr(",*?![]|#@", *c) || (unsigned char) *c >= 0x7f)
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const types[] = { "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256" };
        static const unsigned ports[] = { 22, 2222, 0, 65535 };
        FuzzInput in = { .data = data, .size = size };
        uint8_t sel = fuzz_u8(&in);
        unsigned port = ports[sel & 3];
        const char *type = types[(sel >> 2) % 3];
        char *host = fuzz_string(&in, NULL);
        size_t raw_len;
        char *raw = fuzz_string(&in, &raw_len);
        char *text = fuzz_string(&in, NULL);

        /* The key as a server presents it: a blob that starts with its type. */
        size_t tl = strlen(type), key_len = 4 + tl + (raw_len > 1024 ? 1024 : raw_len);
        uint8_t key[4 + 32 + 1024];
        key[0] = key[1] = key[2] = 0;
        key[3] = (uint8_t) tl;
        memcpy(key + 4, type, tl);
        memcpy(key + 4 + tl, raw, key_len - 4 - tl);

        KnownHostsResult r1 = known_hosts_check(text, host, port, key, key_len);
        if (strlen(host) > 255)
                FUZZ_CHECK(r1 == _KNOWN_HOSTS_RESULT_INVALID, "an over-long host name is refused");
        else
                FUZZ_CHECK(r1 >= 0 && r1 < _KNOWN_HOSTS_RESULT_MAX, "result %d out of range", (int) r1);

        if (host_is_literal(host)) {
                char b64[(sizeof(key) + 2) / 3 * 4 + 1];
                size_t tn = strlen(text);
                base64_encode(key, key_len, b64);
                char *t2 = malloc(tn + strlen(host) + strlen(type) + strlen(b64) + 32);
                if (!t2)
                        abort();
                if (port == 22)
                        sprintf(t2, "%s\n%s %s %s\n", text, host, type, b64);
                else
                        sprintf(t2, "%s\n[%s]:%u %s %s\n", text, host, port, type, b64);
                KnownHostsResult r2 = known_hosts_check(t2, host, port, key, key_len);
                if (r1 == KNOWN_HOSTS_REVOKED)
                        FUZZ_CHECK(r2 == KNOWN_HOSTS_REVOKED, "a revoked key stays revoked (got %d)", (int) r2);
                else
                        FUZZ_CHECK(r2 == KNOWN_HOSTS_MATCH, "a line naming host '%s' with the key matches (got %d, before %d)",
                                   host, (int) r2, (int) r1);
                free(t2);
        }

        free(host);
        free(raw);
        free(text);
        return 0;
}
