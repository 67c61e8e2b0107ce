/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakers.h"
#include "secret-scan.h"

static const struct {
        const char *name;
        const char *description;
} secret_kind_table[_SECRET_KIND_MAX] = {
        [SECRET_PRIVATE_KEY] = { "private-key", "private key" },
        [SECRET_AWS_ACCESS_KEY_ID] = { "aws-access-key-id", "AWS access key id" },
        [SECRET_GITHUB_TOKEN] = { "github-token", "GitHub token" },
        [SECRET_GITLAB_TOKEN] = { "gitlab-token", "GitLab personal access token" },
        [SECRET_SLACK_TOKEN] = { "slack-token", "Slack token" },
        [SECRET_SLACK_WEBHOOK] = { "slack-webhook", "Slack webhook URL" },
        [SECRET_GOOGLE_API_KEY] = { "google-api-key", "Google API key" },
        [SECRET_STRIPE_KEY] = { "stripe-key", "Stripe live key" },
        [SECRET_NPM_TOKEN] = { "npm-token", "npm access token" },
        [SECRET_PYPI_TOKEN] = { "pypi-token", "PyPI upload token" },
        [SECRET_ANTHROPIC_KEY] = { "anthropic-api-key", "Anthropic API key" },
        [SECRET_OPENAI_KEY] = { "openai-api-key", "OpenAI API key" },
        [SECRET_SENDGRID_KEY] = { "sendgrid-api-key", "SendGrid API key" },
        [SECRET_URL_CREDENTIALS] = { "url-credentials", "password in a URL" },
        [SECRET_HIGH_ENTROPY] = { "high-entropy-assignment", "high-entropy value assigned to a secret's name" },
};

const char *secret_kind_to_string(SecretKind k) {
        if (k < 0 || k >= _SECRET_KIND_MAX)
                return NULL;
        return secret_kind_table[k].name;
}

const char *secret_kind_description(SecretKind k) {
        if (k < 0 || k >= _SECRET_KIND_MAX)
                return NULL;
        return secret_kind_table[k].description;
}

typedef enum CharSet {
        CS_ALNUM,
        CS_UPPER_DIGIT,
        CS_ALNUM_US,            /* and '_' */
        CS_ALNUM_DASH,          /* and '-' */
        CS_ALNUM_US_DASH,       /* and '_', '-' */
        CS_ALNUM_US_DASH_DOT,   /* and '_', '-', '.' */
        CS_ALNUM_SLASH,         /* and '/' */
} CharSet;

static bool in_set(CharSet cs, char c) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

        switch (cs) {
        case CS_ALNUM:
                return alnum;
        case CS_UPPER_DIGIT:
                return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        case CS_ALNUM_US:
                return alnum || c == '_';
        case CS_ALNUM_DASH:
                return alnum || c == '-';
        case CS_ALNUM_US_DASH:
                return alnum || c == '_' || c == '-';
        case CS_ALNUM_US_DASH_DOT:
                return alnum || c == '_' || c == '-' || c == '.';
        case CS_ALNUM_SLASH:
                return alnum || c == '/';
        }
        return false;
}

/* Token formats as their issuers document them: a fixed prefix, then a run
 * of a character set within these lengths. A prefix must not continue a
 * word ("xAKIA..." is not a key), and a run longer than max is something
 * else. The prefixes are what makes these rules precise; formats without
 * one (AWS secret keys, most passwords) are left to the entropy rule. */
