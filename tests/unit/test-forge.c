/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forge.h"
#include "fs-util.h"
#include "json-util.h"
#include "string-util.h"
#include "tap.h"

/* Drives forge_open_pull_request() against tests/forge-server.py on
 * loopback: the request must have the shape each forge expects (the token
 * in the header that forge reads, nowhere else), and every way a forge can
 * fail must end in a clear error, never in a hang or an unbounded reply. */

static char tmpdir[] = "/tmp/test-forge-XXXXXX";
static char log_path[256];
static pid_t server_pid = 0;
static unsigned server_port = 0;
static char api[128];

#define TOKEN "tok-test-0123456789abcdef"

static int server_start(void) {
        int fds[2];
        FILE *f;

        snprintf(log_path, sizeof(log_path), "%s/requests.jsonl", tmpdir);
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        server_pid = fork();
        if (server_pid < 0)
                return -errno;
        if (server_pid == 0) {
                dup2(fds[1], STDOUT_FILENO);
                execl(PYTHON3, PYTHON3, FORGE_SERVER_PY, "--log", log_path, (char *) NULL);
                _exit(127);
        }
        close(fds[1]);
        f = fdopen(fds[0], "re");
        if (!f)
                return -errno;
        if (fscanf(f, "%u", &server_port) != 1) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        snprintf(api, sizeof(api), "http://127.0.0.1:%u/api/v1/", server_port);
        return 0;
}

static void server_stop(void) {
        if (server_pid > 0) {
                kill(server_pid, SIGTERM);
                waitpid(server_pid, NULL, 0);
                server_pid = 0;
        }
}

/* The last request the server logged, or NULL. */
static json_object *last_request(void) {
        _cleanup_free_ char *text = NULL;
        char *last = NULL;
        json_object *o = NULL;

        if (read_file_at(AT_FDCWD, log_path, 64 * 1024 * 1024, &text, NULL) < 0)
                return NULL;
        for (char *next = text, *l; (l = strsep(&next, "\n"));)
                if (l[0] != '\0')
                        last = l;
        if (last)
                (void) json_parse_strict(last, strlen(last), &o);
        return o;
}

static const char *get_path(json_object *o, const char *a, const char *b) {
        json_object *x, *y;
        if (!o || !json_object_object_get_ex(o, a, &x))
                return NULL;
        if (!b)
                return json_object_get_string(x);
        if (!json_object_object_get_ex(x, b, &y) || !json_object_is_type(y, json_type_string))
                return NULL;
        return json_object_get_string(y);
}

static ForgeRequest request(ForgeKind kind, const char *repo) {
        return (ForgeRequest) {
                .kind = kind,
                .api = api,
                .token = TOKEN,
                .owner = "alice",
                .repo = repo,
                .head = "agentfab/0123456789ab",
                .base = "main",
                .title = "Make add() add",
                .body = "# agentfab task\n\nA \"summary\" with\nlines and ünïcode.\n",
                .timeout_usec = 10 * USEC_PER_SEC,
        };
}

/* Gitea's shape: "Authorization: token T", the JSON fields it reads. */
static void test_gitea(void) {
        _cleanup_free_ char *url = NULL, *error = NULL;
        _cleanup_json_ json_object *req = NULL;
        ForgeRequest r = request(FORGE_KIND_GITEA, "proj");
        char want[256];
        int k;

        k = forge_open_pull_request(&r, &url, &error);
        CHECK_ERRNO(k, 0, "gitea: pull request opened (%d: %s)", k, strempty(error));
        snprintf(want, sizeof(want), "http://127.0.0.1:%u/alice/proj/pulls/", server_port);
        CHECK(url && strneq(url, want, strlen(want)), "gitea: html_url returned: %s", strempty(url));

        req = last_request();
        CHECK(streq_ptr(get_path(req, "method", NULL), "POST"), "gitea: method POST");
        CHECK(streq_ptr(get_path(req, "path", NULL), "/api/v1/repos/alice/proj/pulls"),
              "gitea: path {api}/repos/OWNER/REPO/pulls, trailing slash of the API folded: %s", strempty(get_path(req, "path", NULL)));
        CHECK(streq_ptr(get_path(req, "headers", "authorization"), "token " TOKEN), "gitea: Authorization: token T");
        CHECK(streq_ptr(get_path(req, "headers", "content-type"), "application/json"), "gitea: JSON content type");
        CHECK(!get_path(req, "headers", "x-github-api-version"), "gitea: no GitHub header");
        CHECK(strneq(strempty(get_path(req, "headers", "user-agent")), "agentfab/", 9), "gitea: User-Agent agentfab/");
        CHECK(streq_ptr(get_path(req, "body", "title"), r.title), "gitea: title");
        CHECK(streq_ptr(get_path(req, "body", "body"), r.body), "gitea: body kept exactly (quotes, newlines, UTF-8)");
        CHECK(streq_ptr(get_path(req, "body", "head"), r.head), "gitea: head");
        CHECK(streq_ptr(get_path(req, "body", "base"), "main"), "gitea: base");
}

