/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A model's tool call: the function name and the argument text, then what
 * the file tools do with the paths in it, on a real temporary workspace
 * that holds symlinks pointing out of it (relative, absolute, into .git,
 * into /proc), a loop, a binary file, and a .git directory.
 *
 * Input: a first byte (bit 7: the rest is a bare path, resolved directly;
 * else a name up to byte 0xff, then the argument text).
 *
 * Invariants: parsed arguments are within the TOOL_*_MAX bounds and have
 * what their kind requires; a normalized path passes the check again and
 * normalizes to itself; every fd workspace_open() or
 * workspace_open_parent() gives names something inside the workspace, and
 * what write_file wrote is never in .git; a tool's output is valid UTF-8 without NUL and bounded
 * by the max_output given; nothing outside the workspace and nothing in .git
 * ever changes (write_file, edit_file and apply_patch run too, on this
 * workspace), and the paths a patch names are valid ones. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "fuzz.h"
#include "string-util.h"
#include "tools.h"
#include "workspace-path.h"

#define MAX_OUTPUT 2048U
#define MAX_FILE (64U * 1024U)
/* What a cut output may carry past max_output: its note. */
#define NOTE_MAX 256U

static char top[PATH_MAX], ws_path[PATH_MAX], ws_real[PATH_MAX];
/* The scratch directory and the workspace in it: the set-up and the checks
 * of every input go from these fds, not by a walk of the absolute path. */
static int top_fd = -EBADF, ws_fd = -EBADF;
/* Whether write_file or edit_file ran since the workspace was made: the
 * other tools and the opens of check_path() change nothing. */
static bool ws_dirty = true;
/* Whether the workspace is a tmpfs of its own (see LLVMFuzzerInitialize()). */
static bool ws_mount = false;
static struct stat outside_before, secret_before, git_before, config_before;

static void must(int r, const char *what) {
        if (r < 0) {
                fprintf(stderr, "setup: %s: %s\n", what, strerror(errno));
                abort();
        }
}

