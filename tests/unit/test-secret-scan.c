/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "json-util.h"
#include "secret-scan.h"
#include "string-util.h"
#include "tap.h"

/* Test tokens are put together at run time, so that this file holds no
 * string a secret scanner (ours or a forge's) would take for a real one. */
static char buf[4][512];

static const char *tok(int slot, const char *prefix, const char *alphabet, size_t n) {
        size_t k = strlen(alphabet), l = strlen(prefix);
        memcpy(buf[slot], prefix, l);
        for (size_t i = 0; i < n; i++)
                buf[slot][l + i] = alphabet[(i * 7 + 3) % k];
        buf[slot][l + n] = '\0';
        return buf[slot];
}

static const char *ALNUM = "aB3dE5fG7hJ9kLmN1pQrS2tUvW4xYz0cK8";
static const char *UPPER = "QWERTYUIOPASDFGHJKLZXCVBNM234567";

static SecretKind scan1(const char *line, size_t *ret_n, SecretMatch *ret_m) {
        SecretMatch m[SECRET_MATCHES_PER_LINE_MAX];
        size_t n = 0;

        if (secret_scan_line(NULL, line, strlen(line), m, ELEMENTSOF(m), &n) < 0)
                return _SECRET_KIND_INVALID;
        if (ret_n)
                *ret_n = n;
        if (ret_m && n > 0)
                *ret_m = m[0];
        return n > 0 ? m[0].kind : _SECRET_KIND_INVALID;
}

static void test_tokens(void) {
        char line[1024];

        /* Each issuer's format is recognised wherever it sits in a line. */
        snprintf(line, sizeof(line), "aws_access_key_id = %s", tok(0, "AKIA", UPPER, 16));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_AWS_ACCESS_KEY_ID, "AWS access key id");
        snprintf(line, sizeof(line), "x = \"%s\"", tok(0, "ghp_", ALNUM, 36));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_GITHUB_TOKEN, "GitHub classic token");
        snprintf(line, sizeof(line), "%s", tok(0, "github_pat_", ALNUM, 82));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_GITHUB_TOKEN, "GitHub fine-grained token");
        snprintf(line, sizeof(line), "GITLAB=%s", tok(0, "glpat-", ALNUM, 20));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_GITLAB_TOKEN, "GitLab token");
        snprintf(line, sizeof(line), "slack: %s", tok(0, "xoxb-", "1234567890-", 30));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_SLACK_TOKEN, "Slack bot token");
        snprintf(line, sizeof(line), "url = '%s'", tok(0, "https://hooks.slack.com/services/", "T0B1C2/XYZabc", 40));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_SLACK_WEBHOOK, "Slack webhook");
        snprintf(line, sizeof(line), "key=%s;", tok(0, "AIza", ALNUM, 35));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_GOOGLE_API_KEY, "Google API key");
        snprintf(line, sizeof(line), "stripe.api_key = '%s'", tok(0, "sk_live_", ALNUM, 24));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_STRIPE_KEY, "Stripe live key");
        snprintf(line, sizeof(line), "//registry.npmjs.org/:_authToken=%s", tok(0, "npm_", ALNUM, 36));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_NPM_TOKEN, "npm token");
        snprintf(line, sizeof(line), "%s", tok(0, "sk-ant-api03-", ALNUM, 40));
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_ANTHROPIC_KEY, "Anthropic key");

        /* Near misses: a prefix inside a word, a run too short or too long. */
        snprintf(line, sizeof(line), "x%s", tok(0, "AKIA", UPPER, 16));
        CHECK(scan1(line, NULL, NULL) != SECRET_AWS_ACCESS_KEY_ID, "AKIA inside a word is not a key");
        snprintf(line, sizeof(line), "%s", tok(0, "AKIA", UPPER, 17));
        CHECK(scan1(line, NULL, NULL) != SECRET_AWS_ACCESS_KEY_ID, "AKIA + 17 is not a key id");
        snprintf(line, sizeof(line), "%s", tok(0, "ghp_", ALNUM, 20));
        CHECK_INT_EQ(scan1(line, NULL, NULL), _SECRET_KIND_INVALID, "a short ghp_ run is not a token");
        CHECK_INT_EQ(scan1("sk_test_abcdefghijklmnopqrstuvwxyz", NULL, NULL), _SECRET_KIND_INVALID, "Stripe test keys are not flagged");
}