/* GitHub's shape: Bearer, its media type and API version, a User-Agent
 * (GitHub refuses requests without one). */
static void test_github(void) {
        _cleanup_free_ char *url = NULL, *error = NULL;
        _cleanup_json_ json_object *req = NULL;
        ForgeRequest r = request(FORGE_KIND_GITHUB, "proj.js");
        int k;

        snprintf(api, sizeof(api), "http://127.0.0.1:%u", server_port);
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == 0 && url, "github: pull request opened (%d: %s)", k, strempty(error));
        req = last_request();
        CHECK(streq_ptr(get_path(req, "path", NULL), "/repos/alice/proj.js/pulls"), "github: path");
        CHECK(streq_ptr(get_path(req, "headers", "authorization"), "Bearer " TOKEN), "github: Authorization: Bearer T");
        CHECK(streq_ptr(get_path(req, "headers", "accept"), "application/vnd.github+json"), "github: Accept header");
        CHECK(streq_ptr(get_path(req, "headers", "x-github-api-version"), "2022-11-28"), "github: X-GitHub-Api-Version");
        CHECK(!isempty(get_path(req, "headers", "user-agent")), "github: a User-Agent");
        CHECK(streq_ptr(get_path(req, "body", "head"), "agentfab/0123456789ab") &&
              streq_ptr(get_path(req, "body", "base"), "main"), "github: head and base");
        snprintf(api, sizeof(api), "http://127.0.0.1:%u/api/v1/", server_port);
}

/* No token configured: no Authorization header at all, not an empty one. */
static void test_no_token(void) {
        _cleanup_free_ char *url = NULL, *error = NULL;
        _cleanup_json_ json_object *req = NULL;
        ForgeRequest r = request(FORGE_KIND_GITEA, "proj");

        r.token = NULL;
        CHECK_ERRNO(forge_open_pull_request(&r, &url, &error), 0, "no token: works");
        req = last_request();
        CHECK(!get_path(req, "headers", "authorization"), "no token: no Authorization header");
}

/* A 422 (GitHub: "already exists") must be a readable one-line error with
 * the status and the forge's words, control characters made harmless. */
static void test_errors(void) {
        _cleanup_free_ char *url = NULL, *error = NULL;
        ForgeRequest r = request(FORGE_KIND_GITHUB, "exists");
        int k;

        k = forge_open_pull_request(&r, &url, &error);
        CHECK_ERRNO(k, -EEXIST, "422: -EEXIST (%d)", k);
        CHECK(!url, "422: no URL");
        CHECK(error && strstr(error, "HTTP 422") && strstr(error, "Validation Failed") &&
              strstr(error, "already exists"), "422: status and message: %s", strempty(error));
        CHECK(error && string_is_safe(error, false), "422: no control characters in the error");

        /* A forge that echoes the token must not make us repeat it. */
        error = mfree_ptr(error);
        r = request(FORGE_KIND_GITEA, "unauthorized");
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EACCES && error && strstr(error, "HTTP 401"), "401: -EACCES: %s", strempty(error));
        CHECK(error && !strstr(error, TOKEN), "401: the echoed token is not in the error");

        error = mfree_ptr(error);
        r = request(FORGE_KIND_GITEA, "garbage");
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EPROTO && error, "201 without JSON: -EPROTO: %s", strempty(error));

        /* SECURITY: no redirects, so the token goes nowhere else. */
        error = mfree_ptr(error);
        r = request(FORGE_KIND_GITEA, "redirect");
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EIO && error && strstr(error, "HTTP 302"), "302 is not followed: %s", strempty(error));
}

