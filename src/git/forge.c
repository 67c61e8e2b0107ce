/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl-util.h"
#include "forge.h"
#include "json-util.h"
#include "string-table.h"
#include "string-util.h"

#define FORGE_DEFAULT_TIMEOUT_USEC         (60 * USEC_PER_SEC)
#define FORGE_DEFAULT_CONNECT_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define FORGE_REF_MAX                      255U

static const char *const forge_kind_table[_FORGE_KIND_MAX] = {
        [FORGE_KIND_GITEA]  = "gitea",
        [FORGE_KIND_GITHUB] = "github",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(forge_kind, ForgeKind);

ForgeKind forge_kind_from_string(const char *s) {
        ssize_t k = string_table_lookup(forge_kind_table, ELEMENTSOF(forge_kind_table), s);

        if (k >= 0)
                return (ForgeKind) k;
        /* Forgejo speaks Gitea's API. */
        if (streq_ptr(s, "forgejo"))
                return FORGE_KIND_GITEA;
        return _FORGE_KIND_INVALID;
}

bool forge_name_is_valid(const char *name) {
        size_t l;

        if (!name)
                return false;
        l = strlen(name);
        if (l == 0 || l > 100 || streq(name, ".") || streq(name, ".."))
                return false;
        for (const char *c = name; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr("_.-", *c))
                        return false;
        return true;
}

int forge_repository_split(const char *s, char **ret_owner, char **ret_repo) {
        _cleanup_free_ char *owner = NULL, *repo = NULL;
        const char *slash;

        if (!s || !(slash = strchr(s, '/')))
                return -EINVAL;
        owner = strndup(s, (size_t) (slash - s));
        repo = strdup(slash + 1);
        if (!owner || !repo)
                return -ENOMEM;
        if (!forge_name_is_valid(owner) || !forge_name_is_valid(repo))
                return -EINVAL;
        if (ret_owner)
                *ret_owner = TAKE_PTR(owner);
        if (ret_repo)
                *ret_repo = TAKE_PTR(repo);
        return 0;
}

bool forge_repository_is_valid(const char *s) {
        return forge_repository_split(s, NULL, NULL) == 0;
}

bool forge_api_is_valid(const char *api) {
        const char *host;

        if (!api || strlen(api) > FORGE_API_MAX)
                return false;
        if (strneq(api, "https://", 8))
                host = api + 8;
        else if (strneq(api, "http://", 7))
                host = api + 7;
        else
                return false;
        if (host[0] == '\0' || host[0] == '/')
                return false;
        /* SECURITY: no "user:password@" (a secret in the configuration that
         * would show up wherever the URL is shown), no query or fragment
         * (the path is appended to), nothing that could split a header. */
        for (const unsigned char *c = (const unsigned char *) api; *c; c++)
                if (*c <= ' ' || *c >= 127 || strchr("@?#\\", *c))
                        return false;
        return true;
}

/* "/./" or "/../" in the path, or at its end. */
static bool path_has_dot_component(const char *path) {
        size_t l = strlen(path);

        return strstr(path, "/../") || strstr(path, "/./") ||
                (l >= 3 && streq(path + l - 3, "/..")) || (l >= 2 && streq(path + l - 2, "/."));
}

bool forge_push_url_is_valid(const char *url, bool allow_file) {
        const char *rest, *slash;

        if (!url || strlen(url) > FORGE_URL_MAX)
                return false;
        for (const unsigned char *c = (const unsigned char *) url; *c; c++)
                if (*c <= ' ' || *c >= 127 || strchr("?#\\", *c))
                        return false;
        if (strneq(url, "https://", 8)) {
                rest = url + 8;
                slash = strchr(rest, '/');
                /* A host, a path, and no "user:password@" in the authority. */
                if (!slash || slash == rest || slash[1] == '\0' || memchr(rest, '@', (size_t) (slash - rest)))
                        return false;
                return !path_has_dot_component(slash);
        }
        /* libgit2 decodes %XX in file URLs: none, so that "/../" cannot be spelt otherwise. */
        if (allow_file && strneq(url, "file:///", 8))
                return url[8] != '\0' && !strchr(url, '%') && !path_has_dot_component(url + 7);
        return false;
}

/* The host[:port] of an http(s) URL, as written (lower-cased). */
static char *url_authority(const char *url) {
        const char *rest;
        char *a;

        if (strneq(url, "https://", 8))
                rest = url + 8;
        else if (strneq(url, "http://", 7))
                rest = url + 7;
        else
                return NULL;
        a = strndup(rest, strcspn(rest, "/"));
        for (char *c = a; c && *c; c++)
                *c = (char) tolower((unsigned char) *c);
        return a;
}

bool forge_push_url_matches_api(const char *api, const char *push_url) {
        _cleanup_free_ char *a = NULL, *p = NULL;

        if (!api || !push_url || !strneq(push_url, "https://", 8))
                return false;
        a = url_authority(api);
        p = url_authority(push_url);
        if (!a || !p || isempty(a) || isempty(p) || strchr(p, '@'))
                return false;
        return streq(a, p) || (strneq(a, "api.", 4) && streq(a + 4, p));
}

/* A branch name as git-check-ref-format(1) would take it, conservatively. */
static bool ref_is_valid(const char *ref) {
        size_t l = strlen(ref);

        if (l == 0 || l > FORGE_REF_MAX || ref[0] == '-' || ref[0] == '/' || ref[l - 1] == '/' || ref[l - 1] == '.')
                return false;
        if (strstr(ref, "..") || strstr(ref, "//") || strstr(ref, "@{") || strstr(ref, "/."))
                return false;
        for (const char *c = ref; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr("_./-", *c))
                        return false;
        return true;
}

typedef struct Reply {
        char *data;
        size_t size;
        size_t max;
        bool overflow;
} Reply;

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Reply *r = userdata;
        size_t n = size * nmemb;
        char *d;

        /* SECURITY: a forge (or whatever answers at its address) decides how
         * much it sends; we keep no more than the bound. Returning less than
         * n makes libcurl stop the transfer. */
        if (n > r->max - r->size) {
                r->overflow = true;
                return 0;
        }
        d = realloc(r->data, r->size + n + 1);
        if (!d)
                return 0;
        memcpy(d + r->size, ptr, n);
        r->data = d;
        r->size += n;
        r->data[r->size] = '\0';
        return n;
}

