/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "ledger.h"
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
        CHECK(streq(before, after), "source repository byte-for-byte unchanged (files, modes, mtimes, hashes)");
        CHECK(no_markers(), "no hook and no filter of the source ran");
        CHECK(exists("task1/ledger.git/HEAD") && exists("task1/workspace/a.txt") && !exists("task1/workspace/.git"),
              "bare ledger and workspace without .git");
        char *s = capture("cat task1/workspace/a.txt");
        CHECK(streq(s, "one"), "workspace holds base, not the owner's uncommitted work: '%s'", s);
        free(s);
        CHECK(!exists("task1/workspace/staged.txt") && !exists("task1/workspace/untracked.txt"), "staged and untracked files of the source not copied");
        s = capture("readlink task1/workspace/evil");
        CHECK(streq(s, "/etc/passwd") && !exists("task1/workspace/etc"), "symlink out of the tree checked out as a symlink: '%s'", s);
        free(s);
        s = capture("readlink task1/workspace/escape");
        CHECK(streq(s, "../../x"), "relative escaping symlink checked out as a symlink");
        free(s);
        s = capture("ls -A task1/workspace/sub | wc -l");
        CHECK(exists("task1/workspace/sub") && streq(s, "0"), "submodule not fetched: its directory is empty (%s entries)", s);
        free(s);
        CHECK(ledger_base(l, base) == 0 && ledger_head(l, head) == 0 && streq(base, head), "branch starts at base");
        s = capture("git -C src rev-parse HEAD");
        CHECK(streq(s, base), "base is the source's HEAD commit");
        free(s);
        s = capture("git --git-dir=task1/ledger.git rev-parse refs/heads/agentfab/t1");
        CHECK(streq(s, base), "branch agentfab/t1 exists in the ledger");
        free(s);
        Checkpoint none = { .task_id = "t1", .subject = "Nothing yet" };
        CHECK(ledger_checkpoint(l, &none, c1, &error) == 0, "fresh workspace has nothing to commit: %s", strempty(error));
        CHECK(ledger_create(task, path, -EBADF, NULL, "agentfab/t1", &o, &error, &(Ledger *) { NULL }) == -EEXIST,
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
        CHECK(r == 1, "checkpoint committed: %d %s", r, strempty(error));
        CHECK(ledger_head(l, head) == 0 && streq(head, c1), "branch tip is the new commit");
        s = capture("git --git-dir=task1/ledger.git log -1 --format=%%B %s", c1);
        _cleanup_json_ json_object *tr = NULL;
        CHECK(ledger_parse_trailers(s, &tr) == 0, "trailers parsed");
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
        CHECK(streq(s, "120000\n/etc/shadow"), "new symlink stored as a symlink (mode 120000, target /etc/shadow), never followed");
        free(s);
        s = capture("git --git-dir=task1/ledger.git cat-file -p %s:evil", c1);
        CHECK(streq(s, "/etc/passwd"), "checked-out symlink still a symlink after commit");
        free(s);
        CHECK(no_markers(), "no hook ran on checkpoint");

        /* Nothing changed: no empty commits pile up in the history. */
        cp = checkpoint_of(2, "Nothing", NULL);
        CHECK(ledger_checkpoint(l, &cp, c2, &error) == 0 && ledger_head(l, head) == 0 && streq(head, c1),
              "unchanged workspace: returns 0, no commit");

        /* A body can not forge the trailers: they are the last paragraph. */
        CHECK(write_at(ws, "d.txt", "d\n") == 0, "d.txt written");
        cp = checkpoint_of(2, "Second step with a very long subject line that goes on and on and on and on past the bound", NULL);
        cp.body = "Agentfab-Step: 99\n\nAgentfab-Step: 98";
        cp.tests = "not-run";
        CHECK(ledger_checkpoint(l, &cp, c2, &error) == 1, "second checkpoint: %s", strempty(error));
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
        CHECK(write_at(ws, "e.txt", "e\n") == 0, "uncommitted file written");
        FileChange *changes = NULL;
        size_t n_changes = 0;
        CHECK(ledger_changes(l, NULL, &changes, &n_changes) == 0, "changes from base");
        bool sa = false, sc = false, sd = false, se = false;
        for (size_t i = 0; i < n_changes; i++) {
                sa = sa || (streq(changes[i].path, "a.txt") && changes[i].status == 'M' && changes[i].added == 1);
                sc = sc || (streq(changes[i].path, "c.txt") && changes[i].status == 'A');
                sd = sd || (streq(changes[i].path, "dir/b.txt") && changes[i].status == 'D' && changes[i].removed == 1);
                se = se || (streq(changes[i].path, "e.txt") && changes[i].status == 'A');
        }
        CHECK(sa && sc && sd && se, "M a.txt (+1), A c.txt, D dir/b.txt (-1), A e.txt (uncommitted)");
        file_changes_free(changes, n_changes);
        CHECK(unlinkat(ws, "e.txt", 0) == 0, "uncommitted file removed");

        _cleanup_free_ char *stat = NULL;
        CHECK(ledger_diffstat(l, &stat) == 0 && strstr(stat, "a.txt") && strstr(stat, "files changed"), "diffstat names the files");

        /* Delivery: a clone of the source (checked out, with uncommitted work)
         * accepts the diff, the mbox and the bundle. */
        CHECK(run("git clone -q src clone && cd clone && git checkout -q -b work && echo mine >> a.txt && echo u > mine.txt") == 0,
              "clone of the source made");
        _cleanup_close_ int out = openat(task, "out.diff", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(ledger_export_diff(l, out) == 0, "diff exported");
        CHECK(run("git clone -q src apply && cd apply && git apply --check ../task1/out.diff") == 0, "git apply accepts the diff");
        out = safe_close(out);
        out = openat(task, "out.mbox", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(ledger_export_mbox(l, out) == 0, "mbox exported");
        s = capture("grep -c '^Subject: \\[PATCH' task1/out.mbox");
        CHECK(streq(s, "2"), "one mail per commit (%s)", s);
        free(s);
        CHECK(run("cd apply && " GIT "am -q ../task1/out.mbox") == 0, "git am applies the mbox");
        s = capture("git -C apply log --format=%%s -2 | tr '\\n' '|'");
        CHECK(strstr(s, "Add c.txt and more"), "applied commits: %s", s);
        free(s);
        out = safe_close(out);

        out = openat(task, "out.bundle", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(ledger_export_bundle(l, out) == 0, "bundle exported");
        out = safe_close(out);
        CHECK(run("git -C clone bundle verify ../task1/out.bundle") == 0, "git bundle verify accepts it inside a clone");
        CHECK(run("git init -q empty && git -C empty bundle verify ../task1/out.bundle") != 0, "and refuses it without the base");

        char *clone_before = capture("cd clone && git rev-parse HEAD && git symbolic-ref HEAD && sha256sum .git/index && "
                                     "git for-each-ref && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum");
        _cleanup_close_ int in = openat(task, "out.bundle", O_RDONLY | O_CLOEXEC);
        (void) snprintf(path, sizeof(path), "%s/clone", root);
        r = ledger_import_bundle(path, in, "agentfab/t1", 64 * 1024 * 1024, &error);
        CHECK(r == 0, "bundle imported: %d %s", r, strempty(error));
        s = capture("git -C clone log --format=%%H agentfab/t1 -1");
        CHECK(streq(s, c2), "imported branch points at the tip");
        free(s);
        s = capture("git -C clone log --format=%%s agentfab/t1 | head -2 | tr '\\n' '|'");
        CHECK(strstr(s, "Add c.txt and more|"), "git log shows the commits: %s", s);
        free(s);
        CHECK(run("git -C clone fsck --no-dangling") == 0, "clone passes fsck");
        char *clone_after = capture("cd clone && git rev-parse HEAD && git symbolic-ref HEAD && sha256sum .git/index && "
                                    "git for-each-ref | grep -v refs/heads/agentfab/t1 && "
                                    "find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum");
        CHECK(streq(clone_before, clone_after), "HEAD, index, working tree and other refs of the clone untouched");
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
        CHECK(ledger_import_bundle(path, in, "agentfab/t1-small", 100, &error) == -EFBIG, "bundle over the bound refused");
        in = safe_close(in);

        /* Push goes to agentfab/ branches only and never forces. */
        CHECK(run("git init -q --bare pushed.git") == 0, "bare remote made");
        (void) snprintf(path, sizeof(path), "file://%s/pushed.git", root);
        r = ledger_push(l, path, NULL, &error);
        CHECK(r == 0, "pushed: %d %s", r, strempty(error));
        s = capture("git --git-dir=pushed.git rev-parse refs/heads/agentfab/t1 && git --git-dir=pushed.git for-each-ref | wc -l | tr '\\n' ' '");
        CHECK(strneq(s, c2, 40) && streq(s + 41, "1 "), "only the branch arrived");
        free(s);

        /* Reset: a half-done step leaves no trace, untracked and ignored files included. */
        CHECK(write_at(ws, "c.txt", "half-done\n") == 0 && write_at(ws, "untracked.txt", "x\n") == 0 &&
              mkdirat(ws, "newdir", 0755) == 0 && write_at(ws, "newdir/f", "f\n") == 0, "half-done step");
        t = now_ms();
        r = ledger_reset(l, c1);
        printf("# ledger_reset took %.1f ms\n", now_ms() - t);
        CHECK(r == 0, "reset to checkpoint 1: %d", r);
        CHECK(!exists("task1/workspace/d.txt") && !exists("task1/workspace/untracked.txt") && !exists("task1/workspace/newdir"),
              "later and untracked files gone");
        s = capture("cat task1/workspace/c.txt");
        CHECK(streq(s, "new"), "modified file restored");
        free(s);
        CHECK(ledger_head(l, head) == 0 && streq(head, c1), "branch moved back");
        s = capture("git --git-dir=task1/ledger.git --work-tree=task1/workspace status --porcelain");
        CHECK(streq(s, ""), "workspace matches the checkpoint exactly: '%s'", s);
        free(s);
        CHECK(ledger_reset(l, c2) == -ENXIO, "a commit no longer on the branch refused");
        (void) snprintf(path, sizeof(path), "file://%s/pushed.git", root);
        free(error);
        error = NULL;
        r = ledger_push(l, path, NULL, &error);
        s = capture("git --git-dir=pushed.git rev-parse refs/heads/agentfab/t1");
        CHECK(r < 0 && streq(s, c2), "push that would rewind the remote branch refused, remote kept: %d %s", r, strempty(error));
        free(s);
        CHECK(ledger_reset(l, "0123456789012345678901234567890123456789") == -ENXIO, "an unknown commit refused");
        CHECK(ledger_reset(l, base) == 0 && exists("task1/workspace/dir/b.txt") && !exists("task1/workspace/c.txt"),
              "reset to base restores deletions");
        s = capture("readlink task1/workspace/evil; test -e task1/workspace/evil2 || echo gone");
        CHECK(streq(s, "/etc/passwd\ngone"), "tracked symlinks recreated, later ones gone");
        free(s);
        CHECK(no_markers(), "no hook ran on reset");

        /* After a daemon restart the ledger is found again. */
        cp = checkpoint_of(3, "After restart", NULL);
        CHECK(write_at(ws, "f.txt", "f\n") == 0 && ledger_checkpoint(l, &cp, c1, &error) == 1, "checkpoint before restart");
        l = ledger_free(l);
        CHECK(run("touch task1/ledger.git/index.lock task1/ledger.git/refs/heads/agentfab/t1.lock") == 0, "crash leftovers made");
        CHECK(ledger_open(task, "agentfab/t1", &l) == 0, "ledger reopened");
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
        CHECK(run("mkdir outside && echo SECRET > outside/b.txt && rm -rf task1/workspace/dir && ln -s %s/outside task1/workspace/dir",
                  root) == 0, "directory replaced by a symlink out of the tree");
        cp = checkpoint_of(5, "Symlinked directory", NULL);
        free(error);
        error = NULL;
        CHECK(ledger_checkpoint(l, &cp, c2, &error) == 1, "checkpoint with a symlinked directory: %s", strempty(error));
        s = capture("git --git-dir=task1/ledger.git ls-tree %s dir | cut -c1-6; "
                    "git --git-dir=task1/ledger.git cat-file --batch-all-objects --batch | grep -c SECRET", c2);
        CHECK(streq(s, "120000\n0"), "stored as a link, nothing read through it");
        free(s);
        r = ledger_reset(l, base);
        CHECK(r == 0, "reset over the symlinked directory: %d", r);
        s = capture("cat outside/b.txt; test -L task1/workspace/dir || cat task1/workspace/dir/b.txt");
        CHECK(streq(s, "SECRET\ntwo"), "reset wrote nothing through the link");
        free(s);

        /* Agents run git init (cargo new, npm init): the files of a nested
         * repository are work like any other, its .git (and a .git of the
         * sandbox's own at the top) never enters the history. */
        CHECK(run("cd task1/workspace && " GIT "init -q nested && echo n > nested/n.txt && mkdir .git && echo x > .git/config && "
                  "echo top > top.txt") == 0, "nested repository and a fake .git made");
        cp = checkpoint_of(6, "Nested", NULL);
        free(error);
        error = NULL;
        r = ledger_checkpoint(l, &cp, c2, &error);
        CHECK(r == 1, "checkpoint with a nested repository: %d %s", r, strempty(error));
        s = capture("git --git-dir=task1/ledger.git ls-tree -r --name-only %s | grep -c -e '^.git/' -e '/.git/' -e '^.git$'", c2);
        CHECK(streq(s, "0"), "nothing of any .git recorded (%s)", s);
        free(s);
        s = capture("git --git-dir=task1/ledger.git ls-tree -r --name-only %s | grep -e '^nested' -e '^top'| tr '\n' ' '", c2);
        CHECK(streq(s, "nested/n.txt top.txt "), "the nested repository's files recorded: %s", s);
        free(s);
        s = capture("git --git-dir=task1/ledger.git ls-tree %s sub | cut -c1-13", c2);
        CHECK(streq(s, "160000 commit"), "the submodule's gitlink kept across checkpoints: '%s'", s);
        free(s);
        CHECK(run("rm -rf task1/workspace/nested task1/workspace/.git") == 0, "removed again");

        /* The executable bit and a file turned into a directory are recorded. */
        CHECK(run("cd task1/workspace && chmod +x top.txt && rm a.txt && mkdir a.txt && echo in > a.txt/inner") == 0,
              "mode change and file-to-directory change made");
        cp = checkpoint_of(7, "Modes", NULL);
        r = ledger_checkpoint(l, &cp, c2, &error);
        s = capture("git --git-dir=task1/ledger.git ls-tree -r %s top.txt a.txt | cut -c1-6,53- | tr '\t\n' ' |'", c2);
        CHECK(r == 1 && streq(s, "100644 a.txt/inner|100755 top.txt|"), "recorded: %s", s);
        free(s);

        /* The same one level down, resetting to the commit itself. */
        CHECK(run("mkdir -p task1/workspace/deep/er && echo mine > task1/workspace/deep/er/f.txt && mkdir outside2") == 0, "deep file");
        cp = checkpoint_of(8, "Deep", NULL);
        char deep[41];
        CHECK(ledger_checkpoint(l, &cp, deep, &error) == 1, "deep file committed");
        CHECK(run("rm -rf task1/workspace/deep/er && ln -s %s/outside2 task1/workspace/deep/er", root) == 0, "deep/er now a symlink out");
        CHECK(ledger_reset(l, deep) == 0, "reset over it");
        s = capture("ls -A outside2 | wc -l; test -L task1/workspace/deep/er && echo link; cat task1/workspace/deep/er/f.txt");
        CHECK(streq(s, "0\nmine"), "nothing written through the link, the directory restored");
        free(s);
        CHECK(run("echo precious > outside2/victim && rm task1/workspace/deep/er/f.txt && "
                  "ln -s %s/outside2/victim task1/workspace/deep/er/f.txt", root) == 0, "tracked file replaced by a symlink out");
        CHECK(ledger_reset(l, deep) == 0, "reset over it");
        s = capture("cat outside2/victim; test -L task1/workspace/deep/er/f.txt && echo link; cat task1/workspace/deep/er/f.txt");
        CHECK(streq(s, "precious\nmine"), "the file the link pointed to is untouched, the file restored");
        free(s);

        /* Refusals on checkpoint: special files and files over the bound. */
        CHECK(mkfifoat(ws, "fifo", 0644) == 0, "FIFO made");
        /* Listing changes while the sandbox runs must not hang on it. */
        alarm(30);
        CHECK(ledger_changes(l, NULL, &changes, &n_changes) == 0, "changes listed next to a FIFO");
        alarm(0);
        file_changes_free(changes, n_changes);
        cp = checkpoint_of(5, "FIFO", NULL);
        free(error);
        error = NULL;
        CHECK(ledger_checkpoint(l, &cp, c2, &error) == -EPERM && error && strstr(error, "fifo"), "FIFO refused: %s", strempty(error));
        CHECK(unlinkat(ws, "fifo", 0) == 0, "FIFO removed");
        l = ledger_free(l);

        /* Size bound on create: refused with a message, nothing half-made. */
        CHECK(run(GIT "init -q big && cd big && head -c 3000000 /dev/urandom > huge && " GIT "add huge && " GIT "commit -q -m huge") == 0,
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
        CHECK(run("cd big && git rm -q huge && echo small > small && git add small && " GIT "commit -q -m small") == 0, "huge file deleted");
        free(error);
        error = NULL;
        r = ledger_create(task2, path, -EBADF, NULL, "agentfab/t2", &small, &error, &l);
        CHECK(r == -EFBIG && !exists("task2/ledger.git"), "over-size history refused: %s", strempty(error));

        /* A file over the bound in the workspace is refused on checkpoint. */
        LedgerOptions medium = { .max_bytes = 16 * 1024 * 1024 };
        CHECK(ledger_create(task2, path, -EBADF, "HEAD", "agentfab/t2", &medium, &error, &l) == 0, "bounded ledger made");
        CHECK(run("head -c 17000000 /dev/zero > task2/workspace/zero") == 0, "17 MB file written");
        cp = checkpoint_of(1, "Big", NULL);
        free(error);
        error = NULL;
        CHECK(l && ledger_checkpoint(l, &cp, c2, &error) == -EFBIG && error && strstr(error, "zero"), "big file refused: %s", strempty(error));
        l = ledger_free(l);

        /* Only the fd given by the submitter reaches the repository: the
         * daemon could not open it by path. */
        CHECK(run("mkdir priv && " GIT "clone -q src priv/repo") == 0, "private repository made");
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
        CHECK(r == 0, "created through the fd alone: %d %s", r, strempty(error));
        s = capture("cat task3/workspace/a.txt");
        CHECK(streq(s, "one"), "workspace checked out from the fd");
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
        CHECK(r == 0, "created from a file:// URL: %d %s", r, strempty(error));
        CHECK(l && ledger_base(l, head) == 0 && streq(head, base), "base is the remote's HEAD");
        s = capture("git --git-dir=task4/ledger.git for-each-ref --format='%%(refname)' | tr '\\n' ' '");
        CHECK(streq(s, "refs/agentfab/base refs/heads/agentfab/t4 "), "only base and branch refs kept: %s", s);
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
        CHECK(run("mkdir task8/ledger.git task8/workspace && ln -s /etc task8/workspace/etc") == 0, "half-made ledger");
        CHECK(ledger_open(task8, "agentfab/t8", &l) < 0, "a half-made ledger does not open");
        CHECK(ledger_destroy(task8) == 0 && !exists("task8/ledger.git") && !exists("task8/workspace") && access("/etc/passwd", F_OK) == 0,
              "ledger_destroy removes it without following symlinks");

        /* Pushing a branch that reads like a shared one is refused. */
        _cleanup_close_ int task5 = open_dir("task5");
        (void) snprintf(path, sizeof(path), "%s/src", root);
        CHECK(ledger_create(task5, path, -EBADF, NULL, "main", &o, &error, &l) == 0, "ledger on branch main");
        (void) snprintf(path, sizeof(path), "file://%s/pushed.git", root);
        CHECK(l && ledger_push(l, path, NULL, &error) == -EPERM, "push of main refused: %s", strempty(error));
        l = ledger_free(l);

        s = snapshot("src");
        CHECK(streq(before, s), "source still unchanged after every operation");
        free(s);

        /* Trailer parser on its own. */
        _cleanup_json_ json_object *p = NULL;
        CHECK(ledger_parse_trailers("Subject only", &p) == 0 && json_object_object_length(p) == 0, "no trailers in a subject");
        json_object_put(TAKE_PTR(p));
        CHECK(ledger_parse_trailers("S\n\nbody\n\nA-B: 1\nA-B: 2\nC: x\n", &p) == 0 && json_object_object_length(p) == 2 &&
              json_get_string(p, "C", &v) == 0 && streq(v, "x"), "last paragraph parsed");

        /* A linked worktree as the source: objects and refs come from the
         * common git directory, HEAD from the worktree's own. */
        CHECK(run("git -C src worktree add -q ../wt -b wtb && cd wt && echo wt > w.txt && git add w.txt && " GIT "commit -q -m wt") == 0,
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
        CHECK(ledger_create(task9, path, -EBADF, NULL, "bad..branch", &o, &error, &l) == -EINVAL, "invalid branch name refused");

        /* Symlinks in the source's git directory are never followed: they
         * could reach history the submitter cannot read. */
        CHECK(run(GIT "clone -q --no-local src links && ln -s /etc/hostname links/.git/refs/heads/evil") == 0, "symlinked ref made");
        _cleanup_close_ int task7 = open_dir("task7");
        (void) snprintf(path, sizeof(path), "%s/links", root);
        CHECK(ledger_create(task7, path, -EBADF, "evil", "agentfab/t7", &o, &error, &l) < 0 && !exists("task7/ledger.git"),
              "symlinked ref not followed: %s", strempty(error));
        CHECK(run("ln -s /tmp links/.git/objects/evil") == 0, "symlink in the object directory made");
        free(error);
        error = NULL;
        r = ledger_create(task7, path, -EBADF, NULL, "agentfab/t7", &o, &error, &l);
        CHECK(r == -ELOOP && error && strstr(error, "symlink"), "symlink in the object directory refused: %s", strempty(error));

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