static void test_private_keys(void) {
        char line[128];

        /* PEM and OpenSSH private keys by their header; public material is not secret. */
        snprintf(line, sizeof(line), "-----BEGIN %s PRIVATE KEY-----", "RSA");
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_PRIVATE_KEY, "RSA PEM header");
        snprintf(line, sizeof(line), "  \"-----BEGIN %s PRIVATE KEY-----\\n\"", "OPENSSH");
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_PRIVATE_KEY, "OpenSSH header inside a string");
        snprintf(line, sizeof(line), "-----BEGIN %s PRIVATE KEY-----", "ENCRYPTED");
        CHECK_INT_EQ(scan1(line, NULL, NULL), SECRET_PRIVATE_KEY, "encrypted PKCS#8 header");
        CHECK_INT_EQ(scan1("-----BEGIN CERTIFICATE-----", NULL, NULL), _SECRET_KIND_INVALID, "a certificate is not a secret");
        CHECK_INT_EQ(scan1("-----BEGIN PUBLIC KEY-----", NULL, NULL), _SECRET_KIND_INVALID, "a public key is not a secret");
}

static void test_urls(void) {
        SecretMatch m;
        size_t n;
        const char *l = "DATABASE_URL=postgres://app:s3cr3tPassw0rd@db.internal:5432/app";

        /* The password is the match, not the user or the host. */
        CHECK(scan1(l, &n, &m) == SECRET_URL_CREDENTIALS && n == 1 && m.length == strlen("s3cr3tPassw0rd") &&
              strneq(l + m.offset, "s3cr3tPassw0rd", m.length), "password in a URL");
        CHECK_INT_EQ(scan1("git clone https://x-access-token:abcdef0123456789@github.com/o/r", NULL, NULL), SECRET_URL_CREDENTIALS,
                     "token as a URL password");
        CHECK_INT_EQ(scan1("redis://:hunter2hunter2@localhost:6379", NULL, NULL), SECRET_URL_CREDENTIALS, "empty user");
        /* Placeholders and templates are not passwords. */
        CHECK_INT_EQ(scan1("postgres://user:${DB_PASSWORD}@db/app", NULL, NULL), _SECRET_KIND_INVALID, "${VAR}");
        CHECK_INT_EQ(scan1("postgres://user:password@localhost/app", NULL, NULL), _SECRET_KIND_INVALID, "the word password");
        CHECK_INT_EQ(scan1("http://user:****@host/", NULL, NULL), _SECRET_KIND_INVALID, "****");
        CHECK_INT_EQ(scan1("https://example.com/a:b@c", NULL, NULL), _SECRET_KIND_INVALID, "':' and '@' after the path");
        CHECK_INT_EQ(scan1("ssh://git@github.com/o/r", NULL, NULL), _SECRET_KIND_INVALID, "a user without a password");
}