static const struct {
        SecretKind kind;
        const char *prefix;
        CharSet set;
        size_t min, max;
} token_rules[] = {
        { SECRET_AWS_ACCESS_KEY_ID, "AKIA", CS_UPPER_DIGIT, 16, 16 },
        { SECRET_AWS_ACCESS_KEY_ID, "ASIA", CS_UPPER_DIGIT, 16, 16 },
        { SECRET_GITHUB_TOKEN, "ghp_", CS_ALNUM, 36, 255 },
        { SECRET_GITHUB_TOKEN, "gho_", CS_ALNUM, 36, 255 },
        { SECRET_GITHUB_TOKEN, "ghu_", CS_ALNUM, 36, 255 },
        { SECRET_GITHUB_TOKEN, "ghs_", CS_ALNUM, 36, 255 },
        { SECRET_GITHUB_TOKEN, "ghr_", CS_ALNUM, 36, 255 },
        { SECRET_GITHUB_TOKEN, "github_pat_", CS_ALNUM_US, 60, 255 },
        { SECRET_GITLAB_TOKEN, "glpat-", CS_ALNUM_US_DASH, 20, 255 },
        { SECRET_SLACK_TOKEN, "xoxb-", CS_ALNUM_DASH, 10, 255 },
        { SECRET_SLACK_TOKEN, "xoxa-", CS_ALNUM_DASH, 10, 255 },
        { SECRET_SLACK_TOKEN, "xoxp-", CS_ALNUM_DASH, 10, 255 },
        { SECRET_SLACK_TOKEN, "xoxr-", CS_ALNUM_DASH, 10, 255 },
        { SECRET_SLACK_TOKEN, "xoxs-", CS_ALNUM_DASH, 10, 255 },
        { SECRET_SLACK_TOKEN, "xoxe-", CS_ALNUM_DASH, 10, 255 },
        { SECRET_SLACK_WEBHOOK, "https://hooks.slack.com/services/", CS_ALNUM_SLASH, 20, 255 },
        { SECRET_GOOGLE_API_KEY, "AIza", CS_ALNUM_US_DASH, 35, 35 },
        { SECRET_STRIPE_KEY, "sk_live_", CS_ALNUM, 20, 255 },
        { SECRET_STRIPE_KEY, "rk_live_", CS_ALNUM, 20, 255 },
        { SECRET_NPM_TOKEN, "npm_", CS_ALNUM, 36, 36 },
        { SECRET_PYPI_TOKEN, "pypi-AgEIcHlwaS5vcmc", CS_ALNUM_US_DASH, 50, 1000 },
        { SECRET_ANTHROPIC_KEY, "sk-ant-", CS_ALNUM_US_DASH, 32, 255 },
        { SECRET_OPENAI_KEY, "sk-proj-", CS_ALNUM_US_DASH, 32, 255 },
        { SECRET_OPENAI_KEY, "sk-", CS_ALNUM, 48, 48 },
        { SECRET_SENDGRID_KEY, "SG.", CS_ALNUM_US_DASH_DOT, 60, 70 },
};

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

double secret_entropy(const char *s, size_t n) {
        size_t counts[256] = {};
        unsigned lo = 255, hi = 0;
        double h = 0;

        if (n == 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                counts[c]++;
                lo = MIN(lo, (unsigned) c);
                hi = MAX(hi, (unsigned) c);
        }
        /* The bytes that occur, in the same order as over all 256 (the same
         * sum to the last bit): a value is a few dozen of them. */
        for (size_t i = lo; i <= hi; i++)
                if (counts[i] > 0) {
                        double p = (double) counts[i] / (double) n;
                        h -= p * log2(p);
                }
        return h;
}

char *secret_redact(const char *value, size_t n) {
        size_t k = MIN((size_t) 4, n / 4);
        char *r = malloc(k + sizeof("…"));

        if (!r)
                return NULL;
        memcpy(r, value, k);
        strcpy(r + k, "…");
        return r;
}

typedef struct Scan {
        SecretMatch *matches;
        size_t max, n;
} Scan;

static bool scan_overlaps(const Scan *s, size_t offset, size_t length) {
        for (size_t i = 0; i < s->n; i++)
                if (offset < s->matches[i].offset + s->matches[i].length && s->matches[i].offset < offset + length)
                        return true;
        return false;
}

static void scan_add(Scan *s, SecretKind kind, size_t offset, size_t length) {
        if (s->n >= s->max || scan_overlaps(s, offset, length))
                return;
        s->matches[s->n++] = (SecretMatch) { .kind = kind, .offset = offset, .length = length };
}

/* memmem() for short haystacks and needles: memchr() of the first byte,
 * then a compare. glibc's memmem() sets up a two-way search on each call,
 * which costs more than a source line takes to scan. */
static const char *find_n(const char *h, size_t n, const char *needle) {
        size_t k = strlen(needle);
        const char *end = h + n;

        if (k == 0 || k > n)
                return NULL;
        for (const char *p = h; (size_t) (end - p) >= k; p++) {
                /* Only where the whole needle still fits. */
                p = memchr(p, needle[0], (size_t) (end - p) - (k - 1));
                if (!p)
                        return NULL;
                if (memcmp(p, needle, k) == 0)
                        return p;
        }
        return NULL;
}

