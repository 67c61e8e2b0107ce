/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "tap.h"
#include "task-spec-dbus.h"

static bool is_invalid_spec(const sd_bus_error *e) {
        return sd_bus_error_has_name(e, AGENTFAB_ERROR_INVALID_SPEC);
}

/* Builds a sealed method call so that the real a{sv} reader can be tested
 * without a bus daemon: a bus object on one end of a socketpair is enough. */
static sd_bus *test_bus(void) {
        static sd_bus *bus = NULL;
        int sv[2];

        if (bus)
                return bus;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
            sd_bus_new(&bus) < 0 || sd_bus_set_fd(bus, sv[0], sv[0]) < 0 || sd_bus_start(bus) < 0)
                abort();
        return bus;
}

static int parse_message(sd_bus_message *m, TaskSpec *spec, sd_bus_error *error) {
        if (sd_bus_message_seal(m, 1, 0) < 0 || sd_bus_message_rewind(m, true) < 0)
                abort();
        return task_spec_from_message(spec, m, error);
}

static sd_bus_message *new_call(void) {
        sd_bus_message *m = NULL;
        if (sd_bus_message_new_method_call(test_bus(), &m, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH,
                                           AGENTFAB_FACTORY_INTERFACE, "SubmitTask") < 0)
                abort();
        return m;
}

