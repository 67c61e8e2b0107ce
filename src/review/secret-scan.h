/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stddef.h>

#include "changed-lines.h"
#include "finding.h"

/* The secret scan: looks at every line a change added for private keys,
 * cloud and forge tokens, credentials in URLs, and high-entropy values
 * assigned to names such as password, token, secret or key. No I/O, no
 * regular expressions: each rule is a literal prefix and a run of allowed
 * characters, so a line costs time linear in its length, whatever it holds.
 *
 * SECURITY: a secret's value never leaves this module. A finding carries the
 * file, the line, the kind and a redacted prefix (secret_redact()), nothing
 * else; the model, the journal and the summary only ever see that. */

typedef enum SecretKind {
        SECRET_PRIVATE_KEY,
        SECRET_AWS_ACCESS_KEY_ID,
        SECRET_GITHUB_TOKEN,
        SECRET_GITLAB_TOKEN,
        SECRET_SLACK_TOKEN,
        SECRET_SLACK_WEBHOOK,
        SECRET_GOOGLE_API_KEY,
        SECRET_STRIPE_KEY,
        SECRET_NPM_TOKEN,
        SECRET_PYPI_TOKEN,
        SECRET_ANTHROPIC_KEY,
        SECRET_OPENAI_KEY,
        SECRET_SENDGRID_KEY,
        SECRET_URL_CREDENTIALS,
        SECRET_HIGH_ENTROPY,
        _SECRET_KIND_MAX,
        _SECRET_KIND_INVALID = -EINVAL,
} SecretKind;

/* "private-key", "aws-access-key-id", "github-token", ..., "url-credentials",
 * "high-entropy-assignment": the rule of a finding. */
const char *secret_kind_to_string(SecretKind k);
/* "private key", "AWS access key id", ...: for messages. */
const char *secret_kind_description(SecretKind k);

#define SECRET_MIN_ENTROPY_DEFAULT 3.5  /* bits per character, values of mixed characters */
#define SECRET_MIN_ENTROPY_HEX 3.0      /* values of hex digits only (at most 4 bits per character) */
#define SECRET_MIN_LENGTH_DEFAULT 16U
#define SECRET_VALUE_MAX 1024U          /* longer assigned values are not entropy-checked */
#define SECRET_MATCHES_PER_LINE_MAX 8U

typedef struct SecretScanOptions {
        double min_entropy;     /* 0: SECRET_MIN_ENTROPY_DEFAULT */
        size_t min_length;      /* of an assigned value; 0: SECRET_MIN_LENGTH_DEFAULT */
        char **ignore_globs;    /* path_glob_match() globs of files not scanned (test fixtures) */
} SecretScanOptions;

typedef struct SecretMatch {
        SecretKind kind;
        size_t offset, length;  /* of the value within the line (the password, for URLs) */
} SecretMatch;

/* Scans one line (text[0..n), a NUL ends it early). Fills up to max matches
 * and *ret_n; at most one match per place in the line. */
int secret_scan_line(const SecretScanOptions *o, const char *text, size_t n, SecretMatch *ret, size_t max, size_t *ret_n);

/* Shannon entropy of s[0..n) in bits per byte. */
double secret_entropy(const char *s, size_t n);

/* The redacted form of a secret value: its first min(4, n/4) bytes then "…"
 * (so a short password shows at most a quarter of itself; fixed prefixes
 * such as "AKIA" or "ghp_" show whole). */
char *secret_redact(const char *value, size_t n);

/* text with every secret secret_scan_line() finds in it, line by line,
 * replaced by its secret_redact() form: for what others wrote about the
 * changed files (a checker's message may quote the line it is about). */
char *secret_redact_text(const SecretScanOptions *o, const char *text);

/* True when the file is on the ignore list. */
bool secret_scan_ignored(const SecretScanOptions *o, const char *path);

/* Scans the added lines of every file not ignored; one FINDING_SECRET error
 * per match, rule secret_kind_to_string(), message naming the kind and the
 * redacted prefix. */
int secret_scan_files(const SecretScanOptions *o, const ReviewFile *files, size_t n_files, FindingList *out);