static void scan_private_keys(Scan *s, const char *t, size_t n) {
        const char *p;

        /* PEM ("-----BEGIN RSA PRIVATE KEY-----", "... ENCRYPTED PRIVATE KEY",
         * "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK") and PuTTY's format.
         * Certificates and public keys are not secrets. */
        p = find_n(t, n, "-----BEGIN ");
        if (p) {
                size_t off = (size_t) (p - t), rest = n - off;
                const char *end = find_n(p + 11, rest - 11, "-----");
                const char *key = find_n(p, end ? (size_t) (end - p) : rest, "PRIVATE KEY");
                if (key) {
                        scan_add(s, SECRET_PRIVATE_KEY, off, end ? (size_t) (end + 5 - p) : rest);
                        return;
                }
        }
        p = find_n(t, n, "PuTTY-User-Key-File-");
        if (p)
                scan_add(s, SECRET_PRIVATE_KEY, (size_t) (p - t), n - (size_t) (p - t));
}

static void scan_tokens(Scan *s, const char *t, size_t n) {
        bool first[256] = {};

        /* Only the bytes that begin a prefix are worth a look at the rules. */
        for (size_t r = 0; r < ELEMENTSOF(token_rules); r++)
                first[(unsigned char) token_rules[r].prefix[0]] = true;

        for (size_t i = 0; i < n; i++) {
                if (!first[(unsigned char) t[i]] || (i > 0 && is_alnum(t[i - 1])))
                        continue;
                for (size_t r = 0; r < ELEMENTSOF(token_rules); r++) {
                        size_t pl, run = 0;

                        if (t[i] != token_rules[r].prefix[0])
                                continue;
                        pl = strlen(token_rules[r].prefix);
                        if (pl > n - i || memcmp(t + i, token_rules[r].prefix, pl) != 0)
                                continue;
                        while (i + pl + run < n && in_set(token_rules[r].set, t[i + pl + run]))
                                run++;
                        if (run < token_rules[r].min || run > token_rules[r].max)
                                continue;
                        scan_add(s, token_rules[r].kind, i, pl + run);
                        break;
                }
        }
}

/* Values that stand for a password rather than being one: variables and
 * templates ("$PASS", "${PASS}", "{{ pass }}", "<password>", "%s"), runs of
 * one character ("****", "xxxx"), and the usual words. */
static bool password_is_placeholder(const char *p, size_t n) {
        static const char *const words[] = { "password", "passwd", "pass", "pwd", "secret", "token", "changeme", "example" };
        bool same = true;

        if (n == 0 || strchr("$<{%[(", p[0]))
                return true;
        for (size_t i = 1; i < n; i++)
                if (p[i] != p[0])
                        same = false;
        if (same)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(words); i++)
                if (strlen(words[i]) == n && strncasecmp(words[i], p, n) == 0)
                        return true;
        return false;
}

static void scan_url_credentials(Scan *s, const char *t, size_t n) {
        for (const char *p = t; (p = find_n(p, n - (size_t) (p - t), "://")); p += 3) {
                const char *scheme = p, *u = p + 3, *end = t + n, *at = NULL, *colon = NULL;

                /* A scheme: a letter, then letters, digits, '+', '-', '.'. */
                while (scheme > t && (is_alnum(scheme[-1]) || strchr("+-.", scheme[-1])))
                        scheme--;
                if (scheme == p || !isalpha((unsigned char) scheme[0]))
                        continue;
                /* The user information ends at '@' before any '/', '?', '#',
                 * space or quote; the password is what follows its first ':'. */
                for (const char *c = u; c < end; c++) {
                        if (strchr("/?#\"'` \t<>", *c))
                                break;
                        if (*c == ':' && !colon)
                                colon = c;
                        if (*c == '@')
                                at = c;
                }
                if (!at || !colon || colon > at || at + 1 >= end || !(is_alnum(at[1]) || at[1] == '['))
                        continue;
                if (password_is_placeholder(colon + 1, (size_t) (at - colon - 1)))
                        continue;
                scan_add(s, SECRET_URL_CREDENTIALS, (size_t) (colon + 1 - t), (size_t) (at - colon - 1));
        }
}

