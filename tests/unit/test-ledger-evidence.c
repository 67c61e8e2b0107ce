/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "ledger.h"
#include "tap.h"

/* The ledger's evidence: the requirement's trailers on every commit, a
 * record of a verification that changes no tree, the list of every commit
 * an audit compares with the journal, and messages that name the
 * repository the user gave (never "/proc/self/fd/N"). */

static char root[] = "/tmp/test-ledger-evidence-XXXXXX";

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "

static int run(const char *fmt, ...) _printf_(1, 2);
static int run(const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) >/dev/null 2>&1", root, cmd);
        return system(buf);
}

static char *capture(const char *fmt, ...) _printf_(1, 2);
static char *capture(const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;
        char *out = NULL;
        size_t n = 0;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) 2>/dev/null", root, cmd);
        FILE *p = popen(buf, "re");
        if (!p)
                return strdup("");
        if (getdelim(&out, &n, '\0', p) < 0) {
                free(out);
                out = strdup("");
        }
        pclose(p);
        size_t l = strlen(out);
        while (l > 0 && out[l - 1] == '\n')
                out[--l] = '\0';
        return out;
}

static int open_dir(const char *name) {
        char p[4096];
        (void) snprintf(p, sizeof(p), "%s/%s", root, name);
        (void) mkdir(p, 0700);
        return open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static const char *trailer(json_object *t, const char *key) {
        const char *v = NULL;
        return json_get_string(t, key, &v) >= 0 ? v : "";
}

static void test_no_commit_yet(void) {
        char path[4096];
        char *error = NULL;
        Ledger *l = NULL;
        int r;

        /* "agentfabctl submit --repo=." in a repository made with git init
         * and nothing committed: handed over as an fd, named by its path. */
        CHECK_INT_EQ(run(GIT "init -q empty"), 0, "empty repository made");
        (void) snprintf(path, sizeof(path), "%s/empty", root);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int task = open_dir("task-empty");
        LedgerOptions o = { .max_bytes = 1 << 20, .source_name = path };
        r = ledger_create(task, NULL, fd, NULL, "agentfab/e", &o, &error, &l);
        CHECK(r < 0 && error && strstr(error, path) && strstr(error, "has no commit yet") && !strstr(error, "file descriptor"),
              "an fd with no commit: the message names the path and says why: '%s'", strempty(error));
        free(error);
        error = NULL;

        o.source_name = NULL;
        r = ledger_create(task, NULL, fd, NULL, "agentfab/e", &o, &error, &l);
        CHECK(r < 0 && error && strstr(error, "'repository_fd'") && !strstr(error, "(file descriptor)"),
              "without a name: the spec key that passed it, not '(file descriptor)': '%s'", strempty(error));
        free(error);
        error = NULL;

        /* The bundle path (a repository agentfabd cannot read itself). */
        char tip[41];
        int b = open_dir("bundles");
        int out = openat(b, "x.bundle", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        r = ledger_bundle_repository(path, NULL, out, tip, &error);
        CHECK(r < 0 && error && strstr(error, path) && strstr(error, "has no commit yet"),
              "bundling an empty repository says it has no commit yet: '%s'", strempty(error));
        free(error);
        safe_close(out);
        safe_close(b);
        safe_close(task);
        safe_close(fd);
}

static void test_trailers_and_record(void) {
        char path[4096], c1[41], c2[41], head[41];
        char *error = NULL, *s;
        Ledger *l = NULL;
        int r;

        CHECK_INT_EQ(run(GIT "init -q src && cd src && echo one > a.txt && " GIT "add . && " GIT "commit -q -m base"), 0, "source made");
        (void) snprintf(path, sizeof(path), "%s/src", root);
        int task = open_dir("task1");
        LedgerOptions o = { .max_bytes = 1 << 24 };
        r = ledger_create(task, path, -EBADF, NULL, "agentfab/t1", &o, &error, &l);
        CHECK(r == 0 && l, "ledger made: %s", strempty(error));
        if (!l)
                return;
        int ws = ledger_workspace_fd(l);

        /* A step: the requirement's trailers on its commit. */
        CHECK(write_file_atomic(ws, "a.txt", "two\n", 4, 0644) >= 0, "workspace edited");
        Checkpoint cp = {
                .task_id = "t1", .step = 1, .subject = "Step one", .model = "default/m", .tests = "not-run",
                .test_command = "make check", .uid = 1000, .user_name = "alice",
                .reference = "PROJ-123", .requirement = 2,
        };
        r = ledger_checkpoint(l, &cp, c1, &error);
        CHECK_ERRNO(r, 1, "step committed: %s", strempty(error));
        s = capture("git --git-dir=task1/ledger.git log -1 --format=%%B %s", c1);
        _cleanup_json_ json_object *t1 = NULL;
        CHECK(ledger_parse_trailers(s, &t1) == 0 && streq(trailer(t1, "Agentfab-Ref"), "PROJ-123") &&
              streq(trailer(t1, "Agentfab-Requirement"), "v2") && streq(trailer(t1, "Agentfab-Tests"), "not-run"),
              "Agentfab-Ref: and Agentfab-Requirement: on the step's commit");
        free(s);

        /* The verification: a commit of the tip's own tree, whatever the
         * workspace holds now (what the tests left there is not evidence). */
        CHECK(write_file_atomic(ws, "build-output.o", "junk\n", 5, 0644) >= 0, "the test run left a file behind");
        char *extra[] = { (char *) "Agentfab-Reviewed-By: review/model-x", NULL };
        Checkpoint ev = cp;
        ev.step = 0;
        ev.subject = "Verified: the tests pass on this tree";
        ev.tests = "pass";
        ev.test_exit = 0;
        ev.have_test_count = true;
        ev.test_count = 12;
        ev.trailers = extra;
        r = ledger_record(l, &ev, c2, &error);
        CHECK(r == 0 && ledger_head(l, head) == 0 && streq(head, c2), "evidence recorded as the new tip: %s", strempty(error));
        s = capture("git --git-dir=task1/ledger.git rev-parse %s^{tree} %s^{tree} | uniq | wc -l", c2, c1);
        CHECK_STR_EQ(s, "1", "the evidence commit has its parent's tree");
        free(s);
        s = capture("git --git-dir=task1/ledger.git log -1 --format=%%B %s", c2);
        _cleanup_json_ json_object *t2 = NULL;
        CHECK(ledger_parse_trailers(s, &t2) == 0 && streq(trailer(t2, "Agentfab-Tests"), "pass (make check, exit 0, 12 tests)"),
              "Agentfab-Tests: pass (CMD, exit 0, N tests): '%s'", trailer(t2, "Agentfab-Tests"));
        CHECK(streq(trailer(t2, "Agentfab-Reviewed-By"), "review/model-x") && streq(trailer(t2, "Agentfab-Ref"), "PROJ-123"),
              "further trailers (the review hook) and the reference on the tip");
        CHECK(!*trailer(t2, "Agentfab-Step") && streq(trailer(t2, "Agentfab-Task"), "t1"), "a record has no Agentfab-Step: trailer");
        free(s);

        /* Further trailers are ours only: nothing that passes for git's or a forge's. */
        char *forged[] = { (char *) "Signed-off-by: Mallory <m@example.com>", NULL };
        char *nocolon[] = { (char *) "Agentfab-Reviewed-By review", NULL };
        char c3[41];
        ev.trailers = forged;
        CHECK_ERRNO(ledger_record(l, &ev, c3, &error), -EINVAL, "a trailer outside Agentfab- refused");
        free(error);
        error = NULL;
        ev.trailers = nocolon;
        CHECK_ERRNO(ledger_record(l, &ev, c3, &error), -EINVAL, "a trailer without 'Key: ' refused");
        free(error);
        error = NULL;
        CHECK(ledger_head(l, head) == 0 && streq(head, c2), "refusals left the branch alone");

        /* Every commit, also one made behind the daemon's back without trailers. */
        CHECK_INT_EQ(run("T=$(git --git-dir=task1/ledger.git rev-parse %s^{tree}) && "
                         "C=$(" GIT "--git-dir=task1/ledger.git commit-tree $T -p %s -m sneaky) && "
                         "git --git-dir=task1/ledger.git update-ref refs/heads/agentfab/t1 $C", c2, c2), 0, "a commit added by hand");
        _cleanup_json_ json_object *all = NULL, *cps = NULL;
        CHECK(ledger_commits(l, 100, &all) == 0 && json_object_array_length(all) == 3, "ledger_commits lists all three");
        CHECK(ledger_checkpoints(l, &cps) == 0 && json_object_array_length(cps) == 1, "(control) checkpoints list only the step");
        if (all && json_object_array_length(all) == 3) {
                json_object *last = json_object_array_get_idx(all, 2), *v;
                const char *subject = NULL;
                (void) json_get_string(last, "subject", &subject);
                CHECK(!json_object_object_get_ex(last, "step", &v) && streq_ptr(subject, "sneaky"),
                      "the added commit is listed, without a step");
                const char *first = NULL;
                (void) json_get_string(json_object_array_get_idx(all, 0), "commit", &first);
                CHECK(streq_ptr(first, c1), "oldest first");
        }
        _cleanup_json_ json_object *few = NULL;
        CHECK_ERRNO(ledger_commits(l, 2, &few), -E2BIG, "bounded: more than max commits is -E2BIG");

        ledger_free(l);
        safe_close(task);
}

int main(void) {
        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (system("git --version >/dev/null 2>&1") != 0) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }
        test_no_commit_yet();
        test_trailers_and_record();
        if (!getenv("TEST_KEEP"))
                (void) rm_rf_at(AT_FDCWD, root);
        git_libgit2_shutdown();
        return tap_done();
}