static void test_strings(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec s;

        task_spec_init(&s);
        CHECK(task_spec_set_string(&s, "repository", "/srv/repo", &e) >= 0, "absolute repository accepted");
        CHECK(task_spec_set_string(&s, "goal", "Fix the bug\nin parse()", &e) >= 0, "multi-line goal accepted");
        CHECK(task_spec_set_string(&s, "test_command", "make check", &e) >= 0, "test command accepted");
        CHECK(task_spec_set_string(&s, "base", "refs/heads/main", &e) >= 0, "ref accepted as base");
        CHECK(task_spec_set_string(&s, "model", "local-qwen_2.5", &e) >= 0, "profile name accepted");
        CHECK(task_spec_validate(&s, &e) >= 0, "complete spec validates");

        /* A key given twice is ambiguous: which one did the user mean? */
        CHECK(task_spec_set_string(&s, "goal", "again", &e) < 0 && is_invalid_spec(&e), "duplicate key refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);

        /* Relative paths depend on somebody else's cwd. */
        task_spec_init(&s);
        CHECK(task_spec_set_string(&s, "repository", "repo", &e) < 0 && is_invalid_spec(&e), "relative repository refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "nonsense", "x", &e) < 0 && is_invalid_spec(&e), "unknown key refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "limits", "x", &e) < 0 && is_invalid_spec(&e), "limits as string refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "goal", "bad\033[2Jescape", &e) < 0 && is_invalid_spec(&e), "terminal escape in goal refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "base", "main\nx", &e) < 0, "newline in base refused");
        sd_bus_error_free(&e);

        static const char *bad_bases[] = { "-x", "--upload-pack=evil", "a..b", "a b", "x.lock", "/abs", "a/", "ref@{1}", "a:b", "a~1", "" };
        for (size_t i = 0; i < sizeof(bad_bases) / sizeof(bad_bases[0]); i++)
                CHECK(!task_base_is_valid(bad_bases[i]), "base '%s' refused", bad_bases[i]);
        CHECK(task_base_is_valid("HEAD") && task_base_is_valid("v1.2.3") && task_base_is_valid("0123abcd"), "plain bases accepted");
        CHECK(!task_model_is_valid("../etc") && !task_model_is_valid("") && !task_model_is_valid("-x"), "bad model names refused");

        /* Bounded lengths: a caller cannot make us store megabytes. */
        char *big = malloc(TASK_GOAL_MAX + 2);
        memset(big, 'a', TASK_GOAL_MAX + 1);
        big[TASK_GOAL_MAX + 1] = '\0';
        CHECK(task_spec_set_string(&s, "goal", big, &e) < 0 && is_invalid_spec(&e), "over-long goal refused");
        sd_bus_error_free(&e);
        big[TASK_GOAL_MAX] = '\0';
        CHECK(task_spec_set_string(&s, "goal", big, &e) >= 0, "goal of exactly the maximum accepted");
        free(big);
        task_spec_done(&s);

        /* Missing and empty goals. */
        task_spec_init(&s);
        (void) task_spec_set_string(&s, "repository", "/srv/repo", &e);
        CHECK(task_spec_validate(&s, &e) < 0 && is_invalid_spec(&e), "missing goal refused");
        sd_bus_error_free(&e);
        (void) task_spec_set_string(&s, "goal", "  \n\t ", &e);
        CHECK(task_spec_validate(&s, &e) < 0 && is_invalid_spec(&e), "whitespace-only goal refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);

        task_spec_init(&s);
        (void) task_spec_set_string(&s, "goal", "x", &e);
        CHECK(task_spec_validate(&s, &e) < 0 && is_invalid_spec(&e), "missing repository refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);
}

static void test_limits(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec s;

        task_spec_init(&s);
        CHECK(task_spec_set_limit(&s, "max_steps", 20, &e) >= 0 && s.limits[TASK_LIMIT_MAX_STEPS] == 20, "limit stored");
        CHECK(task_spec_set_limit(&s, "max_steps", 30, &e) < 0, "duplicate limit refused");
        sd_bus_error_free(&e);
        /* Limits of later releases are stored as given, with checked names. */
        CHECK(task_spec_set_limit(&s, "IOWeight", 50, &e) >= 0 && s.n_extra_limits == 1 &&
              streq(s.extra_limit_names[0], "IOWeight") && s.extra_limit_values[0] == 50, "unknown well-formed limit stored");
        CHECK(task_spec_set_limit(&s, "IOWeight", 60, &e) < 0 && is_invalid_spec(&e), "duplicate unknown limit refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_limit(&s, "../x", 1, &e) < 0 && is_invalid_spec(&e), "malformed limit name refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_limit(&s, "", 1, &e) < 0 && is_invalid_spec(&e), "empty limit name refused");
        sd_bus_error_free(&e);
        for (int i = 0; i < TASK_EXTRA_LIMITS_MAX; i++) {
                char name[32];
                snprintf(name, sizeof(name), "later_%i", i);
                (void) task_spec_set_limit(&s, name, 1, &e);
                sd_bus_error_free(&e);
        }
        CHECK_INT_EQ(s.n_extra_limits, TASK_EXTRA_LIMITS_MAX, "extra limits are bounded");
        CHECK(task_spec_set_limit(&s, "max_tokens", 0, &e) < 0, "zero limit refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_limit(&s, "cpu_quota_percent", 1000000, &e) < 0, "absurd CPU quota refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);
}

static void test_message(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m;
        TaskSpec s;

        /* The happy path, with limits given in two integer types. */
        m = new_call();
        sd_bus_message_append(m, "a{sv}", 4, "repository", "s", "/srv/r", "goal", "s", "g",
                              "test_command", "s", "make check",
                              "limits", "a{sv}", 2, "max_steps", "u", 10, "memory_max", "t", (uint64_t) 1 << 30);
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) >= 0, "well-formed spec parsed");
        CHECK(s.limits[TASK_LIMIT_MAX_STEPS] == 10 && s.limits[TASK_LIMIT_MEMORY_MAX] == (uint64_t) 1 << 30, "limits parsed");
        CHECK_STR_EQ(s.test_command, "make check", "test command parsed");
        sd_bus_message_unref(m);
        task_spec_done(&s);

        /* Submodules are asked for with a boolean, nothing else. */
        m = new_call();
        sd_bus_message_append(m, "a{sv}", 2, "goal", "s", "g", "submodules", "b", 1);
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) >= 0 && s.submodules, "submodules b true parsed");
        sd_bus_message_unref(m);
        task_spec_done(&s);
        m = new_call();
        sd_bus_message_append(m, "a{sv}", 2, "goal", "s", "g", "submodules", "s", "yes");
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e) && strstr(e.message, "type b"),
              "submodules of type s refused: %s", e.message);
        CHECK(!s.submodules, "default: no submodules");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        /* Wrong types are named in the error. */
        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "goal", "i", 42);
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e) && strstr(e.message, "type s"), "goal of type i refused: %s", e.message);
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "limits", "s", "lots");
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e), "limits of type s refused");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "limits", "a{sv}", 1, "max_steps", "i", -5);
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e), "negative limit refused");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "limits", "a{sv}", 1, "max_steps", "s", "10");
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e), "limit of type s refused");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        /* A limit nothing enforces is refused, naming the ones that are:
         * a submitter must not believe in a limit that is ignored. */
        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "limits", "a{sv}", 1, "max_cpu_time", "u", 2);
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e) && strstr(e.message, "Unknown limit 'max_cpu_time'") &&
              strstr(e.message, "max_steps") && s.n_extra_limits == 0,
              "an unknown limit is refused with the known ones: %s", e.message ?: "-");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "evil", "s", "x");
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e) && strstr(e.message, "evil"), "unknown key named in error");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        m = new_call();
        sd_bus_message_append(m, "a{sv}", 1, "weird", "as", 1, "x");
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e), "unknown key of array type refused");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);

        /* Too many keys: refused before they are all looked at. */
        m = new_call();
        sd_bus_message_open_container(m, 'a', "{sv}");
        for (int i = 0; i < 40; i++)
                sd_bus_message_append(m, "{sv}", "goal", "s", "x");
        sd_bus_message_close_container(m);
        task_spec_init(&s);
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e), "repeated keys refused");
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);
}