static int append_header(struct curl_slist **l, const char *h) {
        struct curl_slist *n = curl_slist_append(*l, h);
        if (!n)
                return -ENOMEM;
        *l = n;
        return 0;
}

/* The token is in one of these: wipe them all before they are freed. */
static void headers_free(struct curl_slist *l) {
        for (struct curl_slist *i = l; i; i = i->next)
                explicit_bzero(i->data, strlen(i->data));
        curl_slist_free_all(l);
}

/* A short, printable, one-line version of what the forge said, without the
 * token should the forge have echoed it. */
static char *sanitize_text(const char *text, const char *token) {
        _cleanup_free_ char *s = strndup(strempty(text), FORGE_ERROR_TEXT_MAX);
        char *p;

        if (!s)
                return NULL;
        if (token && strlen(token) >= 4)
                while ((p = strstr(s, token)))
                        memset(p, '*', strlen(token));
        for (char *c = s; *c; c++)
                if ((unsigned char) *c < ' ' || (unsigned char) *c >= 127)
                        *c = (*c == '\n' || *c == '\t' || *c == '\r') ? ' ' : '?';
        if (strlen(strempty(text)) > FORGE_ERROR_TEXT_MAX) {
                char *cut;
                if (asprintf(&cut, "%s...", s) < 0)
                        return NULL;
                return cut;
        }
        return TAKE_PTR(s);
}

/* What the forge said in an error reply: its "message" (GitHub and Gitea
 * both have one), with GitHub's first "errors" entry if there is one, or
 * else the start of the body. */
static char *error_text(const Reply *reply, const char *token) {
        _cleanup_json_ json_object *j = NULL;
        const char *message = NULL, *detail = NULL;
        json_object *errors;

        if (reply->size == 0)
                return strdup("(no body)");
        if (json_parse_strict(reply->data, reply->size, &j) >= 0 && json_object_is_type(j, json_type_object)) {
                (void) json_get_string(j, "message", &message);
                if (json_object_object_get_ex(j, "errors", &errors) && json_object_is_type(errors, json_type_array) &&
                    json_object_array_length(errors) > 0) {
                        json_object *e = json_object_array_get_idx(errors, 0);
                        if (json_object_is_type(e, json_type_object))
                                (void) json_get_string(e, "message", &detail);
                        else if (json_object_is_type(e, json_type_string))
                                detail = json_object_get_string(e);
                }
        }
        if (message) {
                _cleanup_free_ char *both = NULL;
                if (detail && asprintf(&both, "%s: %s", message, detail) < 0)
                        return NULL;
                return sanitize_text(both ?: message, token);
        }
        return sanitize_text(reply->data, token);
}