/* Names that hold secrets. Whole words, lower-cased, with '-', '.' and
 * camelCase boundaries taken as '_': "DB_PASSWORD", "apiKey",
 * "client-secret", "auth.token". "key" alone counts only as the last word
 * ("api_key", "signingKey"), not inside "keyboard" or "monkey". */
static bool name_is_secret(const char *name, size_t n) {
        static const char *const contains[] = { "password", "passwd", "passphrase", "secret", "token", "credential", "apikey" };
        static const char *const last[] = { "key", "pwd", "pass", "auth" };
        /* Each byte of the name becomes at most two in words ('_' before a
         * camelCase capital), so words never needs a bound of its own. */
        char lower[128] = "", words[2 * sizeof(lower)];
        size_t k = 0, lastword = 0;

        if (n == 0 || n >= sizeof(lower))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (c >= 'A' && c <= 'Z' && i > 0 && name[i - 1] >= 'a' && name[i - 1] <= 'z') {
                        words[k++] = '_';
                        lastword = k;
                }
                if (c == '-' || c == '.' || c == '_') {
                        c = '_';
                        lastword = k + 1;
                }
                words[k++] = (char) tolower((unsigned char) c);
        }
        words[k] = '\0';
        for (size_t i = 0, j = 0; i < k; i++)
                if (words[i] != '_')
                        lower[j++] = words[i], lower[j] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(contains); i++)
                if (strstr(lower, contains[i]))
                        return true;
        for (size_t i = 0; i < ELEMENTSOF(last); i++)
                if (streq(words + lastword, last[i]))
                        return true;
        return false;
}