/* The daemon fetches a URL with its own rights and network: only https,
 * never credentials in the URL (they would be stored and logged), never a
 * local file:// that would skip the caller's access check. */
static void test_repository_urls(void) {
        static const struct { const char *url; bool ok; } cases[] = {
                { "https://git.example.org/team/project.git", true },
                { "https://localhost:8443/calc.git", true },
                { "https://git.example.org/p?x=1", true },
                { "http://git.example.org/project.git", false },
                { "file:///etc", false },
                { "git://example.org/x", false },
                { "ssh://git@example.org/x", true },
                { "ssh://example.org/team/x.git", true },
                { "ssh://git@127.0.0.1:2222/srv/x.git", true },
                { "ssh://git@[::1]:2222/x.git", true },
                { "ssh://git:pw@example.org/x", false },
                { "ssh://:pw@example.org/x", false },
                { "ssh://@example.org/x", false },
                { "ssh://a@b@example.org/x", false },
                { "ssh://example.org:/x", false },
                { "ssh://example.org:22x/x", false },
                { "ssh://example.org:1234567/x", false },
                { "ssh://example.org", false },
                { "ssh://example.org/", false },
                { "ssh:///x", false },
                { "ssh://example.org/x?y", false },
                { "ssh://exa mple.org/x", false },
                { "git@example.org:x.git", false },
                { "https://user:pw@example.org/x.git", false },
                { "https://token@example.org/x.git", false },
                { "https://example.org", false },
                { "https://example.org/", false },
                { "https:///path", false },
                { "https://exa mple.org/x", false },
                { "https://example.org/x\ny", false },
        };
        sd_bus_error e = SD_BUS_ERROR_NULL;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                CHECK_INT_EQ(task_repository_url_is_valid(cases[i].url), cases[i].ok, "URL '%s' %s", cases[i].url,
                             cases[i].ok ? "accepted" : "refused");

        TaskSpec spec;
        task_spec_init(&spec);
        CHECK(task_spec_set_string(&spec, "repository", "https://user:pw@example.org/x.git", &e) < 0 &&
              strstr(e.message, "only https://HOST/PATH without a user name or password") &&
              strstr(e.message, "or ssh://[USER@]HOST[:PORT]/PATH without a password"),
              "a spec with credentials in its URL is refused clearly");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&spec, "repository", "git@example.org:team/x.git", &e) < 0 &&
              strstr(e.message, "scp-like") && strstr(e.message, "ssh://"), "scp-like syntax is refused with the form to use");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&spec, "repository", "https://example.org/x.git", &e) >= 0, "an https URL is a repository");
        task_spec_done(&spec);
        CHECK(task_spec_set_string(&spec, "repository", "ssh://git@example.org:2222/x.git", &e) >= 0, "an ssh URL is a repository");
        task_spec_done(&spec);
}