/* A reply far over the bound stops the transfer: with a Content-Length
 * (refused before reading) and without (cut while reading). */
static void test_oversized(void) {
        _cleanup_free_ char *url = NULL, *error = NULL;
        ForgeRequest r = request(FORGE_KIND_GITEA, "huge");
        int k;

        r.max_reply_bytes = 64 * 1024;
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EFBIG && !url, "huge reply with Content-Length: -EFBIG (%d: %s)", k, strempty(error));
        error = mfree_ptr(error);
        r.repo = "huge-unsized";
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EFBIG && !url, "huge reply without Content-Length: -EFBIG (%d: %s)", k, strempty(error));
        error = mfree_ptr(error);
        r.max_reply_bytes = 0;       /* the default bound applies as well */
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EFBIG && !url, "huge reply, default bound: -EFBIG (%d)", k);
}

/* What is refused before any connection: each would propose or address
 * something the factory must not. */
static void test_refused(void) {
        ForgeRequest r;
        char *url = NULL, *error = NULL;
        unsigned before = 0, after = 0;
        _cleanup_free_ char *text = NULL;

        if (read_file_at(AT_FDCWD, log_path, 64 * 1024 * 1024, &text, NULL) >= 0)
                for (char *c = text; *c; c++)
                        before += *c == '\n';

#define REFUSED(what, ...) do {                                                 \
                r = request(FORGE_KIND_GITEA, "proj");                          \
                __VA_ARGS__;                                                    \
                int _k = forge_open_pull_request(&r, &url, &error);             \
                CHECK(_k == -EINVAL && !url && error, "refused: %s (%s)", what, strempty(error)); \
                error = mfree_ptr(error);                                       \
        } while (0)

        REFUSED("head outside agentfab/", r.head = "feature/x");
        REFUSED("head 'agentfab/' alone", r.head = "agentfab/");
        REFUSED("base equal to head", r.base = r.head);
        REFUSED("owner with a slash", r.owner = "al/ice");
        REFUSED("owner '..'", r.owner = "..");
        REFUSED("repository with a space", r.repo = "my repo");
        REFUSED("repository with '?'", r.repo = "x?y=1");
        REFUSED("empty repository", r.repo = "");
        REFUSED("base with a space", r.base = "ma in");
        REFUSED("base like an option", r.base = "--force");
        REFUSED("API not http(s)", r.api = "file:///etc/passwd");
        REFUSED("API with user information", r.api = "https://user:pw@gitea.example/api/v1");
        REFUSED("API with a query", r.api = "https://gitea.example/api/v1?x=1");
        REFUSED("token with a newline", r.token = "abc\r\nX-Evil: 1");
        REFUSED("empty title", r.title = "");

        text = mfree_ptr(text);
        if (read_file_at(AT_FDCWD, log_path, 64 * 1024 * 1024, &text, NULL) >= 0)
                for (char *c = text; *c; c++)
                        after += *c == '\n';
        CHECK_INT_EQ(before, after, "nothing refused reached the server (%u, %u)", before, after);
}

/* Nothing listens: a clear transport error, quickly. */
static void test_unreachable(void) {
        _cleanup_free_ char *url = NULL, *error = NULL;
        ForgeRequest r = request(FORGE_KIND_GITEA, "proj");
        int k;

        r.api = "http://127.0.0.1:1/api/v1";
        k = forge_open_pull_request(&r, &url, &error);
        CHECK(k == -EIO && error && strstr(error, "failed"), "unreachable forge: -EIO: %s", strempty(error));
}