static bool is_name_char(char c) {
        return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

static void scan_assignments(Scan *s, const SecretScanOptions *o, const char *t, size_t n) {
        double min_entropy = o && o->min_entropy > 0 ? o->min_entropy : SECRET_MIN_ENTROPY_DEFAULT;
        size_t min_length = o && o->min_length > 0 ? o->min_length : SECRET_MIN_LENGTH_DEFAULT;

        for (size_t i = 0; i < n;) {
                size_t start = i, v, vn = 0;
                bool lower = false, upper = false, digit = false, hex = true;
                char quote = 0;

                if (!is_name_char(t[i])) {
                        i++;
                        continue;
                }
                while (i < n && is_name_char(t[i]))
                        i++;

                /* NAME ["'] [ws] (= | : | := | =>) [ws] ["'`] VALUE; the cheap
                 * part first, most names are not assigned to. */
                v = i;
                if (v < n && (t[v] == '"' || t[v] == '\''))
                        v++;
                while (v < n && (t[v] == ' ' || t[v] == '\t'))
                        v++;
                if (v < n && t[v] == ':')
                        v++;
                if (v < n && t[v] == '=')
                        v++;
                else if (v == i || t[v - 1] != ':')
                        continue;
                if (!name_is_secret(t + start, i - start))
                        continue;
                if (v < n && t[v] == '>')
                        v++;
                if (v < n && t[v] == '=')
                        continue;       /* "==": a comparison */
                while (v < n && (t[v] == ' ' || t[v] == '\t'))
                        v++;
                if (v < n && (t[v] == '"' || t[v] == '\'' || t[v] == '`'))
                        quote = t[v++];
                while (v + vn < n && vn <= SECRET_VALUE_MAX) {
                        char c = t[v + vn];
                        if (quote ? c == quote : (c == ' ' || c == '\t' || strchr(",;)}]#\"'`", c)))
                                break;
                        vn++;
                }
                i = MAX(i, v + vn);
                if (vn < min_length || vn > SECRET_VALUE_MAX)
                        continue;
                if (find_n(t + v, vn, "://") || find_n(t + v, vn, "(") || strchr("$<{%", t[v]))
                        continue;
                for (size_t j = 0; j < vn; j++) {
                        char c = t[v + j];
                        lower = lower || (c >= 'a' && c <= 'z');
                        upper = upper || (c >= 'A' && c <= 'Z');
                        digit = digit || (c >= '0' && c <= '9');
                        hex = hex && isxdigit((unsigned char) c);
                }
                /* Words and dotted names ("org.example.service") are code, not keys. */
                if (lower + upper + digit < 2)
                        continue;
                if (secret_entropy(t + v, vn) < (hex ? MIN(min_entropy, SECRET_MIN_ENTROPY_HEX) : min_entropy))
                        continue;
                scan_add(s, SECRET_HIGH_ENTROPY, v, vn);
        }
}

int secret_scan_line(const SecretScanOptions *o, const char *text, size_t n, SecretMatch *ret, size_t max, size_t *ret_n) {
        Scan s = { .matches = ret, .max = max };

        assert(ret_n);

        if (!text || (max > 0 && !ret))
                return -EINVAL;
        n = strnlen(text, n);

        /* The most specific rules first: a match blocks overlapping ones. */
        scan_private_keys(&s, text, n);
        scan_tokens(&s, text, n);
        scan_url_credentials(&s, text, n);
        scan_assignments(&s, o, text, n);

        *ret_n = s.n;
        return 0;
}

bool secret_scan_ignored(const SecretScanOptions *o, const char *path) {
        for (char **g = o ? o->ignore_globs : NULL; g && *g; g++)
                if (path_glob_match(*g, path))
                        return true;
        return false;
}

static int match_compare(const void *a, const void *b) {
        const SecretMatch *x = a, *y = b;
        return x->offset < y->offset ? -1 : x->offset > y->offset;
}

char *secret_redact_text(const SecretScanOptions *o, const char *text) {
        _cleanup_free_ char *out = NULL;
        size_t size = 0;
        FILE *f;

        assert(text);

        f = open_memstream(&out, &size);
        if (!f)
                return NULL;
        for (const char *line = text; *line;) {
                size_t length = strcspn(line, "\n"), k, at = 0;
                SecretMatch m[SECRET_MATCHES_PER_LINE_MAX];

                if (secret_scan_line(o, line, length, m, ELEMENTSOF(m), &k) < 0) {
                        fclose(f);
                        return NULL;
                }
                if (k > 1)
                        qsort(m, k, sizeof(SecretMatch), match_compare);
                for (size_t x = 0; x < k; x++) {
                        _cleanup_free_ char *redacted = NULL;

                        /* Matches never overlap; one that did is already hidden. */
                        if (m[x].offset < at || m[x].length > length - m[x].offset)
                                continue;
                        redacted = secret_redact(line + m[x].offset, m[x].length);
                        if (!redacted) {
                                fclose(f);
                                return NULL;
                        }
                        fwrite(line + at, 1, m[x].offset - at, f);
                        fputs(redacted, f);
                        at = m[x].offset + m[x].length;
                }
                fwrite(line + at, 1, length - at, f);
                line += length;
                if (*line == '\n') {
                        fputc('\n', f);
                        line++;
                }
        }
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(out);
}

int secret_scan_files(const SecretScanOptions *o, const ReviewFile *files, size_t n_files, FindingList *out) {
        int r;

        assert(out);

        for (size_t i = 0; i < n_files; i++) {
                if (!files[i].path || secret_scan_ignored(o, files[i].path))
                        continue;
                for (size_t j = 0; j < files[i].n_lines; j++) {
                        const ReviewLine *l = &files[i].lines[j];
                        SecretMatch m[SECRET_MATCHES_PER_LINE_MAX];
                        size_t k;

                        r = secret_scan_line(o, l->text, l->length, m, ELEMENTSOF(m), &k);
                        if (r < 0)
                                return r;
                        for (size_t x = 0; x < k; x++) {
                                _cleanup_free_ char *redacted = NULL;

                                if (m[x].kind == SECRET_PRIVATE_KEY) {
                                        r = finding_list_add(out, FINDING_SECRET, FINDING_ERROR, files[i].path, l->number,
                                                             secret_kind_to_string(m[x].kind),
                                                             "Possible %s: a private key block begins here.",
                                                             secret_kind_description(m[x].kind));
                                } else {
                                        redacted = secret_redact(l->text + m[x].offset, m[x].length);
                                        if (!redacted)
                                                return -ENOMEM;
                                        r = finding_list_add(out, FINDING_SECRET, FINDING_ERROR, files[i].path, l->number,
                                                             secret_kind_to_string(m[x].kind),
                                                             "Possible %s: '%s' (%zu characters, redacted).",
                                                             secret_kind_description(m[x].kind), redacted, m[x].length);
                                }
                                if (r < 0)
                                        return r;
                        }
                }
        }
        return 0;
}