/* Delivery keys: a push URL that could leak a secret, name a path outside
 * file:///, or a base that is not a plain branch is refused, and keys that
 * only make sense together are refused apart. */
static void test_delivery(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec s;

        task_spec_init(&s);
        (void) task_spec_set_string(&s, "repository", "/srv/repo", &e);
        (void) task_spec_set_string(&s, "goal", "x", &e);
        CHECK(task_spec_set_string(&s, "push_url", "https://gitea.example/alice/proj.git", &e) >= 0, "https push_url accepted");
        CHECK(task_spec_set_string(&s, "forge", "corp-gitea", &e) >= 0, "forge name accepted");
        CHECK(task_spec_validate(&s, &e) < 0 && is_invalid_spec(&e), "forge without forge_repository refused");
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "forge_repository", "alice/proj", &e) >= 0, "owner/repo accepted");
        CHECK(task_spec_set_string(&s, "pull_request_base", "release/2.x", &e) >= 0, "branch with a slash as base accepted");
        CHECK(task_spec_validate(&s, &e) >= 0, "complete delivery spec validates");
        task_spec_done(&s);

        static const char *bad_urls[] = {
                "http://gitea.example/a/b.git", "https://u:secret@gitea.example/a/b.git", "ssh://git@x/a.git",
                "git@gitea.example:a/b.git", "/srv/remote.git", "https://gitea.example", "file:///a/../b", "https://x/a b",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_urls); i++) {
                task_spec_init(&s);
                CHECK(task_spec_set_string(&s, "push_url", bad_urls[i], &e) < 0 && is_invalid_spec(&e), "push_url '%s' refused", bad_urls[i]);
                sd_bus_error_free(&e);
                task_spec_done(&s);
        }
        static const char *bad_bases[] = { "HEAD", "agentfab/0123456789ab", "refs/heads/main", "-x", "a b", "main@{1}", "ma\033in", "" };
        for (size_t i = 0; i < ELEMENTSOF(bad_bases); i++) {
                task_spec_init(&s);
                CHECK(task_spec_set_string(&s, "pull_request_base", bad_bases[i], &e) < 0 && is_invalid_spec(&e),
                      "pull_request_base '%s' refused", bad_bases[i]);
                sd_bus_error_free(&e);
                task_spec_done(&s);
        }
        static const char *bad_repos[] = { "alice", "alice/", "/proj", "a/b/c", "a/..", "a b/c", "a/b?c" };
        for (size_t i = 0; i < ELEMENTSOF(bad_repos); i++) {
                task_spec_init(&s);
                CHECK(task_spec_set_string(&s, "forge_repository", bad_repos[i], &e) < 0 && is_invalid_spec(&e),
                      "forge_repository '%s' refused", bad_repos[i]);
                sd_bus_error_free(&e);
                task_spec_done(&s);
        }

        /* A forge needs the branch pushed first; a repository needs a forge. */
        task_spec_init(&s);
        (void) task_spec_set_string(&s, "repository", "/srv/repo", &e);
        (void) task_spec_set_string(&s, "goal", "x", &e);
        (void) task_spec_set_string(&s, "forge", "f", &e);
        (void) task_spec_set_string(&s, "forge_repository", "a/b", &e);
        CHECK(task_spec_validate(&s, &e) < 0 && is_invalid_spec(&e), "forge without push_url refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);
        task_spec_init(&s);
        (void) task_spec_set_string(&s, "repository", "/srv/repo", &e);
        (void) task_spec_set_string(&s, "goal", "x", &e);
        (void) task_spec_set_string(&s, "push_url", "file:///srv/remote.git", &e);
        CHECK(task_spec_validate(&s, &e) >= 0, "push_url alone validates (the config decides on file://)");
        (void) task_spec_set_string(&s, "pull_request_base", "main", &e);
        CHECK(task_spec_validate(&s, &e) < 0 && is_invalid_spec(&e), "pull_request_base without forge refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);
}

/* Parses a spec whose repository_fd is fd; returns the parse's result. */
static int parse_fd(int fd, sd_bus_error *e) {
        sd_bus_message *m = new_call();
        TaskSpec s;
        int r;

        sd_bus_message_append(m, "a{sv}", 2, "goal", "s", "g", "repository_fd", "h", fd);
        task_spec_init(&s);
        r = parse_message(m, &s, e);
        sd_bus_message_unref(m);
        task_spec_done(&s);
        return r;
}

static void test_repository_fd(void) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int fd;

        /* An open directory is read through with the daemon's rights: the
         * submitter must have been able to read it, which an O_PATH fd does
         * not show (it opens a directory without read permission). */
        fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(parse_fd(fd, &e) < 0 && is_invalid_spec(&e), "an O_PATH directory refused: %s", strempty(e.message));
        sd_bus_error_free(&e);
        safe_close(fd);

        fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(parse_fd(fd, &e) >= 0, "a directory opened for reading taken: %s", strempty(e.message));
        sd_bus_error_free(&e);
        safe_close(fd);

        fd = memfd_create("bundle", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        CHECK(parse_fd(fd, &e) >= 0, "a memfd taken: %s", strempty(e.message));
        sd_bus_error_free(&e);
        safe_close(fd);

        /* A pipe could keep the import waiting in read() forever. */
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                abort();
        CHECK(parse_fd(p[0], &e) < 0 && is_invalid_spec(&e), "a pipe refused: %s", strempty(e.message));
        sd_bus_error_free(&e);
        safe_close(p[0]);
        safe_close(p[1]);
}

/* The reference becomes a trailer line of every commit and a line of the
 * pull request: one token, bounded, nothing that could start a new line
 * or pass for an option. */
static void test_reference(void) {
        static const char *const good[] = { "PROJ-123", "#42", "owner/repo#7", "https://tracker.example/browse/PROJ-9?x=1",
                                            "チケット-5" };
        static const char *const bad[] = { "", "PROJ 123", "PROJ-1\nAgentfab-Tests: pass", "a\tb", "-rf", "x\x7f",
                                           "\x1b[31mred" };
        char long_ref[TASK_REFERENCE_MAX + 2];

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                TaskSpec s;

                task_spec_init(&s);
                CHECK(task_spec_set_string(&s, "reference", good[i], &e) >= 0 && streq_ptr(s.reference, good[i]),
                      "reference '%s' accepted", good[i]);
                sd_bus_error_free(&e);
                task_spec_done(&s);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                TaskSpec s;

                task_spec_init(&s);
                CHECK(task_spec_set_string(&s, "reference", bad[i], &e) < 0 && is_invalid_spec(&e) && !s.reference,
                      "reference #%zu refused: %s", i, strempty(e.message));
                sd_bus_error_free(&e);
                task_spec_done(&s);
        }

        memset(long_ref, 'x', sizeof(long_ref) - 1);
        long_ref[sizeof(long_ref) - 1] = '\0';
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec s;
        task_spec_init(&s);
        CHECK(task_spec_set_string(&s, "reference", long_ref, &e) < 0 && is_invalid_spec(&e), "a reference of %zu bytes refused",
              strlen(long_ref));
        sd_bus_error_free(&e);
        long_ref[TASK_REFERENCE_MAX] = '\0';
        CHECK(task_spec_set_string(&s, "reference", long_ref, &e) >= 0, "a reference of %u bytes accepted", TASK_REFERENCE_MAX);
        sd_bus_error_free(&e);
        CHECK(task_spec_set_string(&s, "reference", "PROJ-2", &e) < 0, "reference given twice refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);

        /* Through the bus reader: a string key like the others. */
        sd_bus_message *m = new_call();
        task_spec_init(&s);
        if (sd_bus_message_append(m, "a{sv}", 3, "repository", "s", "/srv/r", "goal", "s", "g", "reference", "u", 5) < 0)
                abort();
        CHECK(parse_message(m, &s, &e) < 0 && is_invalid_spec(&e), "reference of type u refused: %s", strempty(e.message));
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        task_spec_done(&s);
}

int main(void) {
        test_strings();
        test_reference();
        test_repository_fd();
        test_repository_urls();
        test_delivery();
        test_limits();
        test_message();
        return tap_done();
}