static int status_to_errno(long status) {
        switch (status) {
        case 401:
        case 403:
                return -EACCES;
        case 404:
                return -ENOENT;
        case 409:
        case 422:
                return -EEXIST;
        default:
                return -EIO;
        }
}

static int forge_request_check(const ForgeRequest *req, char **ret_error) {
        if (req->kind < 0 || req->kind >= _FORGE_KIND_MAX)
                return error_set(ret_error, -EINVAL, "Unknown kind of forge.");
        if (!forge_api_is_valid(req->api))
                return error_set(ret_error, -EINVAL, "The forge's API URL is not an http:// or https:// URL.");
        if (!forge_name_is_valid(req->owner) || !forge_name_is_valid(req->repo))
                return error_set(ret_error, -EINVAL, "Owner and repository names must be letters, digits, '_', '.', '-'.");
        if (!req->head || !req->base || !ref_is_valid(req->head) || !ref_is_valid(req->base))
                return error_set(ret_error, -EINVAL, "The head and base branches must be valid branch names.");
        /* SECURITY: the factory only ever proposes its own branches. */
        if (!strneq(req->head, "agentfab/", 9) || req->head[9] == '\0')
                return error_set(ret_error, -EINVAL, "Refusing to propose branch '%s': only branches under agentfab/ are.",
                                 req->head);
        if (streq(req->head, req->base))
                return error_set(ret_error, -EINVAL, "The base branch is the head branch '%s'.", req->head);
        if (!req->title || isempty(req->title) || strlen(req->title) > FORGE_TITLE_MAX)
                return error_set(ret_error, -EINVAL, "The title is empty or longer than %u bytes.", FORGE_TITLE_MAX);
        if (req->body && strlen(req->body) > FORGE_BODY_MAX)
                return error_set(ret_error, -EINVAL, "The body is longer than %u bytes.", FORGE_BODY_MAX);
        if (req->token && (strlen(req->token) > FORGE_TOKEN_MAX || isempty(req->token) || !string_is_safe(req->token, false) ||
                           strchr(req->token, ' ')))
                /* SECURITY: it goes into a header; a newline would add headers of its own. */
                return error_set(ret_error, -EINVAL, "The forge token is empty, too long or has control characters.");
        return 0;
}

static int request_body(const ForgeRequest *req, char **ret) {
        _cleanup_json_ json_object *j = json_object_new_object();
        const char *text;

        if (!j ||
            json_add_string(j, "title", req->title) < 0 ||
            json_add_string(j, "body", strempty(req->body)) < 0 ||
            json_add_string(j, "head", req->head) < 0 ||
            json_add_string(j, "base", req->base) < 0)
                return -ENOMEM;
        text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        *ret = strdup(text);
        return *ret ? 0 : -ENOMEM;
}

