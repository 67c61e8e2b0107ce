/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "ledger.h"
#include "string-util.h"
#include "tap.h"

static char root[] = "/tmp/test-ledger-XXXXXX";

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

/* Output of a shell command run in root, trailing newline removed. */
static char *capture(const char *fmt, ...) _printf_(1, 2);
static char *capture(const char *fmt, ...) {
        char cmd[4096], buf[4300];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, sizeof(buf), "cd '%s' && (%s) 2>/dev/null", root, cmd);

        FILE *f = popen(buf, "r");
        if (!f)
                return strdup("");
        char *out = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&out, &n);
        char chunk[4096];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, k, m);
        pclose(f);
        fclose(m);
        while (n > 0 && out[n - 1] == '\n')
                out[--n] = '\0';
        return out;
}

/* Everything about a tree that a write could change: names, types, modes,
 * sizes, mtimes, link targets and content hashes. */
static char *snapshot(const char *dir) {
        return capture("cd '%s' && find . -printf '%%p %%y %%m %%s %%T@ %%l\\n' | LC_ALL=C sort && "
                       "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum", dir);
}

static bool exists(const char *fmt, ...) _printf_(1, 2);
static bool exists(const char *fmt, ...) {
        char path[4096], full[4300];
        struct stat st;
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(path, sizeof(path), fmt, ap);
        va_end(ap);
        (void) snprintf(full, sizeof(full), "%s/%s", root, path);
        return lstat(full, &st) >= 0;
}