static void put(const char *rel, const char *text, size_t n) {
        int fd = openat(top_fd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        must(fd, rel);
        must((int) write(fd, text, n), rel);
        close(fd);
}

static void stat_rel(const char *rel, struct stat *st) {
        must(fstatat(top_fd, rel, st, AT_SYMLINK_NOFOLLOW), rel);
}

static void workspace_make(void) {
        char q[PATH_MAX];

        if (ws_fd >= 0) {
                close(ws_fd);
                ws_fd = -EBADF;
                if (ws_mount)
                        must(umount2(ws_path, MNT_DETACH), "unmount the workspace");
                else
                        (void) rm_rf_at(top_fd, "ws");
        }
        if (!ws_mount)
                must(mkdirat(top_fd, "ws", 0755), "workspace");
        else
                must(mount("tmpfs", ws_path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"), "mount the workspace");
        ws_fd = openat(top_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        must(ws_fd, "open workspace");
        must(mkdirat(ws_fd, "dir", 0755), "dir");
        must(mkdirat(ws_fd, "dir/sub", 0755), "dir/sub");
        must(mkdirat(ws_fd, "dir/empty", 0755), "dir/empty");
        must(mkdirat(ws_fd, ".git", 0755), ".git");
        put("ws/a.txt", "hello\nworld\nhello again\n", 24);
        put("ws/dir/b.c", "int main(void) {\n        return 0;\n}\n", 37);
        put("ws/dir/sub/c", "c\n", 2);
        put("ws/bin", "a\0b\n", 4);
        put("ws/.git/config", "[core]\n", 7);
        put("ws/AGENTS.md", "Be brief.\n", 10);
        struct { const char *target, *name; } links[] = {
                { "../outside", "link-out" }, { NULL, "abs-out" }, { "dir", "link-in" }, { "loop", "loop" },
                { ".git", "dotgit" }, { "/proc/self/root", "proc-root" }, { "../outside/secret", "dir/secret" },
                { "sub/../../a.txt", "dir/up" },
        };
        snprintf(q, sizeof(q), "%s/outside", top);
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                must(symlinkat(links[i].target ?: q, ws_fd, links[i].name), links[i].name);
        stat_rel("ws/.git", &git_before);
        stat_rel("ws/.git/config", &config_before);
        ws_dirty = false;
}

static void cleanup(void) {
        if (ws_mount)
                (void) umount2(ws_path, MNT_DETACH);
        (void) rm_rf_at(AT_FDCWD, top);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        /* tmpfs when there is one: write_file syncs what it writes. */
        snprintf(top, sizeof(top), "%s/fuzz-tool-call-XXXXXX",
                 getenv("TMPDIR") ?: access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(top))
                abort();
        atexit(cleanup);
        /* Inputs write paths a hundred directories deep, and each mutation
         * of one makes a new chain of them: removing what 250 inputs made,
         * several syscalls a directory, was a quarter of the target's time.
         * As root the workspace is a tmpfs of its own, in a mount namespace
         * of this process, and going back to a fresh one is an unmount and
         * a mount. Without the privilege: removed entry by entry. (Before
         * any fd is opened below top: one opened earlier walks the mounts of
         * the namespace it was opened in.) */
        if (unshare(CLONE_NEWNS) >= 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) >= 0)
                ws_mount = true;
        top_fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        must(top_fd, top);
        snprintf(ws_path, sizeof(ws_path), "%s/ws", top);
        must(mkdirat(top_fd, "outside", 0755), "outside");
        if (ws_mount)
                must(mkdirat(top_fd, "ws", 0755), "workspace");
        put("outside/secret", "secret\n", 7);
        workspace_make();
        if (!realpath(ws_path, ws_real))
                abort();
        stat_rel("outside", &outside_before);
        stat_rel("outside/secret", &secret_before);
        return 0;
}

static bool same_stat(const struct stat *a, const struct stat *b) {
        return a->st_ino == b->st_ino && a->st_size == b->st_size && a->st_nlink == b->st_nlink &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
               a->st_mode == b->st_mode;
}

/* The fd names the workspace or something below it; with no_git, nothing
 * in its .git (reads through a symlink may go there: the workspace's .git is
 * the sandbox's own, the ledger lives elsewhere; writes may not). */
static void check_fd_inside(int fd, const char *path, bool no_git) {
        char link[64], target[PATH_MAX + 1];
        size_t l = strlen(ws_real);

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        FUZZ_CHECK(n > 0, "readlink of the fd of '%s'", path);
        target[n] = '\0';
        FUZZ_CHECK(strncmp(target, ws_real, l) == 0 && (target[l] == '\0' || target[l] == '/'),
                   "'%s' resolved to '%s', outside the workspace", path, target);
        FUZZ_CHECK(!no_git || strncmp(target + l, "/.git", 5) != 0 || (target[l + 5] != '\0' && target[l + 5] != '/'),
                   "'%s' resolved to '%s', inside .git", path, target);
}

static void check_output(const char *out, size_t max, const char *what) {
        FUZZ_CHECK(out, "%s: a message, also on errors", what);
        size_t n = strlen(out);
        char *copy = strdup(out);
        if (!copy)
                abort();
        utf8_sanitize(copy, n);
        FUZZ_CHECK(memcmp(copy, out, n) == 0, "%s: output is valid UTF-8", what);
        free(copy);
        FUZZ_CHECK(n <= max + NOTE_MAX, "%s: %zu bytes of output for at most %zu", what, n, max);
}

static void check_path(const char *path) {
        char *norm = NULL, *again = NULL, *name = NULL;
        int r, fd = -EBADF, dir_fd = -EBADF;

        r = workspace_path_check(path);
        if (r >= 0) {
                FUZZ_CHECK(workspace_path_normalize(path, &norm) == 0, "a checked path normalizes");
                FUZZ_CHECK(workspace_path_check(norm) == 0, "'%s' normalized to '%s', which fails the check", path, norm);
                FUZZ_CHECK(workspace_path_normalize(norm, &again) == 0 && streq(norm, again), "normalizing is idempotent");
                FUZZ_CHECK(strlen(norm) <= strlen(path) || streq(norm, "."), "normalizing does not grow '%s'", path);
                FUZZ_CHECK(!strstr(norm, "//") && !strstr(norm, "/./") && norm[strlen(norm) - 1] != '/',
                           "'%s' is normal", norm);
        } else
                FUZZ_CHECK(IN_SET(r, -EINVAL, -ENAMETOOLONG, -EXDEV, -EPERM), "check error %d", r);

        /* Whatever the check says, the opens must hold the line themselves. */
        static const int flags[] = { O_RDONLY, O_PATH, O_RDONLY | O_DIRECTORY, O_PATH | O_NOFOLLOW };
        for (size_t i = 0; i < ELEMENTSOF(flags); i++) {
                r = workspace_open(ws_fd, path, flags[i], 0, &fd);
                if (r >= 0) {
                        check_fd_inside(fd, path, false);
                        close(fd);
                }
        }
        r = workspace_open_parent(ws_fd, path, false, &dir_fd, &name);
        if (r >= 0) {
                check_fd_inside(dir_fd, path, false);
                FUZZ_CHECK(name && *name && !strchr(name, '/') && !streq(name, "..") && !streq(name, "."),
                           "final component '%s' of '%s'", strempty(name), path);
                close(dir_fd);
                free(name);
        }
        char *msg = NULL;
        /* One line; made valid UTF-8 by the tool that passes it on. */
        FUZZ_CHECK(workspace_path_error(path, -EXDEV, &msg) == -EXDEV && msg && !strchr(msg, '\n'), "a message for the model");
        free(msg);
        free(norm);
        free(again);
}

static void check_args(const ToolCallArgs *a) {
        FUZZ_CHECK(a->kind >= 0 && a->kind < _TOOL_KIND_MAX, "kind %d", (int) a->kind);
        FUZZ_CHECK(!a->command || strlen(a->command) <= TOOL_COMMAND_MAX, "command bound");
        FUZZ_CHECK(!a->content || strlen(a->content) <= TOOL_CONTENT_MAX, "content bound");
        FUZZ_CHECK(!a->old_text || strlen(a->old_text) <= TOOL_CONTENT_MAX, "old_text bound");
        FUZZ_CHECK(!a->new_text || strlen(a->new_text) <= TOOL_CONTENT_MAX, "new_text bound");
        FUZZ_CHECK(!a->pattern || (strlen(a->pattern) <= TOOL_PATTERN_MAX && *a->pattern), "pattern bound");
        FUZZ_CHECK(!a->summary || strlen(a->summary) <= TOOL_SUMMARY_MAX, "summary bound");
        FUZZ_CHECK(!a->path || (strlen(a->path) < PATH_MAX && *a->path), "path bound");
        FUZZ_CHECK(a->timeout_sec <= TOOL_TIMEOUT_MAX_SEC, "timeout bound");
        switch (a->kind) {
        case TOOL_RUN_COMMAND: FUZZ_CHECK(a->command && *a->command, "a command"); break;
        case TOOL_READ_FILE:
                FUZZ_CHECK(a->path, "a path");
                FUZZ_CHECK(!a->start_line || !a->end_line || a->start_line <= a->end_line, "lines in order");
                break;
        case TOOL_WRITE_FILE: FUZZ_CHECK(a->path && a->content, "path and content"); break;
        case TOOL_EDIT_FILE:
                FUZZ_CHECK(a->path && a->old_text && *a->old_text && a->new_text && !streq(a->old_text, a->new_text), "edit");
                break;
        case TOOL_SEARCH: FUZZ_CHECK(a->pattern, "a pattern"); break;
        case TOOL_APPLY_PATCH: FUZZ_CHECK(a->patch && *a->patch && strlen(a->patch) <= TOOL_CONTENT_MAX, "a patch"); break;
        case TOOL_FINISH: FUZZ_CHECK(a->summary && *a->summary, "a summary"); break;
        default: break;
        }
}

static void check_unchanged(void) {
        struct stat st;
        stat_rel("outside", &st);
        FUZZ_CHECK(same_stat(&st, &outside_before), "the directory outside the workspace changed");
        stat_rel("outside/secret", &st);
        FUZZ_CHECK(same_stat(&st, &secret_before), "the file outside the workspace changed");
        stat_rel("ws/.git", &st);
        FUZZ_CHECK(same_stat(&st, &git_before), ".git changed");
        stat_rel("ws/.git/config", &st);
        FUZZ_CHECK(same_stat(&st, &config_before), ".git/config changed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static unsigned runs = 0;
        FuzzInput in = { .data = data, .size = size };
        ToolCallArgs a;
        char *error = NULL, *out = NULL;

        /* Writes change the workspace: start from the same one now and then;
         * often enough that search and list_files do not spend most of the
         * time walking what earlier inputs wrote. Every 100 inputs: with a
         * fresh tmpfs cheap, 25, 50 and 100 ran at about the same rate and
         * 250 a fifth slower; 100 leaves the walks the most to find. One
         * that nothing wrote to is still that workspace. */
        if (runs++ % 100 == 0 && ws_dirty)
                workspace_make();

        uint8_t mode = fuzz_u8(&in);
        if (mode & 0x80) {
                char *path = fuzz_text(data + 1, size > 0 ? size - 1 : 0);
                if (strlen(path) < 2 * PATH_MAX)
                        check_path(path);
                free(path);
                check_unchanged();
                return 0;
        }

        char *name = fuzz_string(&in, NULL);
        char *args = fuzz_string(&in, NULL);
        int r = tool_call_parse(name, args, &a, &error);
        if (r < 0) {
                FUZZ_CHECK(a.kind == _TOOL_KIND_INVALID && !a.path && !a.content && !a.command, "refused means empty");
                FUZZ_CHECK(r == -ENOMEM || error, "a refusal says why");
                if (error)
                        check_output(error, 64 * 1024, "parse error");
                goto out;
        }
        FUZZ_CHECK(!error, "no error on success");
        check_args(&a);
        if (a.path)
                check_path(a.path);

        switch (a.kind) {
        case TOOL_READ_FILE:
                (void) tool_read_file(ws_fd, &a, MAX_OUTPUT, &out);
                check_output(out, MAX_OUTPUT, "read_file");
                break;
        case TOOL_LIST_FILES:
                (void) tool_list_files(ws_fd, &a, 40, MAX_OUTPUT, &out);
                check_output(out, MAX_OUTPUT, "list_files");
                break;
        case TOOL_SEARCH:
                /* glibc's regexec() has no time limit (tools.h): fixed strings only. */
                a.regex = false;
                (void) tool_search(ws_fd, &a, 20, MAX_OUTPUT, &out);
                check_output(out, MAX_OUTPUT, "search");
                break;
        case TOOL_WRITE_FILE:
                ws_dirty = true;
                r = tool_write_file(ws_fd, &a, MAX_FILE, &out);
                check_output(out, 64 * 1024, "write_file");
                if (r >= 0) {
                        /* What was written is there, below the workspace. */
                        size_t want = strlen(a.content);
                        char *back = malloc(want + 2);
                        int fd = -EBADF;
                        if (!back)
                                abort();
                        char *norm = NULL;
                        FUZZ_CHECK(workspace_path_normalize(a.path, &norm) == 0, "a written path is valid");
                        FUZZ_CHECK(workspace_open(ws_fd, norm, O_RDONLY | O_NOFOLLOW, 0, &fd) >= 0, "written '%s' opens", norm);
                        free(norm);
                        check_fd_inside(fd, a.path, true);
                        ssize_t n = pread(fd, back, want + 1, 0);
                        FUZZ_CHECK(n == (ssize_t) want && memcmp(back, a.content, want) == 0, "'%s' holds what was written", a.path);
                        close(fd);
                        free(back);
                }
                break;
        case TOOL_EDIT_FILE:
                ws_dirty = true;
                (void) tool_edit_file(ws_fd, &a, MAX_FILE, &out);
                check_output(out, 64 * 1024, "edit_file");
                break;
        case TOOL_APPLY_PATCH: {
                char **paths = NULL;
                ws_dirty = true;
                r = tool_apply_patch(ws_fd, &a, MAX_FILE, &paths, &out);
                check_output(out, 256 * 1024, "apply_patch");
                /* A patch refused names nothing; one whose writing failed
                 * midway names what it touched, and says it was put back. */
                FUZZ_CHECK(r >= 0 || !paths || (out && strstr(out, "was put back")),
                           "a patch that failed names no paths, unless its writes were put back");
                for (char **p = paths; p && *p; p++)
                        FUZZ_CHECK(workspace_path_check(*p) == 0, "a patched path '%s' is valid", *p);
                strv_free(paths);
                break;
        }
        default:
                break;
        }
        check_unchanged();
out:
        tool_call_args_done(&a);
        free(out);
        free(error);
        free(name);
        free(args);
        return 0;
}