static void test_names(void) {
        _cleanup_free_ char *owner = NULL, *repo = NULL;

        CHECK(forge_repository_split("my-org/my_repo.git", &owner, &repo) == 0 &&
              streq(owner, "my-org") && streq(repo, "my_repo.git"), "owner/repo split");
        CHECK(!forge_repository_is_valid("a/b/c"), "a/b/c refused");
        CHECK(!forge_repository_is_valid("/b"), "/b refused");
        CHECK(!forge_repository_is_valid("a/"), "a/ refused");
        CHECK(!forge_repository_is_valid("ab"), "no slash refused");
        CHECK(forge_kind_from_string("gitea") == FORGE_KIND_GITEA && forge_kind_from_string("forgejo") == FORGE_KIND_GITEA &&
              forge_kind_from_string("github") == FORGE_KIND_GITHUB && forge_kind_from_string("gitlab") < 0, "kinds");
        CHECK(forge_api_is_valid("https://api.github.com") && forge_api_is_valid("https://gitea.example/api/v1"),
              "API URLs accepted");
}

/* Push URLs: what would leak a secret or reach outside the forge is refused,
 * and the token only goes with a push to the forge's own host. */
static void test_push_urls(void) {
        CHECK(forge_push_url_is_valid("https://gitea.example/alice/proj.git", false), "https push URL");
        CHECK(!forge_push_url_is_valid("https://alice:pw@gitea.example/alice/proj.git", false), "user information refused");
        CHECK(!forge_push_url_is_valid("https://gitea.example", false), "no path refused");
        CHECK(!forge_push_url_is_valid("http://gitea.example/a/b.git", true), "plain http refused");
        CHECK(!forge_push_url_is_valid("ssh://git@gitea.example/a/b.git", true), "ssh refused");
        CHECK(!forge_push_url_is_valid("https://gitea.example/a b.git", false), "space refused");
        CHECK(!forge_push_url_is_valid("file:///srv/remote.git", false), "file:// refused unless allowed");
        CHECK(forge_push_url_is_valid("file:///srv/remote.git", true), "file:// when allowed");
        CHECK(!forge_push_url_is_valid("file:///srv/../var/lib/agentfab/x.git", true), "file:// with .. refused");
        CHECK(!forge_push_url_is_valid("/srv/remote.git", true), "a bare path refused");
        CHECK(!forge_push_url_is_valid("file:///srv/remote.git/..", true), "file:// ending in .. refused");
        CHECK(!forge_push_url_is_valid("file:///srv/%2e%2e/var/lib/agentfab/x.git", true), "file:// with %%-escapes refused");

        CHECK(forge_push_url_matches_api("https://gitea.example/api/v1", "https://gitea.example/alice/proj.git"),
              "token goes to the API's own host");
        CHECK(forge_push_url_matches_api("https://api.github.com", "https://github.com/alice/proj.git"),
              "token goes to github.com for api.github.com");
        CHECK(forge_push_url_matches_api("https://GHE.example/api/v3", "https://ghe.example/alice/proj.git"),
              "host names compared without case");
        CHECK(!forge_push_url_matches_api("https://gitea.example/api/v1", "https://evil.example/alice/proj.git"),
              "token never goes to another host");
        CHECK(!forge_push_url_matches_api("https://gitea.example/api/v1", "https://gitea.example:8443/a/b.git"),
              "nor to another port");
        CHECK(!forge_push_url_matches_api("https://gitea.example/api/v1", "https://gitea.example.evil.example/a/b.git"),
              "nor to a host that only starts like it");
        CHECK(!forge_push_url_matches_api("https://gitea.example/api/v1", "file:///srv/remote.git"),
              "nor with a file:// push");
}

int main(void) {
        if (!mkdtemp(tmpdir)) {
                printf("Bail out! mkdtemp: %m\n");
                return 1;
        }
        if (server_start() < 0) {
                printf("Bail out! cannot start %s\n", FORGE_SERVER_PY);
                return 1;
        }

        test_names();
        test_push_urls();
        test_gitea();
        test_github();
        test_no_token();
        test_errors();
        test_oversized();
        test_refused();
        test_unreachable();

        server_stop();
        (void) rm_rf_at(AT_FDCWD, tmpdir);
        return tap_done();
}
