/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Delivery to a forge: opening a pull request for a task's branch through
 * the forge's REST API. The branch itself is pushed by ledger_push(); this
 * only asks the forge to propose it for merging.
 *
 * The call blocks (libcurl's easy interface), with bounded timeouts and a
 * bounded reply. Only http:// and https:// API URLs, no redirects. The
 * token goes into one request header and nowhere else: no error message,
 * no log line ever holds it. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum ForgeKind {
        FORGE_KIND_GITEA,       /* Gitea and Forgejo: "Authorization: token T" */
        FORGE_KIND_GITHUB,      /* GitHub's REST API v3: "Authorization: Bearer T" */
        _FORGE_KIND_MAX,
        _FORGE_KIND_INVALID = -EINVAL,
} ForgeKind;

#define FORGE_NAME_MAX        64U
#define FORGE_API_MAX         1024U
#define FORGE_TOKEN_MAX       4096U
#define FORGE_TITLE_MAX       256U
#define FORGE_BODY_MAX        (60U * 1024U)    /* GitHub refuses bodies over 65536 characters */
#define FORGE_REPLY_MAX       (256U * 1024U)
#define FORGE_ERROR_TEXT_MAX  200U
#define FORGE_URL_MAX         2048U

typedef struct ForgeRequest {
        ForgeKind kind;
        const char *api;             /* base URL: https://gitea.example/api/v1, https://api.github.com */
        const char *token;           /* NULL: no Authorization header */
        const char *owner;
        const char *repo;
        const char *head;            /* the branch to propose: must be under agentfab/ */
        const char *base;            /* the branch to merge into */
        const char *title;
        const char *body;
        uint64_t timeout_usec;       /* whole request; 0: the default (60 s) */
        uint64_t connect_timeout_usec; /* 0: the default (10 s) */
        uint64_t max_reply_bytes;    /* 0: FORGE_REPLY_MAX */
} ForgeRequest;

const char *forge_kind_to_string(ForgeKind k);
ForgeKind forge_kind_from_string(const char *s);

/* [A-Za-z0-9_.-]{1,100}, not "." or "..": an owner or a repository name. */
bool forge_name_is_valid(const char *name);
/* "owner/repo", both parts valid names. */
bool forge_repository_is_valid(const char *s);
/* Splits "owner/repo"; -EINVAL if it is not valid. */
int forge_repository_split(const char *s, char **ret_owner, char **ret_repo);
/* An http:// or https:// URL with a host, no user information, no query,
 * no fragment, no control characters or spaces, at most FORGE_API_MAX. */
bool forge_api_is_valid(const char *api);

/* A URL to push a task's branch to: https://HOST/... or, with allow_file,
 * file:///PATH. No user information (a secret would end up in the task's
 * record, on the bus and in the journal), no query or fragment, no spaces
 * or control characters, at most FORGE_URL_MAX. */
bool forge_push_url_is_valid(const char *url, bool allow_file);

/* Whether the forge's token may go with a push to push_url: an https push
 * URL on the API's own host and port, or, as GitHub has it, the API on
 * "api." of the push host (https://api.github.com, https://github.com).
 * SECURITY: otherwise a submitter could name any host as the push URL and
 * have the factory hand it the forge's token. */
bool forge_push_url_matches_api(const char *api, const char *push_url);

/* POSTs {title, body, head, base} to {api}/repos/{owner}/{repo}/pulls.
 * On success (HTTP 201, or 200) returns 0 and the pull request's html_url.
 * Otherwise a negative errno and, in *ret_error, a one-line message: the
 * HTTP status and the forge's own "message" (or the start of the body),
 * sanitized (printable ASCII only, shortened). -EINVAL for an invalid
 * request (names, head not under agentfab/, head equal to base), -EPROTO
 * for a reply that is not JSON with an html_url, -EFBIG for a reply over
 * the bound, -EACCES for 401/403, -ENOENT for 404, -EEXIST for 409/422
 * (GitHub and Gitea say "already exists" or "validation failed" this way),
 * -EIO for other HTTP errors or transport failures. */
int forge_open_pull_request(const ForgeRequest *req, char **ret_url, char **ret_error);