static int request_headers(const ForgeRequest *req, struct curl_slist **ret) {
        struct curl_slist *l = NULL;
        int r;

        r = append_header(&l, "Content-Type: application/json");
        if (r >= 0)
                r = append_header(&l, "Expect:");
        if (r >= 0 && req->kind == FORGE_KIND_GITHUB) {
                r = append_header(&l, "Accept: application/vnd.github+json");
                if (r >= 0)
                        r = append_header(&l, "X-GitHub-Api-Version: 2022-11-28");
        } else if (r >= 0)
                r = append_header(&l, "Accept: application/json");
        if (r >= 0 && req->token) {
                _cleanup_free_ char *h = NULL;

                if (asprintf(&h, "Authorization: %s %s", req->kind == FORGE_KIND_GITHUB ? "Bearer" : "token", req->token) < 0)
                        r = -ENOMEM;
                else {
                        r = append_header(&l, h);
                        explicit_bzero(h, strlen(h));
                }
        }
        if (r < 0) {
                headers_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

static int parse_reply(const Reply *reply, char **ret_url, char **ret_error) {
        _cleanup_json_ json_object *j = NULL;
        const char *url;

        if (reply->size == 0 || json_parse_strict(reply->data, reply->size, &j) < 0 ||
            !json_object_is_type(j, json_type_object))
                return error_set(ret_error, -EPROTO, "The forge's reply is not a JSON object.");
        if (json_get_string(j, "html_url", &url) < 0)
                return error_set(ret_error, -EPROTO, "The forge's reply has no html_url.");
        /* It is shown on the bus and in the journal: a URL, nothing else. */
        if (strlen(url) > FORGE_URL_MAX || !string_is_safe(url, false) ||
            (!strneq(url, "https://", 8) && !strneq(url, "http://", 7)) || strchr(url, ' '))
                return error_set(ret_error, -EPROTO, "The forge's html_url is not a plain http(s) URL.");
        *ret_url = strdup(url);
        return *ret_url ? 0 : -ENOMEM;
}

int forge_open_pull_request(const ForgeRequest *req, char **ret_url, char **ret_error) {
        _cleanup_free_ char *url = NULL, *body = NULL, *text = NULL;
        char curl_error[CURL_ERROR_SIZE] = "";
        struct curl_slist *headers = NULL;
        Reply reply = {};
        long status = 0;
        CURLcode c;
        CURL *e;
        int r;

        if (!req || !ret_url)
                return -EINVAL;
        r = forge_request_check(req, ret_error);
        if (r < 0)
                return r;

        size_t l = strlen(req->api);
        while (l > 0 && req->api[l - 1] == '/')
                l--;
        /* Names were checked: nothing in them needs escaping in a path. */
        if (asprintf(&url, "%.*s/repos/%s/%s/pulls", (int) l, req->api, req->owner, req->repo) < 0)
                return -ENOMEM;
        r = request_body(req, &body);
        if (r < 0)
                return r;
        r = request_headers(req, &headers);
        if (r < 0)
                return r;

        reply.max = req->max_reply_bytes > 0 ? req->max_reply_bytes : FORGE_REPLY_MAX;
        uint64_t timeout = req->timeout_usec > 0 ? req->timeout_usec : FORGE_DEFAULT_TIMEOUT_USEC;
        uint64_t connect_timeout = req->connect_timeout_usec > 0 ? req->connect_timeout_usec : FORGE_DEFAULT_CONNECT_TIMEOUT_USEC;

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                headers_free(headers);
                return error_set(ret_error, -EIO, "Cannot initialize libcurl.");
        }
        e = curl_easy_init();
        if (!e) {
                headers_free(headers);
                curl_global_cleanup();
                return -ENOMEM;
        }

        /* SECURITY: http and https only, and no redirects: the token and the
         * summary go to the configured API and nowhere else. NOSIGNAL: a
         * daemon with its own signal handling. */
        if (curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK ||
            curl_restrict_protocols(e) < 0 ||
            curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_error) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(body)) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_WRITEDATA, &reply) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_USERAGENT, "agentfab/" PROJECT_VERSION) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) reply.max) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long) MAX(timeout / USEC_PER_MSEC, (uint64_t) 1)) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long) MAX(connect_timeout / USEC_PER_MSEC, (uint64_t) 1)) != CURLE_OK)
                r = error_set(ret_error, -EIO, "Cannot set up the request.");
        else {
                c = curl_easy_perform(e);
                (void) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
                if (reply.overflow || c == CURLE_FILESIZE_EXCEEDED)
                        r = error_set(ret_error, -EFBIG, "The forge's reply (HTTP %ld) is larger than %zu bytes.", status, reply.max);
                else if (c != CURLE_OK)
                        r = error_set(ret_error, c == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO,
                                      "Request to the forge failed: %s", curl_error[0] ? curl_error : curl_easy_strerror(c));
                else if (status == 200 || status == 201)
                        r = parse_reply(&reply, ret_url, ret_error);
                else {
                        text = error_text(&reply, req->token);
                        r = error_set(ret_error, status_to_errno(status), "The forge answered HTTP %ld: %s", status,
                                      strempty(text));
                }
        }

        curl_easy_cleanup(e);
        headers_free(headers);
        curl_global_cleanup();
        free(reply.data);
        return r;
}