static void test_entropy(void) {
        SecretMatch m;
        size_t n;

        /* High-entropy values assigned to secret-looking names, in the
         * syntaxes of shell, Python, YAML, JSON, Go and JS. */
        CHECK_INT_EQ(scan1("API_KEY=Zx8qL2vR9tY4wP7mK3nB6cD1", NULL, NULL), SECRET_HIGH_ENTROPY, "shell");
        CHECK_INT_EQ(scan1("    client_secret = \"q8Z2xL7vR4tY9wP3mK6nB1cD\"", NULL, NULL), SECRET_HIGH_ENTROPY, "python");
        CHECK_INT_EQ(scan1("password: 9fT2kLq8ZxR4vW7mP3nB", NULL, NULL), SECRET_HIGH_ENTROPY, "yaml");
        CHECK(scan1("  \"authToken\": \"a1B2c3D4e5F6g7H8i9J0kLmN\",", &n, &m) == SECRET_HIGH_ENTROPY && m.length == 24,
              "json: the value without its quotes");
        CHECK_INT_EQ(scan1("signingKey := `Zx8qL2vR9tY4wP7mK3nB6cD1`", NULL, NULL), SECRET_HIGH_ENTROPY, "go, camelCase key");
        CHECK_INT_EQ(scan1("const dbPassword = 'e3b0c44298fc1c149afbf4c8996fb924';", NULL, NULL), SECRET_HIGH_ENTROPY, "hex value");

        /* Shannon entropy in bits a byte, over whatever bytes occur. */
        unsigned char all[256];
        for (size_t i = 0; i < sizeof(all); i++)
                all[i] = (unsigned char) i;
        CHECK(secret_entropy("", 0) == 0 && secret_entropy("aaaa", 4) == 0 && secret_entropy("abab", 4) == 1.0 &&
              secret_entropy("\x01\xff", 2) == 1.0 && secret_entropy((const char *) all, sizeof(all)) == 8.0,
              "entropy of none, one, two and all 256 byte values");

        /* What is code, not a secret. */
        CHECK_INT_EQ(scan1("password = get_password_from_vault()", NULL, NULL), _SECRET_KIND_INVALID, "a call");
        CHECK_INT_EQ(scan1("token = os.environ['GITHUB_TOKEN']", NULL, NULL), _SECRET_KIND_INVALID, "an environment look-up");
        CHECK_INT_EQ(scan1("secret: ${{ secrets.DEPLOY_KEY }}", NULL, NULL), _SECRET_KIND_INVALID, "a template");
        CHECK_INT_EQ(scan1("api_key = \"changeme\"", NULL, NULL), _SECRET_KIND_INVALID, "too short");
        CHECK_INT_EQ(scan1("password = \"aaaaaaaaaaaaaaaaaaaaaaaa\"", NULL, NULL), _SECRET_KIND_INVALID, "low entropy");
        CHECK_INT_EQ(scan1("token_service = org.example.authentication.service", NULL, NULL), _SECRET_KIND_INVALID,
                     "a dotted name");
        CHECK_INT_EQ(scan1("if token == \"Zx8qL2vR9tY4wP7mK3nB6cD1\":", NULL, NULL), _SECRET_KIND_INVALID, "a comparison");
        CHECK_INT_EQ(scan1("monkey = Zx8qL2vR9tY4wP7mK3nB6cD1", NULL, NULL), _SECRET_KIND_INVALID, "'key' inside a word");
        CHECK_INT_EQ(scan1("keyboard_layout = Zx8qL2vR9tY4wP7mK3nB6cD1", NULL, NULL), _SECRET_KIND_INVALID, "'key' not last");
        CHECK_INT_EQ(scan1("token_url = https://example.com/oauth2/token", NULL, NULL), _SECRET_KIND_INVALID, "a URL");
}

static void test_redact(void) {
        _cleanup_free_ char *a = secret_redact("AKIAQWERTYUIOPASDFGH", 20), *b = secret_redact("hunter2", 7),
                            *c = secret_redact("abcdefgh", 8);

        /* At most a quarter, at most four bytes. */
        CHECK_STR_EQ(a, "AKIA…", "a long value shows four bytes: %s", a);
        CHECK_STR_EQ(b, "h…", "a 7-byte value shows one: %s", b);
        CHECK_STR_EQ(c, "ab…", "an 8-byte value shows two: %s", c);
}