static int open_dir(const char *name) {
        char path[4096];
        (void) snprintf(path, sizeof(path), "%s/%s", root, name);
        (void) mkdir(path, 0755);
        return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int write_at(int dir_fd, const char *name, const char *text) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        return write(fd, text, strlen(text)) == (ssize_t) strlen(text) ? 0 : -EIO;
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

#define GIT "git -c user.name=t -c user.email=t@t -c init.defaultBranch=main -c protocol.file.allow=always "

/* A source repository with everything that would be dangerous if the ledger
 * treated it as git does: hooks, a smudge filter, a submodule, symlinks out
 * of the tree, and uncommitted work of its owner. */
static int make_source(void) {
        return run(GIT "init -q other && cd other && echo sub > s && " GIT "add s && " GIT "commit -q -m sub") != 0 ||
               run(GIT "init -q src && cd src && mkdir dir && echo one > a.txt && echo two > dir/b.txt && "
                   "ln -s /etc/passwd evil && ln -s ../../x escape && printf '* filter=evil\\n' > .gitattributes && "
                   GIT "add . && " GIT "-c protocol.file.allow=always submodule add -q ../other sub && " GIT "commit -q -m base && "
                   "echo dirty >> a.txt && echo staged > staged.txt && git add staged.txt && echo untracked > untracked.txt && "
                   "git config filter.evil.smudge 'touch %s/marker-smudge' && git config filter.evil.clean 'touch %s/marker-clean' && "
                   "git config filter.evil.required true && git config core.hooksPath .git/hooks && "
                   "for h in post-checkout pre-commit post-commit post-merge reference-transaction post-index-change pre-push; do "
                   "printf '#!/bin/sh\\ntouch %s/marker-hook-%%s\\n' $h > .git/hooks/$h; chmod +x .git/hooks/$h; done",
                   root, root, root) != 0;
}

static bool no_markers(void) {
        return !exists("marker-smudge") && !exists("marker-clean") &&
               !exists("marker-hook-post-checkout") && !exists("marker-hook-pre-commit") && !exists("marker-hook-post-commit") &&
               !exists("marker-hook-reference-transaction") && !exists("marker-hook-post-index-change") &&
               !exists("marker-hook-pre-push");
}

static Checkpoint checkpoint_of(unsigned step, const char *subject, char **commands) {
        return (Checkpoint) {
                .task_id = "t1",
                .step = step,
                .subject = subject,
                .body = "What the step did.",
                .model = "default/test-model",
                .commands = commands,
                .tests = "pass",
                .test_command = "make check",
                .test_exit = 0,
                .uid = 1000,
                .user_name = "alice",
        };
}

/* ledger_publish(), ledger_adopt() and ledger_open_published(): a fleet's
 * checkpoints through its Remote=, here a file:// one, and an ssh:// one
 * refused before any connection when there are no known hosts to check
 * the server against (SECURITY: the host key of Remote= is always checked). */
static void test_publish(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL, *taken = NULL, *view = NULL;
        LedgerOptions o = { .max_bytes = 64 * 1024 * 1024 };
        char path[4096], url[4200], c1[41], head[41];
        char *error = NULL, *got;
        int r;

        if (run(GIT "init -q pub-src && cd pub-src && echo one > a.txt && " GIT "add a.txt && " GIT "commit -q -m base") != 0 ||
            run("git init -q --bare fleet.git") != 0) {
                SKIP("git cannot make the fleet's repositories");
                return;
        }
        (void) snprintf(path, sizeof(path), "%s/pub-src", root);
        (void) snprintf(url, sizeof(url), "file://%s/fleet.git", root);

        /* The host that works on the task: one step, published under the
         * task's epoch with its base, as fleet-ack.c does. */
        _cleanup_close_ int pub1 = open_dir("pub1");
        r = ledger_create(pub1, path, -EBADF, NULL, "agentfab/t1", &o, &error, &l);
        CHECK(r == 0 && l, "ledger made: %d %s", r, strempty(error));
        if (!l)
                return;
        CHECK_INT_EQ(run("echo two > pub1/workspace/b.txt"), 0, "the step changes the workspace");
        Checkpoint cp = { .task_id = "t1", .step = 1, .subject = "Step 1", .tests = "not-run", .uid = 1000, .user_name = "alice" };
        r = ledger_checkpoint(l, &cp, c1, &error);
        CHECK(r == 1, "checkpoint of step 1 commits (1): %d %s", r, strempty(error));

        /* A file:// Remote= goes without any ssh setting, as before. */
        r = ledger_publish(l, url, NULL, c1, "refs/agentfab/t1/1", "refs/agentfab/t1/base", &error);
        CHECK(r == 0, "published to a file:// Remote=: %d %s", r, strempty(error));
        got = capture("git --git-dir=fleet.git rev-parse refs/agentfab/t1/1");
        CHECK_STR_EQ(got, c1, "Remote= has the checkpoint under the task's epoch");
        free(got);
        got = capture("git --git-dir=fleet.git rev-parse refs/agentfab/t1/base");
        CHECK(strlen(got) == 40, "and its base: '%s'", got);
        free(got);

        /* SECURITY: an ssh:// Remote= without known hosts is refused
         * before any connection (a connection to port 1 would fail with
         * another error), whether or not a key is given, for every way
         * the fleet reaches it, with the reason in the error. */
        static const char ssh_url[] = "ssh://git@127.0.0.1:1/srv/fleet.git";
        LedgerOptions key_only = { .ssh_key = "not a key", .ssh_key_setting = "[Fleet] RemoteSSHKeyCredential=" };
        const LedgerOptions *refusing[] = { NULL, &key_only };
        for (size_t i = 0; i < ELEMENTSOF(refusing); i++) {
                error = mfree_ptr(error);
                r = ledger_publish(l, ssh_url, refusing[i], c1, "refs/agentfab/t1/1", NULL, &error);
                CHECK(r == -EPERM && error && strstr(error, "known hosts") && strstr(error, "SSHKnownHostsCredential="),
                      "publish to ssh:// without known hosts refused (%s): %d %s", i == 0 ? "no options" : "a key only", r,
                      strempty(error));
                error = mfree_ptr(error);
                r = ledger_adopt(l, ssh_url, refusing[i], "refs/agentfab/t1", c1, &error);
                CHECK(r == -EPERM && error && strstr(error, "known hosts"),
                      "takeover fetch from ssh:// without known hosts refused: %d %s", r, strempty(error));
                error = mfree_ptr(error);
                _cleanup_close_ int dir = open_dir(i == 0 ? "pub-refused-0" : "pub-refused-1");
                r = ledger_open_published(dir, ssh_url, refusing[i], "refs/agentfab/t1", "refs/agentfab/t1/1", "agentfab/t1",
                                          &view, &error);
                CHECK(r == -EPERM && error && strstr(error, "known hosts") && !view,
                      "export fetch from ssh:// without known hosts refused: %d %s", r, strempty(error));
        }
        /* With known hosts the connection is tried: the error is then the
         * connection's, not the refusal's. */
        LedgerOptions with_hosts = { .ssh_known_hosts = "127.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+y1tSnxkSJrK8YEeYfKX\n" };
        error = mfree_ptr(error);
        r = ledger_publish(l, ssh_url, &with_hosts, c1, "refs/agentfab/t1/1", NULL, &error);
        CHECK(r < 0 && r != -EPERM && error && strstr(error, "Cannot publish to 'ssh://git@127.0.0.1:1/srv/fleet.git'"),
              "with known hosts, an ssh:// Remote= is connected to (port 1: refused): %d %s", r, strempty(error));
        got = capture("git --git-dir=fleet.git rev-parse refs/agentfab/t1/1");
        CHECK_STR_EQ(got, c1, "nothing of the refused pushes changed Remote=");
        free(got);

        /* Another host takes the task over from Remote=: its branch is the
         * published checkpoint. */
        error = mfree_ptr(error);
        _cleanup_close_ int pub2 = open_dir("pub2");
        r = ledger_create(pub2, path, -EBADF, NULL, "agentfab/t1", &o, &error, &taken);
        if (r >= 0)
                r = ledger_adopt(taken, url, NULL, "refs/agentfab/t1", c1, &error);
        CHECK(r == 0 && taken && ledger_head(taken, head) == 0 && streq(head, c1),
              "taken over from a file:// Remote= at the checkpoint: %d %s", r, strempty(error));

        /* A third host shows the task's branch from Remote=. */
        error = mfree_ptr(error);
        _cleanup_close_ int pub3 = open_dir("pub3");
        r = ledger_open_published(pub3, url, NULL, "refs/agentfab/t1", "refs/agentfab/t1/1", "agentfab/t1", &view, &error);
        CHECK(r == 0 && view && ledger_head(view, head) == 0 && streq(head, c1),
              "the branch read from a file:// Remote=: %d %s", r, strempty(error));

        free(error);
}

int main(void) {
        _cleanup_(ledger_freep) Ledger *l = NULL;
        char base[41], head[41], c1[41], c2[41], path[4096];
        char *error = NULL;
        double t;
        int r;

        if (!mkdtemp(root) || chmod(root, 0755) < 0)
                return 1;
        if (make_source()) {
                printf("1..0 # SKIP git not available\n");
                return 0;
        }
        /* The fixture itself must not have tripped a marker. */
        if (!no_markers()) {
                printf("Bail out! fixture ran a hook\n");
                return 1;
        }
        test_publish();
        char *before = snapshot("src");

        /* Creation from a path: the workspace is a plain copy of base, and
         * nothing of the source's configuration takes effect. */
        _cleanup_close_ int task = open_dir("task1");
        LedgerOptions o = { .max_bytes = 64 * 1024 * 1024, .submodules = false };
        (void) snprintf(path, sizeof(path), "%s/src", root);
        t = now_ms();
        r = ledger_create(task, path, -EBADF, NULL, "agentfab/t1", &o, &error, &l);
        printf("# ledger_create took %.1f ms\n", now_ms() - t);
        CHECK(r == 0 && l, "create from a local path: %d %s", r, strempty(error));
        if (!l)
                return tap_done();
        char *after = snapshot("src");
        CHECK_STR_EQ(before, after, "source repository byte-for-byte unchanged (files, modes, mtimes, hashes)");
        CHECK(no_markers(), "no hook and no filter of the source ran");
        CHECK(exists("task1/ledger.git/HEAD") && exists("task1/workspace/a.txt") && !exists("task1/workspace/.git"),
              "bare ledger and workspace without .git");
        char *s = capture("cat task1/workspace/a.txt");
        CHECK_STR_EQ(s, "one", "workspace holds base, not the owner's uncommitted work: '%s'", s);
        free(s);
        CHECK(!exists("task1/workspace/staged.txt") && !exists("task1/workspace/untracked.txt"), "staged and untracked files of the source not copied");
        s = capture("readlink task1/workspace/evil");
        CHECK(streq(s, "/etc/passwd") && !exists("task1/workspace/etc"), "symlink out of the tree checked out as a symlink: '%s'", s);
        free(s);
        s = capture("readlink task1/workspace/escape");
        CHECK_STR_EQ(s, "../../x", "relative escaping symlink checked out as a symlink");
        free(s);
        s = capture("ls -A task1/workspace/sub | wc -l");
        CHECK(exists("task1/workspace/sub") && streq(s, "0"), "submodule not fetched: its directory is empty (%s entries)", s);
        free(s);
        CHECK(ledger_base(l, base) == 0 && ledger_head(l, head) == 0 && streq(base, head), "branch starts at base");
        s = capture("git -C src rev-parse HEAD");
        CHECK_STR_EQ(s, base, "base is the source's HEAD commit");
        free(s);
        s = capture("git --git-dir=task1/ledger.git rev-parse refs/heads/agentfab/t1");
        CHECK_STR_EQ(s, base, "branch agentfab/t1 exists in the ledger");
        free(s);
        Checkpoint none = { .task_id = "t1", .subject = "Nothing yet" };
        CHECK_ERRNO(ledger_checkpoint(l, &none, c1, &error), 0, "fresh workspace has nothing to commit: %s", strempty(error));
        CHECK_ERRNO(ledger_create(task, path, -EBADF, NULL, "agentfab/t1", &o, &error, &(Ledger *) { NULL }), -EEXIST,
                    "a second create in the same task directory refused");

        /* Checkpoint: additions, modifications, deletions and a new symlink
         * all recorded; the trailers parse back exactly. */
        int ws = ledger_workspace_fd(l);
        CHECK(write_at(ws, "a.txt", "one\nchanged\n") == 0 && write_at(ws, "c.txt", "new\n") == 0 &&
              unlinkat(ws, "dir/b.txt", 0) == 0 && symlinkat("/etc/shadow", ws, "evil2") == 0, "workspace edited");
        char *commands[] = { (char *) "make", (char *) "make check\nrm -rf /", NULL };
        Checkpoint cp = checkpoint_of(1, "Add c.txt\nand more", commands);
        t = now_ms();
        r = ledger_checkpoint(l, &cp, c1, &error);
        printf("# ledger_checkpoint took %.1f ms\n", now_ms() - t);
        CHECK_ERRNO(r, 1, "checkpoint committed: %d %s", r, strempty(error));
        CHECK(ledger_head(l, head) == 0 && streq(head, c1), "branch tip is the new commit");
        s = capture("git --git-dir=task1/ledger.git log -1 --format=%%B %s", c1);
        _cleanup_json_ json_object *tr = NULL;
        CHECK_ERRNO(ledger_parse_trailers(s, &tr), 0, "trailers parsed");
        const char *v = "";
        CHECK(json_get_string(tr, "Agentfab-Task", &v) == 0 && streq(v, "t1"), "Agentfab-Task");
        CHECK(json_get_string(tr, "Agentfab-Step", &v) == 0 && streq(v, "1"), "Agentfab-Step");
        CHECK(json_get_string(tr, "Agentfab-Model", &v) == 0 && streq(v, "default/test-model"), "Agentfab-Model");
        CHECK(json_get_string(tr, "Agentfab-Tests", &v) == 0 && streq(v, "pass (make check, exit 0)"), "Agentfab-Tests: '%s'", strempty(v));
        CHECK(json_get_string(tr, "Agentfab-Submitter", &v) == 0 && streq(v, "alice (uid 1000)"), "Agentfab-Submitter");
        json_object *cmds = NULL;
        CHECK(json_object_object_get_ex(tr, "Agentfab-Command", &cmds) && json_object_is_type(cmds, json_type_array) &&
              json_object_array_length(cmds) == 2 &&
              streq(json_object_get_string(json_object_array_get_idx(cmds, 1)), "make check rm -rf /"),
              "one Agentfab-Command trailer per command, each on one line");
        CHECK(strneq(s, "Add c.txt and more\n\nWhat the step did.\n\n", 40), "subject on one line, then the body");
        free(s);
        s = capture("git --git-dir=task1/ledger.git log -1 --format='%%an <%%ae>|%%cn <%%ce>' %s", c1);
        CHECK(strneq(s, "agentfab <agentfab@", 19) && strstr(s, "|agentfab <agentfab@"), "author and committer agentfab: %s", s);
        free(s);
        s = capture("git --git-dir=task1/ledger.git ls-tree -r %s --name-only | tr '\\n' ' '", c1);
        CHECK(strstr(s, "c.txt") && !strstr(s, "dir/b.txt") && strstr(s, "a.txt"), "addition and deletion recorded: %s", s);
        free(s);
        s = capture("git --git-dir=task1/ledger.git ls-tree %s evil2 | cut -c1-6 && git --git-dir=task1/ledger.git cat-file -p %s:evil2", c1, c1);
        CHECK_STR_EQ(s, "120000\n/etc/shadow", "new symlink stored as a symlink (mode 120000, target /etc/shadow), never followed");
        free(s);
        s = capture("git --git-dir=task1/ledger.git cat-file -p %s:evil", c1);
        CHECK_STR_EQ(s, "/etc/passwd", "checked-out symlink still a symlink after commit");
        free(s);
        CHECK(no_markers(), "no hook ran on checkpoint");

        /* Nothing changed: no empty commits pile up in the history. */
        cp = checkpoint_of(2, "Nothing", NULL);
        CHECK(ledger_checkpoint(l, &cp, c2, &error) == 0 && ledger_head(l, head) == 0 && streq(head, c1),
              "unchanged workspace: returns 0, no commit");

        /* A body can not forge the trailers: they are the last paragraph. */
        CHECK_ERRNO(write_at(ws, "d.txt", "d\n"), 0, "d.txt written");
        cp = checkpoint_of(2, "Second step with a very long subject line that goes on and on and on and on past the bound", NULL);
        cp.body = "Agentfab-Step: 99\n\nAgentfab-Step: 98";
        cp.tests = "not-run";
        CHECK_ERRNO(ledger_checkpoint(l, &cp, c2, &error), 1, "second checkpoint: %s", strempty(error));
        s = capture("git --git-dir=task1/ledger.git log -1 --format=%%s %s", c2);
        CHECK(strlen(s) <= 75 && !strchr(s, '\n'), "subject bounded (%zu bytes)", strlen(s));
        free(s);

        _cleanup_json_ json_object *list = NULL;
        CHECK(ledger_checkpoints(l, &list) == 0 && json_object_array_length(list) == 2, "two checkpoints listed");
        if (list && json_object_array_length(list) == 2) {
                json_object *e0 = json_object_array_get_idx(list, 0), *e1 = json_object_array_get_idx(list, 1);
                uint64_t n0 = 0, n1 = 0;
                const char *h0 = NULL, *h1 = NULL, *s0 = NULL;
                CHECK(json_get_uint64(e0, "step", &n0) == 0 && json_get_uint64(e1, "step", &n1) == 0 && n0 == 1 && n1 == 2,
                      "oldest first, steps from the real trailers (%lu, %lu)", (unsigned long) n0, (unsigned long) n1);
                CHECK(json_get_string(e0, "commit", &h0) == 0 && json_get_string(e1, "commit", &h1) == 0 &&
                      streq(h0, c1) && streq(h1, c2), "commit ids listed");
                CHECK(json_get_string(e0, "subject", &s0) == 0 && streq(s0, "Add c.txt and more"), "subject listed");
        }

        /* Changes include uncommitted work. */
        CHECK_ERRNO(write_at(ws, "e.txt", "e\n"), 0, "uncommitted file written");
        FileChange *changes = NULL;
        size_t n_changes = 0;
        CHECK_ERRNO(ledger_changes(l, NULL, &changes, &n_changes), 0, "changes from base");
        bool sa = false, sc = false, sd = false, se = false;
        for (size_t i = 0; i < n_changes; i++) {
                sa = sa || (streq(changes[i].path, "a.txt") && changes[i].status == 'M' && changes[i].added == 1);
                sc = sc || (streq(changes[i].path, "c.txt") && changes[i].status == 'A');
                sd = sd || (streq(changes[i].path, "dir/b.txt") && changes[i].status == 'D' && changes[i].removed == 1);
                se = se || (streq(changes[i].path, "e.txt") && changes[i].status == 'A');
        }
        CHECK(sa && sc && sd && se, "M a.txt (+1), A c.txt, D dir/b.txt (-1), A e.txt (uncommitted)");
        file_changes_free(changes, n_changes);
        CHECK_INT_EQ(unlinkat(ws, "e.txt", 0), 0, "uncommitted file removed");

        _cleanup_free_ char *stat = NULL;
        CHECK(ledger_diffstat(l, &stat) == 0 && strstr(stat, "a.txt") && strstr(stat, "files changed"), "diffstat names the files");

        /* Delivery: a clone of the source (checked out, with uncommitted work)
         * accepts the diff, the mbox and the bundle. */
        CHECK_INT_EQ(run("git clone -q src clone && cd clone && git checkout -q -b work && echo mine >> a.txt && echo u > mine.txt"), 0,
                     "clone of the source made");
        _cleanup_close_ int out = openat(task, "out.diff", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_ERRNO(ledger_export_diff(l, out), 0, "diff exported");
        CHECK_INT_EQ(run("git clone -q src apply && cd apply && git apply --check ../task1/out.diff"), 0, "git apply accepts the diff");
        out = safe_close(out);
        out = openat(task, "out.mbox", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_ERRNO(ledger_export_mbox(l, out), 0, "mbox exported");
        s = capture("grep -c '^Subject: \\[PATCH' task1/out.mbox");
        CHECK_STR_EQ(s, "2", "one mail per commit (%s)", s);
        free(s);
        CHECK_INT_EQ(run("cd apply && " GIT "am -q ../task1/out.mbox"), 0, "git am applies the mbox");
        s = capture("git -C apply log --format=%%s -2 | tr '\\n' '|'");
        CHECK(strstr(s, "Add c.txt and more"), "applied commits: %s", s);
        free(s);
        out = safe_close(out);

        out = openat(task, "out.bundle", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_ERRNO(ledger_export_bundle(l, out), 0, "bundle exported");
        out = safe_close(out);
        CHECK_INT_EQ(run("git -C clone bundle verify ../task1/out.bundle"), 0, "git bundle verify accepts it inside a clone");
        CHECK(run("git init -q empty && git -C empty bundle verify ../task1/out.bundle") != 0, "and refuses it without the base");

        char *clone_before = capture("cd clone && git rev-parse HEAD && git symbolic-ref HEAD && sha256sum .git/index && "
                                     "git for-each-ref && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum");
        _cleanup_close_ int in = openat(task, "out.bundle", O_RDONLY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/clone", root);
        r = ledger_import_bundle(path, in, "agentfab/t1", 64 * 1024 * 1024, &error);
        CHECK_ERRNO(r, 0, "bundle imported: %d %s", r, strempty(error));
        s = capture("git -C clone log --format=%%H agentfab/t1 -1");
        CHECK_STR_EQ(s, c2, "imported branch points at the tip");
        free(s);
        s = capture("git -C clone log --format=%%s agentfab/t1 | head -2 | tr '\\n' '|'");
        CHECK(strstr(s, "Add c.txt and more|"), "git log shows the commits: %s", s);
        free(s);
        CHECK_INT_EQ(run("git -C clone fsck --no-dangling"), 0, "clone passes fsck");
        char *clone_after = capture("cd clone && git rev-parse HEAD && git symbolic-ref HEAD && sha256sum .git/index && "
                                    "git for-each-ref | grep -v refs/heads/agentfab/t1 && "
                                    "find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum");
        CHECK_STR_EQ(clone_before, clone_after, "HEAD, index, working tree and other refs of the clone untouched");
        free(clone_before);
        free(clone_after);
        in = safe_close(in);
        in = openat(task, "out.bundle", O_RDONLY | O_CLOEXEC);
        free(error);
        error = NULL;
        CHECK(ledger_import_bundle(path, in, "agentfab/t1", UINT64_MAX, &error) == -EEXIST && error && strstr(error, "exists"),
              "existing branch never overwritten: %s", strempty(error));
        in = safe_close(in);
        in = openat(task, "out.bundle", O_RDONLY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/empty", root);
        free(error);
        error = NULL;
        CHECK(ledger_import_bundle(path, in, "agentfab/t1", UINT64_MAX, &error) == -ENOENT && error && strstr(error, "fetch the task's base"),
              "missing prerequisite refused: %s", strempty(error));
        in = safe_close(in);
        in = openat(task, "out.bundle", O_RDONLY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/clone", root);
        CHECK_ERRNO(ledger_import_bundle(path, in, "agentfab/t1-small", 100, &error), -EFBIG, "bundle over the bound refused");
        in = safe_close(in);

        /* Push goes to agentfab/ branches only and never forces. */
        CHECK_INT_EQ(run("git init -q --bare pushed.git"), 0, "bare remote made");
        (void) snprintf(path, sizeof(path), "file://%s/pushed.git", root);
        r = ledger_push(l, path, NULL, &error);
        CHECK_ERRNO(r, 0, "pushed: %d %s", r, strempty(error));
        s = capture("git --git-dir=pushed.git rev-parse refs/heads/agentfab/t1 && git --git-dir=pushed.git for-each-ref | wc -l | tr '\\n' ' '");
        CHECK(strneq(s, c2, 40) && streq(s + 41, "1 "), "only the branch arrived");
        free(s);

        /* Reset: a half-done step leaves no trace, untracked and ignored files included. */
        CHECK(write_at(ws, "c.txt", "half-done\n") == 0 && write_at(ws, "untracked.txt", "x\n") == 0 &&
              mkdirat(ws, "newdir", 0755) == 0 && write_at(ws, "newdir/f", "f\n") == 0, "half-done step");
        t = now_ms();
        r = ledger_reset(l, c1);
        printf("# ledger_reset took %.1f ms\n", now_ms() - t);
        CHECK_ERRNO(r, 0, "reset to checkpoint 1: %d", r);
        CHECK(!exists("task1/workspace/d.txt") && !exists("task1/workspace/untracked.txt") && !exists("task1/workspace/newdir"),
              "later and untracked files gone");
        s = capture("cat task1/workspace/c.txt");
        CHECK_STR_EQ(s, "new", "modified file restored");
        free(s);
        CHECK(ledger_head(l, head) == 0 && streq(head, c1), "branch moved back");
        s = capture("git --git-dir=task1/ledger.git --work-tree=task1/workspace status --porcelain");
        CHECK_STR_EQ(s, "", "workspace matches the checkpoint exactly: '%s'", s);
        free(s);
        CHECK_ERRNO(ledger_reset(l, c2), -ENXIO, "a commit no longer on the branch refused");
        (void) snprintf(path, sizeof(path), "file://%s/pushed.git", root);
        free(error);
        error = NULL;
        r = ledger_push(l, path, NULL, &error);
        s = capture("git --git-dir=pushed.git rev-parse refs/heads/agentfab/t1");
        CHECK(r < 0 && streq(s, c2), "push that would rewind the remote branch refused, remote kept: %d %s", r, strempty(error));
        free(s);
        CHECK_ERRNO(ledger_reset(l, "0123456789012345678901234567890123456789"), -ENXIO, "an unknown commit refused");
        CHECK(ledger_reset(l, base) == 0 && exists("task1/workspace/dir/b.txt") && !exists("task1/workspace/c.txt"),
              "reset to base restores deletions");
        s = capture("readlink task1/workspace/evil; test -e task1/workspace/evil2 || echo gone");
        CHECK_STR_EQ(s, "/etc/passwd\ngone", "tracked symlinks recreated, later ones gone");
        free(s);
        CHECK(no_markers(), "no hook ran on reset");

        /* What a sandbox may plant where libgit2 would look for a submodule's
         * repository: a FIFO named .git would block a reset forever, a
         * "gitdir:" file would send it elsewhere. All of it goes first. */
        CHECK_INT_EQ(run("cd task1/workspace && mkfifo dir/.git && mkdir -p sub1 .GIT/objects && "
                         "printf 'gitdir: /etc\n' > sub1/.git && printf '[submodule \"x\"]\n\tpath = sub1\n\turl = /etc\n' > .gitmodules"), 0,
                     "planted a .git FIFO, a gitdir file, a .GIT directory");
        alarm(20);
        CHECK_ERRNO(ledger_reset(l, base), 0, "reset with planted .git entries");
        alarm(0);
        CHECK(!exists("task1/workspace/dir/.git") && !exists("task1/workspace/sub1/.git") && !exists("task1/workspace/.GIT") &&
              exists("task1/workspace/dir/b.txt") && run("cmp task1/workspace/.gitmodules src/.gitmodules") == 0,
              "every planted .git gone, the tree (and its own .gitmodules) intact");

        /* After a daemon restart the ledger is found again. */
        cp = checkpoint_of(3, "After restart", NULL);
        CHECK(write_at(ws, "f.txt", "f\n") == 0 && ledger_checkpoint(l, &cp, c1, &error) == 1, "checkpoint before restart");
        l = ledger_free(l);
        CHECK_INT_EQ(run("touch task1/ledger.git/index.lock task1/ledger.git/refs/heads/agentfab/t1.lock"), 0, "crash leftovers made");
        CHECK_ERRNO(ledger_open(task, "agentfab/t1", &l), 0, "ledger reopened");
        CHECK(!exists("task1/ledger.git/index.lock") && !exists("task1/ledger.git/refs/heads/agentfab/t1.lock"),
              "stale lock files removed on open");
        CHECK(l && ledger_base(l, head) == 0 && streq(head, base), "base remembered");
        CHECK(l && ledger_head(l, head) == 0 && streq(head, c1), "tip remembered");
        ws = l ? ledger_workspace_fd(l) : -EBADF;
        cp = checkpoint_of(4, "After reopen", NULL);
        CHECK(l && write_at(ws, "g.txt", "g\n") == 0 && ledger_checkpoint(l, &cp, c2, &error) == 1, "checkpoint after reopen");
        CHECK(!exists("task1/workspace/.git"), "still no .git in the workspace");
        _cleanup_(ledger_freep) Ledger *missing = NULL;
        CHECK(ledger_open(task, "agentfab/other", &missing) < 0, "unknown branch refused on open");

        /* A tracked directory swapped for a symlink out of the tree: the
         * checkpoint records the link and reads nothing through it, and a
         * reset replaces the link without writing through it. */
        CHECK_INT_EQ(run("mkdir outside && echo SECRET > outside/b.txt && rm -rf task1/workspace/dir && ln -s %s/outside task1/workspace/dir",
                         root), 0, "directory replaced by a symlink out of the tree");
        cp = checkpoint_of(5, "Symlinked directory", NULL);
        free(error);
        error = NULL;
        CHECK_ERRNO(ledger_checkpoint(l, &cp, c2, &error), 1, "checkpoint with a symlinked directory: %s", strempty(error));
        s = capture("git --git-dir=task1/ledger.git ls-tree %s dir | cut -c1-6; "
                    "git --git-dir=task1/ledger.git cat-file --batch-all-objects --batch | grep -c SECRET", c2);
        CHECK_STR_EQ(s, "120000\n0", "stored as a link, nothing read through it");
        free(s);
        r = ledger_reset(l, base);
        CHECK_ERRNO(r, 0, "reset over the symlinked directory: %d", r);
        s = capture("cat outside/b.txt; test -L task1/workspace/dir || cat task1/workspace/dir/b.txt");
        CHECK_STR_EQ(s, "SECRET\ntwo", "reset wrote nothing through the link");
        free(s);

        /* Agents run git init (cargo new, npm init): the files of a nested
         * repository are work like any other, its .git (and a .git of the
         * sandbox's own at the top) never enters the history. */
        CHECK_INT_EQ(run("cd task1/workspace && " GIT "init -q nested && echo n > nested/n.txt && mkdir .git && echo x > .git/config && "
                         "echo top > top.txt"), 0, "nested repository and a fake .git made");
        cp = checkpoint_of(6, "Nested", NULL);
        free(error);
        error = NULL;
        r = ledger_checkpoint(l, &cp, c2, &error);
        CHECK_ERRNO(r, 1, "checkpoint with a nested repository: %d %s", r, strempty(error));
        s = capture("git --git-dir=task1/ledger.git ls-tree -r --name-only %s | grep -c -e '^.git/' -e '/.git/' -e '^.git$'", c2);
        CHECK_STR_EQ(s, "0", "nothing of any .git recorded (%s)", s);
        free(s);
        s = capture("git --git-dir=task1/ledger.git ls-tree -r --name-only %s | grep -e '^nested' -e '^top'| tr '\n' ' '", c2);
        CHECK_STR_EQ(s, "nested/n.txt top.txt ", "the nested repository's files recorded: %s", s);
        free(s);
        s = capture("git --git-dir=task1/ledger.git ls-tree %s sub | cut -c1-13", c2);
        CHECK_STR_EQ(s, "160000 commit", "the submodule's gitlink kept across checkpoints: '%s'", s);
        free(s);
        CHECK_INT_EQ(run("rm -rf task1/workspace/nested task1/workspace/.git"), 0, "removed again");

        /* The executable bit and a file turned into a directory are recorded. */
        CHECK_INT_EQ(run("cd task1/workspace && chmod +x top.txt && rm a.txt && mkdir a.txt && echo in > a.txt/inner"), 0,
                     "mode change and file-to-directory change made");
        cp = checkpoint_of(7, "Modes", NULL);
        r = ledger_checkpoint(l, &cp, c2, &error);
        s = capture("git --git-dir=task1/ledger.git ls-tree -r %s top.txt a.txt | cut -c1-6,53- | tr '\t\n' ' |'", c2);
        CHECK(r == 1 && streq(s, "100644 a.txt/inner|100755 top.txt|"), "recorded: %s", s);
        free(s);

        /* The same one level down, resetting to the commit itself. */
        CHECK_INT_EQ(run("mkdir -p task1/workspace/deep/er && echo mine > task1/workspace/deep/er/f.txt && mkdir outside2"), 0, "deep file");
        cp = checkpoint_of(8, "Deep", NULL);
        char deep[41];
        CHECK_ERRNO(ledger_checkpoint(l, &cp, deep, &error), 1, "deep file committed");
        CHECK_INT_EQ(run("rm -rf task1/workspace/deep/er && ln -s %s/outside2 task1/workspace/deep/er", root), 0, "deep/er now a symlink out");
        CHECK_ERRNO(ledger_reset(l, deep), 0, "reset over it");
        s = capture("ls -A outside2 | wc -l; test -L task1/workspace/deep/er && echo link; cat task1/workspace/deep/er/f.txt");
        CHECK_STR_EQ(s, "0\nmine", "nothing written through the link, the directory restored");
        free(s);
        CHECK_INT_EQ(run("echo precious > outside2/victim && rm task1/workspace/deep/er/f.txt && "
                         "ln -s %s/outside2/victim task1/workspace/deep/er/f.txt", root), 0, "tracked file replaced by a symlink out");
        CHECK_ERRNO(ledger_reset(l, deep), 0, "reset over it");
        s = capture("cat outside2/victim; test -L task1/workspace/deep/er/f.txt && echo link; cat task1/workspace/deep/er/f.txt");
        CHECK_STR_EQ(s, "precious\nmine", "the file the link pointed to is untouched, the file restored");
        free(s);

        /* Special files stay out, as git leaves them out; a reader of the
         * FIFO would block, a socket cannot be opened. */
        CHECK_INT_EQ(mkfifoat(ws, "fifo", 0644), 0, "FIFO made");
        {
                union { struct sockaddr sa; struct sockaddr_un un; } addr = { .un.sun_family = AF_UNIX };
                _cleanup_close_ int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                (void) snprintf(addr.un.sun_path, sizeof(addr.un.sun_path), "%s/task1/workspace/sock", root);
                CHECK(sock >= 0 && bind(sock, &addr.sa, sizeof(addr.un)) == 0, "socket bound in the workspace");
        }
        /* Listing changes while the sandbox runs must not hang on it. */
        alarm(30);
        CHECK_ERRNO(ledger_changes(l, NULL, &changes, &n_changes), 0, "changes listed next to a FIFO");
        alarm(0);
        file_changes_free(changes, n_changes);
        cp = checkpoint_of(5, "FIFO", NULL);
        free(error);
        error = NULL;
        CHECK_ERRNO(write_at(ws, "after-fifo.txt", "x\n"), 0, "a file beside them");
        alarm(30);
        CHECK_ERRNO(ledger_checkpoint(l, &cp, c2, &error), 1, "committed beside a FIFO and a socket: %s", strempty(error));
        alarm(0);
        s = capture(GIT "--git-dir=task1/ledger.git ls-tree --name-only agentfab/t1 | tr '\\n' ' '");
        CHECK(s && strstr(s, "after-fifo.txt ") && !strstr(s, " fifo ") && !strstr(s, "sock"), "only the file recorded: %s", strempty(s));
        free(s);
        {
                char **special = NULL;
                size_t n_special = ledger_take_left_out(l, &special);
                _cleanup_free_ char *names = special ? strv_join(special, ",") : NULL;
                CHECK(n_special == 2 && names && streq(names, "fifo,sock"), "both named: %zu %s", n_special, strempty(names));
                strv_free(special);
        }
        alarm(30);
        CHECK_ERRNO(ledger_reset(l, deep), 0, "reset beside them");
        alarm(0);
        CHECK(unlinkat(ws, "fifo", 0) == 0 || errno == ENOENT, "FIFO removed");
        (void) unlinkat(ws, "sock", 0);
        l = ledger_free(l);

        /* Size bound on create: refused with a message, nothing half-made. */
        CHECK_INT_EQ(run(GIT "init -q big && cd big && head -c 3000000 /dev/urandom > huge && " GIT "add huge && " GIT "commit -q -m huge"), 0,
                     "repository with a 3 MB file");
        _cleanup_close_ int task2 = open_dir("task2");
        LedgerOptions small = { .max_bytes = 1024 * 1024 };
        (void) snprintf(path, sizeof(path), "%s/big", root);
        free(error);
        error = NULL;
        r = ledger_create(task2, path, -EBADF, NULL, "agentfab/t2", &small, &error, &l);
        CHECK(r == -EFBIG && error && strstr(error, "too big"), "over-size source refused: %s", strempty(error));
        CHECK(!exists("task2/ledger.git") && !exists("task2/workspace"), "nothing left behind");

        /* History over the bound (the big file deleted again at base). */
        CHECK_INT_EQ(run("cd big && git rm -q huge && echo small > small && git add small && " GIT "commit -q -m small"), 0, "huge file deleted");
        free(error);
        error = NULL;
        r = ledger_create(task2, path, -EBADF, NULL, "agentfab/t2", &small, &error, &l);
        CHECK(r == -EFBIG && !exists("task2/ledger.git"), "over-size history refused: %s", strempty(error));

        /* A file over the bound in the workspace is refused on checkpoint. */
        LedgerOptions medium = { .max_bytes = 16 * 1024 * 1024 };
        CHECK_ERRNO(ledger_create(task2, path, -EBADF, "HEAD", "agentfab/t2", &medium, &error, &l), 0, "bounded ledger made");
        CHECK_INT_EQ(run("head -c 17000000 /dev/zero > task2/workspace/zero"), 0, "17 MB file written");
        cp = checkpoint_of(1, "Big", NULL);
        free(error);
        error = NULL;
        CHECK(l && ledger_checkpoint(l, &cp, c2, &error) == -EFBIG && error && strstr(error, "zero"), "big file refused: %s", strempty(error));
        l = ledger_free(l);

        /* Only the fd given by the submitter reaches the repository: the
         * daemon could not open it by path. */
        CHECK_INT_EQ(run("mkdir priv && " GIT "clone -q src priv/repo"), 0, "private repository made");
        (void) snprintf(path, sizeof(path), "%s/priv/repo", root);
        _cleanup_close_ int src_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/priv", root);
        /* chmod does not stop root: then hide the directory under an empty
         * tmpfs in a mount namespace of our own. */
        bool hidden = false;
        if (getuid() != 0)
                hidden = chmod(path, 0) == 0;
        else if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
                hidden = mount("tmpfs", path, "tmpfs", 0, "size=1M") == 0;
        CHECK(src_fd >= 0 && hidden && !exists("priv/repo/.git/HEAD"), "path made unreachable (control)");
        _cleanup_close_ int task3 = open_dir("task3");
        free(error);
        error = NULL;
        r = ledger_create(task3, NULL, src_fd, "main", "agentfab/t3", &o, &error, &l);
        CHECK_ERRNO(r, 0, "created through the fd alone: %d %s", r, strempty(error));
        s = capture("cat task3/workspace/a.txt");
        CHECK_STR_EQ(s, "one", "workspace checked out from the fd");
        free(s);
        if (getuid() != 0)
                (void) chmod(path, 0755);
        else
                (void) umount2(path, MNT_DETACH);
        l = ledger_free(l);

        /* A URL: fetched by libgit2, base defaults to the remote's HEAD. */
        _cleanup_close_ int task4 = open_dir("task4");
        (void) snprintf(path, sizeof(path), "file://%s/src", root);
        r = ledger_create(task4, path, -EBADF, NULL, "agentfab/t4", &o, &error, &l);
        CHECK_ERRNO(r, 0, "created from a file:// URL: %d %s", r, strempty(error));
        CHECK(l && ledger_base(l, head) == 0 && streq(head, base), "base is the remote's HEAD");
        s = capture("git --git-dir=task4/ledger.git for-each-ref --format='%%(refname)' | tr '\\n' ' '");
        CHECK_STR_EQ(s, "refs/agentfab/base refs/heads/agentfab/t4 ", "only base and branch refs kept: %s", s);
        free(s);
        CHECK(no_markers(), "no hook or filter ran on fetch");
        l = ledger_free(l);

        /* The bound holds for fetches too, and only https and file URLs go. */
        (void) snprintf(path, sizeof(path), "file://%s/big", root);
        free(error);
        error = NULL;
        _cleanup_close_ int task8 = open_dir("task8");
        r = ledger_create(task8, path, -EBADF, NULL, "agentfab/t8", &small, &error, &l);
        CHECK(r == -EFBIG && error && strstr(error, "too big") && !exists("task8/ledger.git") && !exists("task8/workspace"),
              "over-size URL refused, nothing left: %d %s", r, strempty(error));
        CHECK(ledger_create(task8, "git://example.invalid/x.git", -EBADF, NULL, "agentfab/t8", &o, &error, &l) == -EPROTONOSUPPORT &&
              ledger_create(task8, "http://example.invalid/x.git", -EBADF, NULL, "agentfab/t8", &o, &error, &l) == -EPROTONOSUPPORT,
              "git:// and http:// refused");
        /* ssh:// goes only with known hosts to check the server against. */
        CHECK(ledger_create(task8, "ssh://example.invalid/x.git", -EBADF, NULL, "agentfab/t8", &o, &error, &l) == -EPERM &&
              error && strstr(error, "known hosts") && !exists("task8/ledger.git"),
              "ssh:// without known hosts refused before connecting");

        /* A creation cut short is cleaned up by ledger_destroy(). */
        CHECK_INT_EQ(run("mkdir task8/ledger.git task8/workspace && ln -s /etc task8/workspace/etc"), 0, "half-made ledger");
        CHECK(ledger_open(task8, "agentfab/t8", &l) < 0, "a half-made ledger does not open");
        CHECK(ledger_destroy(task8) == 0 && !exists("task8/ledger.git") && !exists("task8/workspace") && access("/etc/passwd", F_OK) == 0,
              "ledger_destroy removes it without following symlinks");

        /* Pushing a branch that reads like a shared one is refused. */
        _cleanup_close_ int task5 = open_dir("task5");
        (void) snprintf(path, sizeof(path), "%s/src", root);
        CHECK_ERRNO(ledger_create(task5, path, -EBADF, NULL, "main", &o, &error, &l), 0, "ledger on branch main");
        (void) snprintf(path, sizeof(path), "file://%s/pushed.git", root);
        CHECK(l && ledger_push(l, path, NULL, &error) == -EPERM, "push of main refused: %s", strempty(error));
        l = ledger_free(l);

        s = snapshot("src");
        CHECK_STR_EQ(before, s, "source still unchanged after every operation");
        free(s);

        /* Trailer parser on its own. */
        _cleanup_json_ json_object *p = NULL;
        CHECK(ledger_parse_trailers("Subject only", &p) == 0 && json_object_object_length(p) == 0, "no trailers in a subject");
        json_object_put(TAKE_PTR(p));
        CHECK(ledger_parse_trailers("S\n\nbody\n\nA-B: 1\nA-B: 2\nC: x\n", &p) == 0 && json_object_object_length(p) == 2 &&
              json_get_string(p, "C", &v) == 0 && streq(v, "x"), "last paragraph parsed");

        /* A linked worktree as the source: objects and refs come from the
         * common git directory, HEAD from the worktree's own. */
        CHECK_INT_EQ(run("git -C src worktree add -q ../wt -b wtb && cd wt && echo wt > w.txt && git add w.txt && " GIT "commit -q -m wt"), 0,
                     "linked worktree made");
        _cleanup_close_ int task6 = open_dir("task6");
        (void) snprintf(path, sizeof(path), "%s/wt", root);
        free(error);
        error = NULL;
        r = ledger_create(task6, path, -EBADF, NULL, "agentfab/t6", &o, &error, &l);
        CHECK(r == 0 && exists("task6/workspace/w.txt"), "created from a linked worktree: %d %s", r, strempty(error));
        l = ledger_free(l);

        /* Refs are read by hand: packed refs, annotated tags, abbreviated
         * ids, a bare repository. */
        CHECK(run(GIT "clone -q --bare src tagged.git && cd tagged.git && " GIT "tag -a v1 -m v1 main && git pack-refs --all") == 0 &&
              !exists("tagged.git/refs/tags/v1"), "bare repository with packed refs and an annotated tag");
        static const char *const bases[] = { "v1", "refs/tags/v1", "main", "heads/main", NULL };
        (void) snprintf(path, sizeof(path), "%s/tagged.git", root);
        for (size_t i = 0; bases[i]; i++) {
                _cleanup_close_ int tt = open_dir("task9");
                free(error);
                error = NULL;
                r = ledger_create(tt, path, -EBADF, bases[i], "agentfab/t9", &o, &error, &l);
                CHECK(r == 0 && ledger_base(l, head) == 0 && streq(head, base), "base '%s' resolved: %s", bases[i], strempty(error));
                l = ledger_free(l);
                (void) ledger_destroy(tt);
        }
        char abbrev[9];
        memcpy(abbrev, base, 8);
        abbrev[8] = '\0';
        _cleanup_close_ int task9 = open_dir("task9");
        CHECK(ledger_create(task9, path, -EBADF, abbrev, "agentfab/t9", &o, &error, &l) == 0 && ledger_base(l, head) == 0 &&
              streq(head, base), "abbreviated id resolved");
        l = ledger_free(l);
        (void) ledger_destroy(task9);
        CHECK(ledger_create(task9, path, -EBADF, "no-such-ref", "agentfab/t9", &o, &error, &l) == -ENOENT && error &&
              strstr(error, "does not name a commit"), "unknown base refused: %s", strempty(error));
        CHECK(ledger_create(task9, path, -EBADF, "../../../etc/passwd", "agentfab/t9", &o, &error, &l) < 0, "base escaping refs/ refused");
        CHECK_ERRNO(ledger_create(task9, path, -EBADF, NULL, "bad..branch", &o, &error, &l), -EINVAL, "invalid branch name refused");

        /* Symlinks in the source's git directory are never followed: they
         * could reach history the submitter cannot read. */
        CHECK_INT_EQ(run(GIT "clone -q --no-local src links && ln -s /etc/hostname links/.git/refs/heads/evil"), 0, "symlinked ref made");
        _cleanup_close_ int task7 = open_dir("task7");
        (void) snprintf(path, sizeof(path), "%s/links", root);
        CHECK(ledger_create(task7, path, -EBADF, "evil", "agentfab/t7", &o, &error, &l) < 0 && !exists("task7/ledger.git"),
              "symlinked ref not followed: %s", strempty(error));
        CHECK_INT_EQ(run("ln -s /tmp links/.git/objects/evil"), 0, "symlink in the object directory made");
        free(error);
        error = NULL;
        r = ledger_create(task7, path, -EBADF, NULL, "agentfab/t7", &o, &error, &l);
        CHECK(r == -ELOOP && error && strstr(error, "symlink"), "symlink in the object directory refused: %s", strempty(error));

        /* ---- submodules ---- */
        /* A superproject with a submodule that has a submodule of its own,
         * initialized as git submodule update --init --recursive leaves it. */
        CHECK(run(GIT "init -q inner && cd inner && echo i > i.txt && " GIT "add . && " GIT "commit -q -m inner") == 0 &&
              run(GIT "init -q lib && cd lib && echo l > l.txt && ln -s l.txt ll && " GIT "add . && "
                  GIT "submodule add -q ../inner inner && " GIT "commit -q -m lib") == 0 &&
              run(GIT "init -q super && cd super && echo s > s.txt && " GIT "add . && " GIT "submodule add -q ../lib lib && "
                  GIT "commit -q -m super && " GIT "submodule update -q --init --recursive") == 0 &&
              exists("super/.git/modules/lib/modules/inner/HEAD"), "superproject with a nested, initialized submodule");
        char *lib_commit = capture("git -C super rev-parse HEAD:lib"), *inner_commit = capture("git -C lib rev-parse HEAD:inner");
        char sbase[41];

        /* Not asked for: nothing fetched, and what the task writes into the
         * empty directory is refused, never dropped silently. */
        _cleanup_close_ int st1 = open_dir("sub1");
        (void) snprintf(path, sizeof(path), "%s/super", root);
        free(error);
        error = NULL;
        r = ledger_create(st1, path, -EBADF, NULL, "agentfab/s1", &o, &error, &l);
        s = capture("ls -A sub1/workspace/lib | wc -l");
        CHECK(r == 0 && streq(s, "0") && !exists("sub1/ledger.git/modules"), "submodules=false: nothing fetched: %d %s", r, strempty(error));
        free(s);
        CHECK(l && write_at(ledger_workspace_fd(l), "lib/lost.txt", "x\n") == 0, "file written into the unfetched submodule");
        cp = checkpoint_of(1, "Lost", NULL);
        free(error);
        error = NULL;
        r = l ? ledger_checkpoint(l, &cp, c1, &error) : -1;
        CHECK(r == -ENOTEMPTY && error && strstr(error, "lib/lost.txt") && strstr(error, "not fetched"),
              "checkpoint refuses it with a message naming the path: %s", strempty(error));
        CHECK(l && ledger_base(l, sbase) == 0 && ledger_reset(l, sbase) == 0 && !exists("sub1/workspace/lib/lost.txt") &&
              exists("sub1/workspace/lib"), "reset empties the unfetched submodule's directory");
        s = capture("git --git-dir=sub1/ledger.git ls-tree HEAD lib | cut -c1-13");
        CHECK_STR_EQ(s, "160000 commit", "gitlink kept");
        free(s);
        l = ledger_free(l);

        /* Asked for: checked out at exactly the gitlink, nested too, no .git
         * anywhere in the workspace, each in its own ledger. */
        LedgerOptions so = { .max_bytes = 64 * 1024 * 1024, .submodules = true };
        _cleanup_close_ int st2 = open_dir("sub2");
        free(error);
        error = NULL;
        r = ledger_create(st2, path, -EBADF, NULL, "agentfab/s2", &so, &error, &l);
        CHECK(r == 0 && l, "submodules=true from a local superproject: %d %s", r, strempty(error));
        if (!l)
                return tap_done();
        s = capture("cat sub2/workspace/lib/l.txt sub2/workspace/lib/inner/i.txt; readlink sub2/workspace/lib/ll; "
                    "find sub2/workspace -name .git | wc -l");
        CHECK_STR_EQ(s, "l\ni\nl.txt\n0", "submodule files checked out, nested too, symlink kept, no .git: %s", s);
        free(s);
        s = capture("git --git-dir=sub2/ledger.git/modules/lib rev-parse refs/heads/agentfab/s2 && "
                    "git --git-dir=sub2/ledger.git/modules/lib/modules/inner rev-parse refs/heads/agentfab/s2");
        (void) snprintf(path, sizeof(path), "%s\n%s", lib_commit, inner_commit);
        CHECK_STR_EQ(s, path, "each submodule's ledger on the same branch, at its gitlink");
        free(s);
        CHECK_ERRNO(ledger_checkpoint(l, &none, c1, &error), 0, "fresh checkout: nothing to commit: %s", strempty(error));

        /* A change inside the submodules: committed there with the same
         * trailers; the superproject's one commit moves the gitlink. */
        ws = ledger_workspace_fd(l);
        CHECK(write_at(ws, "lib/l.txt", "l\nmore\n") == 0 && write_at(ws, "lib/inner/i.txt", "i2\n") == 0 &&
              write_at(ws, "lib/new.txt", "n\n") == 0 && write_at(ws, "top.txt", "t\n") == 0, "edited inside the submodules");
        FileChange *sch = NULL;
        size_t n_sch = 0;
        CHECK_ERRNO(ledger_changes(l, NULL, &sch, &n_sch), 0, "changes listed");
        bool c_top = false, c_l = false, c_i = false, c_new = false, c_link = false;
        for (size_t i = 0; i < n_sch; i++) {
                c_top = c_top || (streq(sch[i].path, "top.txt") && sch[i].status == 'A');
                c_l = c_l || (streq(sch[i].path, "lib/l.txt") && sch[i].status == 'M' && sch[i].added == 1);
                c_i = c_i || (streq(sch[i].path, "lib/inner/i.txt") && sch[i].status == 'M');
                c_new = c_new || (streq(sch[i].path, "lib/new.txt") && sch[i].status == 'A');
                c_link = c_link || streq(sch[i].path, "lib") || streq(sch[i].path, "lib/inner");
        }
        CHECK(c_top && c_l && c_i && c_new && !c_link && n_sch == 4, "changes name the files inside submodules (%zu)", n_sch);
        file_changes_free(sch, n_sch);
        cp = checkpoint_of(1, "Inside", NULL);
        free(error);
        error = NULL;
        CHECK_ERRNO(ledger_checkpoint(l, &cp, c1, &error), 1, "checkpoint: %s", strempty(error));
        char *lib_tip = capture("git --git-dir=sub2/ledger.git/modules/lib rev-parse refs/heads/agentfab/s2");
        s = capture("git --git-dir=sub2/ledger.git rev-parse %s:lib", c1);
        CHECK(!streq(lib_tip, lib_commit) && streq(s, lib_tip), "superproject's gitlink moved to the submodule's new commit");
        free(s);
        s = capture("git --git-dir=sub2/ledger.git/modules/lib rev-parse %s:inner; "
                    "git --git-dir=sub2/ledger.git/modules/lib/modules/inner rev-parse refs/heads/agentfab/s2", lib_tip);
        CHECK(s[0] && strneq(s, s + 41, 40) && !strneq(s, inner_commit, 40), "nested gitlink moved too");
        free(s);
        s = capture("git --git-dir=sub2/ledger.git/modules/lib log -1 --format=%%B");
        json_object_put(TAKE_PTR(tr));
        CHECK(ledger_parse_trailers(s, &tr) == 0 && json_get_string(tr, "Agentfab-Step", &v) == 0 && streq(v, "1") &&
              json_get_string(tr, "Agentfab-Task", &v) == 0 && streq(v, "t1") && strneq(s, "Inside\n", 7),
              "the submodule's commit has the same message and trailers");
        free(s);
        CHECK_ERRNO(ledger_base(l, sbase), 0, "base");
        s = capture("git --git-dir=sub2/ledger.git rev-list --count %s..%s", sbase, c1);
        CHECK_STR_EQ(s, "1", "one superproject commit for the step");
        free(s);

        /* Review: diffstat, diff and mbox show the files inside. */
        _cleanup_free_ char *sstat = NULL;
        CHECK(ledger_diffstat(l, &sstat) == 0 && strstr(sstat, "lib/l.txt") && strstr(sstat, "lib/inner/i.txt") &&
              strstr(sstat, "top.txt"), "diffstat names files inside submodules:\n%s", strempty(sstat));
        out = openat(st2, "out.diff", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_ERRNO(ledger_export_diff(l, out), 0, "diff exported");
        out = safe_close(out);
        s = capture("grep -c -e '^+++ b/lib/l.txt' -e '^+++ b/lib/inner/i.txt' -e '^+++ b/lib/new.txt' sub2/out.diff; "
                    "grep -c 'Subproject commit' sub2/out.diff");
        CHECK_STR_EQ(s, "3\n0", "the diff patches the submodules' files, not their gitlinks: %s", s);
        free(s);
        CHECK_INT_EQ(run(GIT "clone -q --recurse-submodules super sapply && cd sapply && git apply --check ../sub2/out.diff"), 0,
                     "git apply accepts it in a recursive clone");
        out = openat(st2, "out.mbox", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_ERRNO(ledger_export_mbox(l, out), 0, "mbox exported");
        out = safe_close(out);
        s = capture("grep -c '^+++ b/lib/' sub2/out.mbox");
        CHECK_STR_EQ(s, "3", "mbox shows the submodules' files (%s)", s);
        free(s);
        out = openat(st2, "out.bundle", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK_ERRNO(ledger_export_bundle(l, out), 0, "bundle of the superproject exported");
        out = safe_close(out);

        /* Reset back: the submodules' files too. */
        CHECK_ERRNO(write_at(ws, "lib/half.txt", "h\n"), 0, "half-done file inside the submodule");
        CHECK_ERRNO(ledger_reset(l, sbase), 0, "reset to base");
        s = capture("cat sub2/workspace/lib/l.txt sub2/workspace/lib/inner/i.txt; ls sub2/workspace/lib; "
                    "git --git-dir=sub2/ledger.git/modules/lib rev-parse refs/heads/agentfab/s2");
        (void) snprintf(path, sizeof(path), "l\ni\ninner\nl.txt\nll\n%s", lib_commit);
        CHECK_STR_EQ(s, path, "submodule files, untracked ones gone, and its branch back at the gitlink: %s", s);
        free(s);

        /* Reopened after a restart: the submodules' ledgers attach again. */
        l = ledger_free(l);
        CHECK_INT_EQ(run("touch sub2/ledger.git/modules/lib/index.lock"), 0, "crash leftover in a submodule's ledger");
        CHECK(ledger_open(st2, "agentfab/s2", &l) == 0 && !exists("sub2/ledger.git/modules/lib/index.lock"), "reopened, lock removed");
        ws = l ? ledger_workspace_fd(l) : -EBADF;
        cp = checkpoint_of(2, "After reopen", NULL);
        free(error);
        error = NULL;
        CHECK(l && write_at(ws, "lib/inner/i.txt", "again\n") == 0 && ledger_checkpoint(l, &cp, c2, &error) == 1,
              "checkpoint inside a nested submodule after reopen: %s", strempty(error));
        s = capture("git --git-dir=sub2/ledger.git/modules/lib/modules/inner show %s:i.txt 2>&1; git --git-dir=sub2/ledger.git/modules/lib rev-parse HEAD:inner",
                    "refs/heads/agentfab/s2");
        CHECK(strneq(s, "again\n", 6), "recorded in the nested ledger: %s", s);
        free(s);
        l = ledger_free(l);

        /* Not initialized in the source: a clear error, nothing left. */
        CHECK(run("git clone -q super sclone") == 0 && !exists("sclone/.git/modules"), "clone without its submodules");
        _cleanup_close_ int st3 = open_dir("sub3");
        (void) snprintf(path, sizeof(path), "%s/sclone", root);
        free(error);
        error = NULL;
        r = ledger_create(st3, path, -EBADF, NULL, "agentfab/s3", &so, &error, &l);
        CHECK(r == -ENOENT && error && strstr(error, "not initialized") && strstr(error, "'lib'") &&
              !exists("sub3/ledger.git") && !exists("sub3/workspace"), "uninitialized submodule refused: %s", strempty(error));

        /* Over the bound with the submodule's content, within it without. */
        CHECK(run(GIT "init -q blib && cd blib && head -c 2000000 /dev/urandom > blob && " GIT "add . && " GIT "commit -q -m b") == 0 &&
              run(GIT "init -q bsuper && cd bsuper && echo s > s && " GIT "add . && " GIT "submodule add -q ../blib blib && "
                  GIT "commit -q -m s") == 0, "superproject with a 2 MB submodule");
        LedgerOptions bso = { .max_bytes = 1024 * 1024, .submodules = true }, bo = { .max_bytes = 1024 * 1024 };
        (void) snprintf(path, sizeof(path), "%s/bsuper", root);
        free(error);
        error = NULL;
        r = ledger_create(st3, path, -EBADF, NULL, "agentfab/s3", &bso, &error, &l);
        CHECK(r == -EFBIG && error && strstr(error, "blib") && !exists("sub3/ledger.git") && !exists("sub3/workspace"),
              "submodule content counts against the bound: %s", strempty(error));
        CHECK_ERRNO(ledger_create(st3, path, -EBADF, NULL, "agentfab/s3", &bo, &error, &l), 0, "(control) fits without submodules");
        l = ledger_free(l);
        (void) ledger_destroy(st3);

        /* A file:// superproject: a relative URL is fetched from beside it. */
        (void) snprintf(path, sizeof(path), "file://%s/super", root);
        free(error);
        error = NULL;
        r = ledger_create(st3, path, -EBADF, NULL, "agentfab/s3", &so, &error, &l);
        s = capture("cat sub3/workspace/lib/l.txt sub3/workspace/lib/inner/i.txt");
        CHECK(r == 0 && streq(s, "l\ni"), "relative submodule URLs of a URL source fetched: %d %s", r, strempty(error));
        free(s);
        l = ledger_free(l);
        (void) ledger_destroy(st3);

        /* Hostile .gitmodules: each refused with a message, nothing left,
         * nothing outside written. The gitlinks are made by hand. */
        static const struct {
                const char *gitmodules, *gitlink, *what;
                bool url;
                int error;
        } evil[] = {
                { "[submodule \"../../../escape\"]\n\tpath = sub\n\turl = ../lib\n", "sub", "name with ..", false, -EINVAL },
                { "[submodule \"a\"]\n\tpath = other\n\turl = ../lib\n", "sub", "path not a gitlink", false, -ENOENT },
                { "[submodule \"a\"]\n\tpath = ../sub\n\turl = ../lib\n", "sub", "path with ..", false, -EINVAL },
                { "[submodule \"a\"]\n\tpath = /sub\n\turl = ../lib\n", "sub", "absolute path", false, -EINVAL },
                { "[submodule \"a\\\\b\"]\n\tpath = sub\n", "sub", "backslash in the name", false, -EINVAL },
                { "[submodule \"a\"]\n\tpath = link/sub\n\turl = ../lib\n", "d/sub", "path through a symlink", false, -ELOOP },
                { "[submodule \"a\"]\n\tpath = sub\n\turl = /etc\n", "sub", "url a local path", true, -EPROTONOSUPPORT },
                { "[submodule \"a\"]\n\tpath = sub\n\turl = file:///etc\n", "sub", "url file://", true, -EPROTONOSUPPORT },
                { "[submodule \"a\"]\n\tpath = sub\n\turl = -oProxyCommand=touch%%20/tmp/agentfab-test-ledger-url-ran\n", "sub", "url beginning with -", true, -EINVAL },
                { "[submodule \"a\"]\n\tpath = sub\n\turl = git://h/x\n", "sub", "url git://", true, -EPROTONOSUPPORT },
                { "[submodule \"a\"]\n\tpath = sub\n\turl = ../../../../../../../../x\n", "sub", "relative url above the root", true, -EINVAL },
                { "[submodule \"a\"]\n\tpath = sub\n\turl = .//x\n", "sub", "relative url './' then '/' (fuzz-gitmodules)", true, -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(evil); i++) {
                _cleanup_close_ int et = open_dir("evil-task");
                char gm[512];

                /* printf-escape the text for the shell. */
                (void) snprintf(gm, sizeof(gm), "%s", evil[i].gitmodules);
                CHECK_INT_EQ(run("rm -rf evil && " GIT "init -q evil && cd evil && mkdir d && echo x > d/x && ln -s d link && "
                                 "printf '%%s' '%s' > .gitmodules && " GIT "add . && "
                                 "git update-index --add --cacheinfo 160000,%s,%s && " GIT "commit -q -m evil && "
                                 "mkdir -p .git/modules/a && cp -r ../super/.git/modules/lib/. .git/modules/a/",
                                 gm, lib_commit, evil[i].gitlink), 0, "hostile repository: %s", evil[i].what);
                if (evil[i].url)
                        (void) snprintf(path, sizeof(path), "file://%s/evil", root);
                else
                        (void) snprintf(path, sizeof(path), "%s/evil", root);
                free(error);
                error = NULL;
                r = ledger_create(et, path, -EBADF, NULL, "agentfab/e", &so, &error, &l);
                CHECK(r == evil[i].error && error && !exists("evil-task/ledger.git") && !exists("evil-task/workspace") &&
                      !exists("escape") && !exists("../escape") && access("/tmp/agentfab-test-ledger-url-ran", F_OK) < 0,
                      "%s refused, nothing left: %d %s", evil[i].what, r, strempty(error));
                l = ledger_free(l);
        }
        /* (control) the same repository with a sane .gitmodules works. */
        CHECK_INT_EQ(run("rm -rf evil && " GIT "init -q evil && cd evil && printf '[submodule \"a\"]\\n\\tpath = sub\\n' > .gitmodules && "
                         GIT "add . && git update-index --add --cacheinfo 160000,%s,sub && " GIT "commit -q -m sane && "
                         "mkdir -p .git/modules/a && cp -r ../super/.git/modules/lib/. .git/modules/a/", lib_commit), 0,
                     "sane .gitmodules");
        _cleanup_close_ int et = open_dir("evil-task");
        (void) snprintf(path, sizeof(path), "%s/evil", root);
        free(error);
        error = NULL;
        r = ledger_create(et, path, -EBADF, NULL, "agentfab/e", &so, &error, &l);
        CHECK(r == 0 && exists("evil-task/workspace/sub/l.txt"), "(control) hostile fixture is otherwise fetchable: %d %s", r, strempty(error));
        l = ledger_free(l);
        free(lib_commit);
        free(inner_commit);
        free(lib_tip);

        /* A power cut can leave the index torn (libgit2 writes it without an
         * fsync; it is a cache of the workspace): the next stage drops it and
         * hashes the workspace again, and the checkpoint records what a whole
         * index would have given, instead of failing the task after the
         * reboot. */
        {
                _cleanup_close_ int tt = open_dir("torn-task");
                char t1[41], t2[41];

                (void) snprintf(path, sizeof(path), "%s/src", root);
                free(error);
                error = NULL;
                r = ledger_create(tt, path, -EBADF, NULL, "agentfab/torn", &o, &error, &l);
                CHECK(r == 0 && l, "torn index: ledger made: %s", strempty(error));
                if (l) {
                        int tws = ledger_workspace_fd(l);
                        Checkpoint tcp = checkpoint_of(1, "Before the cut", NULL);
                        CHECK(write_at(tws, "before.txt", "1\n") == 0 && ledger_checkpoint(l, &tcp, t1, &error) == 1,
                              "torn index: first checkpoint: %s", strempty(error));
                        l = ledger_free(l);   /* writes the index */
                        CHECK_INT_EQ(run("printf 'DIRC\\0\\0\\0\\2torn' > torn-task/ledger.git/index"), 0,
                                     "torn index: the index cut short");
                        r = ledger_open(tt, "agentfab/torn", &l);
                        CHECK_ERRNO(r, 0, "torn index: ledger opened again");
                }
                if (l) {
                        int tws = ledger_workspace_fd(l);
                        Checkpoint tcp = checkpoint_of(2, "After the cut", NULL);
                        CHECK(write_at(tws, "after.txt", "2\n") == 0, "torn index: after.txt written");
                        r = ledger_checkpoint(l, &tcp, t2, &error);
                        CHECK_ERRNO(r, 1, "torn index: checkpoint made all the same: %s", strempty(error));
                        char *d = capture("git --git-dir=torn-task/ledger.git diff --name-status %s %s | tr '\\t\\n' ': '",
                                          t1, t2);
                        CHECK_STR_EQ(d, "A:after.txt ", "torn index: the checkpoint adds after.txt and changes nothing else");
                        free(d);
                        l = ledger_free(l);
                }
        }

        /* The fixture is live: git itself does run the filter and the hooks. */
        CHECK(run("cd src && rm a.txt && git checkout -- a.txt") == 0 && exists("marker-smudge"),
              "(control) git checkout in the source runs the evil filter");

        free(before);
        free(after);
        free(error);
        if (!getenv("TEST_KEEP"))
                (void) rm_rf_at(AT_FDCWD, root);
        git_libgit2_shutdown();
        return tap_done();
}