static void test_files(void) {
        char l1[128], l2[128];
        const char *key = tok(1, "ghp_", ALNUM, 36);
        FindingList out = {};
        ReviewLine lines[] = {
                { 3, "print('hello')", 14 },
                { 7, l1, 0 },
                { 9, l2, 0 },
        };
        ReviewFile files[] = {
                { "src/app.py", lines, ELEMENTSOF(lines) },
                { "tests/fixtures/keys.txt", lines, ELEMENTSOF(lines) },
        };
        SecretScanOptions o = { .ignore_globs = STRV_MAKE("tests/fixtures/**") };
        _cleanup_json_ json_object *j = NULL;
        bool leaked = false;

        snprintf(l1, sizeof(l1), "TOKEN = '%s'", key);
        lines[1].length = strlen(l1);
        snprintf(l2, sizeof(l2), "db = 'mysql://root:Pa55w0rdPa55w0rd@127.0.0.1/x'");
        lines[2].length = strlen(l2);

        CHECK(secret_scan_files(&o, files, ELEMENTSOF(files), &out) == 0 && out.n == 2, "two findings: %zu", out.n);
        CHECK(out.n == 2 && streq(out.items[0].file, "src/app.py") && out.items[0].line == 7 &&
              streq(out.items[0].rule, "github-token") && out.items[0].severity == FINDING_ERROR &&
              strstr(out.items[0].message, "'ghp_…'"), "file, line, kind, redacted prefix: %s", out.n ? out.items[0].message : "");
        CHECK(out.n == 2 && out.items[1].line == 9 && streq(out.items[1].rule, "url-credentials"), "the URL's password");

        /* SECURITY: no part of a secret past its redacted prefix is anywhere in the findings. */
        CHECK_ERRNO(finding_list_to_json(&out, &j), 0, "to JSON");
        leaked = strstr(json_object_to_json_string(j), key + 4) || strstr(json_object_to_json_string(j), "w0rdPa55");
        CHECK(!leaked, "no secret value in the serialised findings");
        CHECK(!secret_scan_ignored(&o, "src/tests/fixtures/x") && secret_scan_ignored(&o, "tests/fixtures/a/b.pem"),
              "ignore globs are anchored at the top");
        finding_list_done(&out);
}

static void test_bounds(void) {
        _cleanup_free_ char *big = malloc(1 << 20);
        size_t n = 99;
        SecretMatch m[SECRET_MATCHES_PER_LINE_MAX];

        /* A megabyte of 'a's and of "password=" scans in linear time and finds nothing. */
        memset(big, 'a', (1 << 20) - 1);
        big[(1 << 20) - 1] = '\0';
        CHECK(secret_scan_line(NULL, big, (1 << 20) - 1, m, ELEMENTSOF(m), &n) == 0 && n == 0, "1 MiB of one letter");
        for (size_t i = 0; i + 9 < (1 << 20); i += 9)
                memcpy(big + i, "password=", 9);
        CHECK_ERRNO(secret_scan_line(NULL, big, (1 << 20) - 1, m, ELEMENTSOF(m), &n), 0, "1 MiB of assignments");
        /* A long camelCase name ending in a separator: its word buffer once
         * overflowed (found by fuzz-secret-scan). */
        memset(big, 0, 256);
        for (size_t i = 0; i < 120; i += 2)
                memcpy(big + i, "aB", 2);
        strcpy(big + 120, "_key = \"Zx8qL2vR9tY4wP7mK3nB6cD1\"");
        CHECK(secret_scan_line(NULL, big, strlen(big), m, ELEMENTSOF(m), &n) == 0 && n == 1 && m[0].kind == SECRET_HIGH_ENTROPY,
              "a 124-byte camelCase name, its last word 'key'");
        /* A NUL ends the line. */
        CHECK(secret_scan_line(NULL, "ab\0-----BEGIN RSA PRIVATE KEY-----", 36, m, ELEMENTSOF(m), &n) == 0 && n == 0,
              "nothing past a NUL");
}

int main(void) {
        test_tokens();
        test_private_keys();
        test_urls();
        test_entropy();
        test_redact();
        test_files();
        test_bounds();
        return tap_done();
}
