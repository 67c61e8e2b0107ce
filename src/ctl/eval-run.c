/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "eval-run.h"
#include "fs-util.h"
#include "io-util.h"
#include "ledger.h"
#include "macro.h"
#include "string-table.h"
#include "string-util.h"
#include "submit-request.h"
#include "task-info.h"

extern char **environ;

static const char *const eval_outcome_table[_EVAL_OUTCOME_MAX] = {
        [EVAL_PASSED] = "passed",
        [EVAL_DECLINED] = "declined",
        [EVAL_TESTS] = "tests",
        [EVAL_BUDGET] = "budget",
        [EVAL_BREAKER] = "breaker",
        [EVAL_MALFORMED] = "malformed",
        [EVAL_GAVE_UP] = "gave-up",
        [EVAL_ERROR] = "error",
};

DEFINE_STRING_TABLE_LOOKUP(eval_outcome, EvalOutcome);

/* The user a grading command runs as when eval runs as root, which
 * agentfab-sandbox never runs a command as: nobody. */
#define GRADE_UID 65534

#ifndef BWRAP_PATH
#define BWRAP_PATH "/usr/bin/bwrap"
#endif
#define TIMEOUT_PATH "/usr/bin/timeout"

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

void eval_result_done(EvalResult *r) {
        free(r->task_name);
        free(r->profile);
        free(r->detail);
        free(r->task_id);
        free(r->state);
        free(r->breaker);
        free(r->model);
        *r = (EvalResult) {};
}

void eval_run_done(EvalRun *run) {
        free(run->dir);
        free(run->path);
        *run = (EvalRun) {};
}

_printf_(3, 4)
static void result_set(EvalResult *r, EvalOutcome o, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        r->outcome = o;
        r->passed = o == EVAL_PASSED || o == EVAL_DECLINED;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        free(r->detail);
        r->detail = s;
        if (s)
                utf8_sanitize(s, strlen(s));
}

/* ---- files ---- */

static const char *copy_dst;
static size_t copy_src_len;

static int copy_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        _cleanup_free_ char *dst = NULL;
        (void) ftw;

        if (asprintf(&dst, "%s%s", copy_dst, path + copy_src_len) < 0)
                return -ENOMEM;
        if (type == FTW_D) {
                if (mkdir(dst, 0755) < 0 && errno != EEXIST)
                        return -errno;
                return 0;
        }
        /* What is there is replaced: hidden/ laid over the delivered tree
         * wins over whatever the agent left at the same path. */
        if (unlink(dst) < 0 && errno != ENOENT && errno != EISDIR)
                return -errno;
        if (errno == EISDIR && rm_rf_at(AT_FDCWD, dst) < 0)
                return -errno;
        if (type == FTW_SL) {
                char target[PATH_MAX];
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = 0;
                return symlink(target, dst) < 0 ? -errno : 0;
        }
        if (type != FTW_F || !S_ISREG(st->st_mode))
                return 0;

        _cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0)
                return -errno;
        _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                                       (st->st_mode & 0111) ? 0755 : 0644);
        if (out < 0)
                return -errno;
        char buf[65536];
        for (;;) {
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                if (loop_write(out, buf, (size_t) n) < 0)
                        return -EIO;
        }
}

/* Copies the tree src into dst (made if missing), file modes reduced to
 * 0644 and 0755, symlinks as symlinks. Not thread-safe (nftw()). */
static int copy_tree(const char *src, const char *dst) {
        if (mkdir(dst, 0755) < 0 && errno != EEXIST)
                return -errno;
        copy_dst = dst;
        copy_src_len = strlen(src);
        return nftw(src, copy_one, 16, FTW_PHYS);
}

static int chown_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st, (void) type, (void) ftw;
        return lchown(path, GRADE_UID, GRADE_UID) < 0 ? -errno : 0;
}

/* ---- git ---- */

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_index *, git_index_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_signature *, git_signature_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_revwalk *, git_revwalk_free);

static const char *git_message(void) {
        const git_error *e = git_error_last();
        return e && e->message ? e->message : "unknown error";
}

/* dir (the task's repo/ copied) becomes a git repository with one commit,
 * made the same way each time: the same author, date and message. */
static int repo_commit(const char *dir, char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_index_freep) git_index *index = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        git_oid tree_id, commit_id;

        if (git_repository_init(&repo, dir, false) < 0 || git_repository_index(&index, repo) < 0 ||
            git_index_add_all(index, NULL, GIT_INDEX_ADD_DEFAULT, NULL, NULL) < 0 || git_index_write(index) < 0 ||
            git_index_write_tree(&tree_id, index) < 0 || git_tree_lookup(&tree, repo, &tree_id) < 0 ||
            git_signature_new(&sig, "agentfab eval", "eval@agentfab.invalid", 1700000000, 0) < 0 ||
            git_commit_create_v(&commit_id, repo, "HEAD", sig, sig, NULL, "The task's repository\n", tree, 0) < 0)
                return error_set(ret_error, -EIO, "%s", git_message());
        return 0;
}

/* Whether a person took a step in the task, as its tip records it: an
 * approval (delivery lists them as Agentfab-Approved:) or a requirement
 * amended past its first version. Eval itself approves and amends nothing,
 * but an administrator may while it waits. */
static bool tip_names_person(const char *message) {
        const char *t;

        if (strstr(message, "\nAgentfab-Approved: "))
                return true;
        t = strstr(message, "\nAgentfab-Requirement: v");
        return t && strtoul(t + strlen("\nAgentfab-Requirement: v"), NULL, 10) != 1;
}

/* The tree of branch, checked out into dir; and the first Agentfab-Model:
 * trailer on it, for the report's stamp. */
static int repo_checkout(const char *repo_dir, const char *branch, const char *dir, char **ret_model, bool *ret_person,
                         char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_commit_freep) git_commit *tip = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *walk = NULL;
        _cleanup_free_ char *ref = NULL;
        git_checkout_options opts;
        git_oid id;

        if (asprintf(&ref, "refs/heads/%s", branch) < 0)
                return -ENOMEM;
        if (git_repository_open_ext(&repo, repo_dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
            git_reference_name_to_id(&id, repo, ref) < 0 || git_commit_lookup(&tip, repo, &id) < 0 ||
            git_commit_tree(&tree, tip) < 0)
                return error_set(ret_error, -EIO, "%s", git_message());
        *ret_person = tip_names_person(strempty(git_commit_message(tip)));
        if (git_checkout_options_init(&opts, GIT_CHECKOUT_OPTIONS_VERSION) < 0)
                return -ENOMEM;
        opts.checkout_strategy = GIT_CHECKOUT_FORCE;
        opts.target_directory = dir;
        opts.disable_filters = 1;
        if (git_checkout_tree(repo, (const git_object *) tree, &opts) < 0)
                return error_set(ret_error, -EIO, "%s", git_message());

        if (git_revwalk_new(&walk, repo) < 0 || git_revwalk_push(walk, &id) < 0)
                return 0;
        for (unsigned n = 0; n < 1000 && git_revwalk_next(&id, walk) == 0; n++) {
                _cleanup_(git_commit_freep) git_commit *c = NULL;
                const char *m, *t;
                if (git_commit_lookup(&c, repo, &id) < 0 || !(m = git_commit_message(c)))
                        continue;
                if ((t = strstr(m, "\nAgentfab-Model: "))) {
                        t += strlen("\nAgentfab-Model: ");
                        *ret_model = strndup(t, strcspn(t, "\n"));
                        break;
                }
        }
        return 0;
}

/* ---- the run ---- */

int eval_run_start(EvalContext *c, EvalRun *run, EvalResult *result, const char *model) {
        _cleanup_free_ char *repo = NULL, *src = NULL, *error = NULL, *id = NULL;
        const EvalTask *t = result->task;
        int r;

        *run = (EvalRun) { .result = result, .model = model, .start_usec = now_usec() };
        result->solvable = t->solvable;
        if (asprintf(&run->dir, "%s/%03u-%s-%s-%u", c->workdir, ++c->n_started, result->profile, t->name, result->run) < 0 ||
            asprintf(&repo, "%s/repo", run->dir) < 0 || asprintf(&src, "%s/repo", t->dir) < 0)
                return -ENOMEM;
        if (mkdir(run->dir, 0700) < 0 || copy_tree(src, repo) < 0) {
                result_set(result, EVAL_ERROR, "cannot copy the task's repository: %s", strerror(errno));
                return 0;
        }
        r = repo_commit(repo, &error);
        if (r < 0) {
                result_set(result, EVAL_ERROR, "cannot make the task's repository: %s", strempty(error));
                return 0;
        }

        const SubmitRequest req = {
                .repo = repo,
                .goal = t->goal,
                .acceptance = t->acceptance,
                .test_command = t->test,
                .model = model,
                .environment = t->environment,
                .limits = t->limits,
        };
        r = submit_task_get_id(c->bus, &req, c->ask_password, true, &result->task_id, &run->path);
        if (r == EXIT_DENIED)
                return -EACCES;
        if (r != EXIT_OK) {
                result_set(result, EVAL_ERROR, "the task was not submitted (exit %d)", r);
                return 0;
        }
        run->active = run->submitted = true;
        return 0;
}

/* ---- the grading sandbox ---- */

/* SECURITY: the delivered tree is the model's work and runs only in a
 * sandbox: no network, no capabilities, never as root, nothing of the host
 * writable but the tree itself. agentfab-sandbox gives it the policy of a
 * task's commands. Where it cannot be made (a user namespace may mount no
 * proc file system where /proc is not fully visible: in a container, or
 * under the test harness, whose /proc/sys is read-only), bwrap(1) gives the
 * same but for the host's /proc, bound read-only. */
int eval_sandbox_probe(EvalContext *c) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        pid_t pid;
        int status, r;

        if (asprintf(&dir, "%s/probe", c->workdir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0755) < 0)
                return -errno;
        if (geteuid() == 0 && chown(dir, GRADE_UID, GRADE_UID) < 0)
                return -errno;
        c->sandbox_kind = EVAL_SANDBOX_AGENTFAB;
        r = eval_sandbox_argv(c, dir, 30, "true", &argv);
        if (r < 0)
                return r;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
        r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r == 0) {
                while (waitpid(pid, &status, 0) < 0)
                        if (errno != EINTR)
                                return -errno;
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                        return 0;
        }
        if (access(BWRAP_PATH, X_OK) < 0) {
                fprintf(stderr, "Cannot grade: '%s' cannot make a sandbox here, and there is no %s.\n", c->sandbox,
                        BWRAP_PATH);
                return -EOPNOTSUPP;
        }
        c->sandbox_kind = EVAL_SANDBOX_BWRAP;
        return 0;
}

static int strv_add(char ***l, const char *fmt, ...) _printf_(2, 3);
static int strv_add(char ***l, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        return strv_extend(l, s);
}

int eval_sandbox_argv(const EvalContext *c, const char *tree, unsigned timeout_sec, const char *command, char ***ret) {
        _cleanup_strv_free_ char **a = NULL;
        bool root = geteuid() == 0;
        int r = 0;

        if (c->sandbox_kind == EVAL_SANDBOX_AGENTFAB) {
                r = strv_add(&a, "%s", c->sandbox);
                if (r >= 0)
                        r = strv_add(&a, "--workspace=%s", tree);
                if (r >= 0)
                        r = strv_add(&a, "--timeout=%u", timeout_sec);
                if (r >= 0 && root)
                        r = strv_add(&a, "--uid=%d", GRADE_UID);
                if (r >= 0 && root)
                        r = strv_add(&a, "--gid=%d", GRADE_UID);
        } else {
                static const char *const top[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };

                r = strv_add(&a, "%s", TIMEOUT_PATH);
                if (r >= 0)
                        r = strv_add(&a, "--kill-after=5");
                if (r >= 0)
                        r = strv_add(&a, "%u", timeout_sec);
                if (r >= 0)
                        r = strv_add(&a, "%s", BWRAP_PATH);
                for (const char *const *x = (const char *const[]) { "--unshare-all", "--die-with-parent", "--new-session",
                                                                     "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr",
                                                                     "--ro-bind", "/etc", "/etc", "--dev", "/dev",
                                                                     "--ro-bind", "/proc", "/proc", "--tmpfs", "/tmp",
                                                                     "--tmpfs", "/run", "--clearenv", "--setenv", "PATH",
                                                                     "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME",
                                                                     "/workspace", "--setenv", "LANG", "C.UTF-8", NULL };
                     r >= 0 && *x; x++)
                        r = strv_add(&a, "%s", *x);
                /* A merged /usr has the top directories as symlinks into it. */
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(top); i++) {
                        char target[PATH_MAX];
                        ssize_t n = readlink(top[i], target, sizeof(target) - 1);
                        struct stat st;
                        if (n > 0) {
                                target[n] = 0;
                                r = strv_extend(&a, "--symlink");
                                if (r >= 0)
                                        r = strv_add(&a, "%s", target);
                                if (r >= 0)
                                        r = strv_add(&a, "%s", top[i]);
                        } else if (stat(top[i], &st) >= 0 && S_ISDIR(st.st_mode)) {
                                r = strv_extend(&a, "--ro-bind");
                                if (r >= 0)
                                        r = strv_add(&a, "%s", top[i]);
                                if (r >= 0)
                                        r = strv_add(&a, "%s", top[i]);
                        }
                }
                if (r >= 0 && root)
                        r = strv_add(&a, "--unshare-user");
                if (r >= 0 && root)
                        r = strv_add(&a, "--uid=%d", GRADE_UID);
                if (r >= 0 && root)
                        r = strv_add(&a, "--gid=%d", GRADE_UID);
                if (r >= 0)
                        r = strv_extend(&a, "--bind");
                if (r >= 0)
                        r = strv_add(&a, "%s", tree);
                if (r >= 0)
                        r = strv_add(&a, "/workspace");
                if (r >= 0)
                        r = strv_add(&a, "--chdir");
                if (r >= 0)
                        r = strv_add(&a, "/workspace");
        }
        for (const char *const *x = (const char *const[]) { "--", "/bin/sh", "-c", command, NULL }; r >= 0 && *x; x++)
                r = strv_add(&a, "%s", *x);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

/* The branch fetched, its tree checked out, hidden/ laid over it, and the
 * grading command run in a sandbox of its own: 1 if it passed, 0 if not
 * (the detail says how), or a negative errno. */
static int eval_grade(EvalContext *c, EvalRun *run) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *repo = NULL, *tree = NULL, *hidden = NULL, *branch = NULL, *log = NULL, *message = NULL;
        EvalResult *res = run->result;
        const EvalTask *t = res->task;
        int fd, r;

        if (asprintf(&repo, "%s/repo", run->dir) < 0 || asprintf(&tree, "%s/tree", run->dir) < 0 ||
            asprintf(&hidden, "%s/hidden", t->dir) < 0 || asprintf(&branch, "agentfab/%s", res->task_id) < 0 ||
            asprintf(&log, "%s/grade.log", run->dir) < 0)
                return -ENOMEM;

        r = bus_call_task_method_s(c->bus, run->path, "Export", "bundle", &error, &reply);
        if (r < 0)
                return result_set(res, EVAL_ERROR, "cannot export the branch: %s", error.message ?: strerror(-r)), 0;
        r = sd_bus_message_read(reply, "h", &fd);
        if (r < 0)
                return r;
        r = ledger_import_bundle(repo, fd, branch, 0, &message);
        if (r < 0)
                return result_set(res, EVAL_ERROR, "cannot fetch the branch: %s", message ?: strerror(-r)), 0;
        message = mfree_ptr(message);
        r = repo_checkout(repo, branch, tree, &res->model, &res->person, &message);
        if (r < 0)
                return result_set(res, EVAL_ERROR, "cannot check out the branch: %s", message ?: strerror(-r)), 0;
        if (access(hidden, F_OK) >= 0 && copy_tree(hidden, tree) < 0)
                return result_set(res, EVAL_ERROR, "cannot lay hidden/ over the tree: %s", strerror(errno)), 0;

        bool root = geteuid() == 0;
        if (root && nftw(tree, chown_one, 16, FTW_PHYS) != 0)
                return result_set(res, EVAL_ERROR, "cannot hand the tree to uid %d: %s", GRADE_UID, strerror(errno)), 0;
        _cleanup_strv_free_ char **argv = NULL;
        r = eval_sandbox_argv(c, tree, t->timeout_sec, t->grade ?: t->test, &argv);
        if (r < 0)
                return r;

        _cleanup_close_ int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log_fd < 0)
                return -errno;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int status;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, log_fd, STDOUT_FILENO);
        posix_spawn_file_actions_adddup2(&fa, log_fd, STDERR_FILENO);
        r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return result_set(res, EVAL_ERROR, "cannot run '%s': %s", argv[0], strerror(r)), 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 1;
        /* 127 from agentfab-sandbox: the sandbox, not the grade, failed. */
        bool setup = c->sandbox_kind == EVAL_SANDBOX_AGENTFAB && WIFEXITED(status) && WEXITSTATUS(status) == 127;

        /* The last line of what it printed says best what failed. */
        _cleanup_free_ char *out = NULL;
        size_t size = 0;
        char *last = NULL;
        if (read_file_at(AT_FDCWD, log, 64u << 20, &out, &size) >= 0) {
                while (size > 0 && strchr("\n\r \t", out[size - 1]))
                        out[--size] = 0;
                last = strrchr(out, '\n');
                last = last ? last + 1 : out;
        }
        if (setup && last && strneq(last, "Sandbox:", 8))
                result_set(res, EVAL_ERROR, "the grading sandbox failed: %.200s", last);
        else if (WIFEXITED(status))
                result_set(res, EVAL_TESTS, "the grade failed (exit %d): %.200s", WEXITSTATUS(status), strempty(last));
        else
                result_set(res, EVAL_TESTS, "the grade was killed by signal %d", WTERMSIG(status));
        return 0;
}

static void eval_cancel(EvalContext *c, EvalRun *run) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        (void) sd_bus_call_method(c->bus, AGENTFAB_BUS_NAME, run->path, AGENTFAB_TASK_INTERFACE, "Cancel", &error, NULL,
                                  NULL);
}

/* Why a task stopped for a person, as the report counts it. */
static EvalOutcome outcome_of_breaker(const char *breaker) {
        if (streq_ptr(breaker, "gave-up"))
                return EVAL_GAVE_UP;
        if (streq_ptr(breaker, "budget"))
                return EVAL_BUDGET;
        if (streq_ptr(breaker, "malformed-output"))
                return EVAL_MALFORMED;
        if (streq_ptr(breaker, "tests-failing"))
                return EVAL_TESTS;
        return EVAL_BREAKER;
}

static EvalOutcome outcome_of_failure(const char *reason) {
        if (!reason)
                return EVAL_ERROR;
        if (strstr(reason, "budget exhausted"))
                return EVAL_BUDGET;
        if (strstr(reason, "malformed"))
                return EVAL_MALFORMED;
        if (strstr(reason, "gave up") || strstr(reason, "cannot be done"))
                return EVAL_GAVE_UP;
        return EVAL_ERROR;
}

int eval_run_poll(EvalContext *c, EvalRun *run) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        EvalResult *res = run->result;
        TaskInfo info;
        int r;

        if (!run->active)
                return 1;
        r = task_info_get(c->bus, run->path, &reply, &info, &error);
        if (r < 0) {
                result_set(res, EVAL_ERROR, "cannot read the task: %s", error.message ?: strerror(-r));
                run->active = false;
                return 1;
        }
        res->steps = info.step;
        res->tokens = info.tokens;
        res->commands = info.commands;
        res->seconds = (double) (now_usec() - run->start_usec) / USEC_PER_SEC;
        if (free_and_strdup(&res->state, info.state) < 0)
                return -ENOMEM;
        if (!isempty(info.breaker) && free_and_strdup(&res->breaker, info.breaker) < 0)
                return -ENOMEM;

        bool waiting = streq_ptr(info.state, "awaiting-approval");
        bool ended = waiting || streq_ptr(info.state, "succeeded") || streq_ptr(info.state, "failed") ||
                     streq_ptr(info.state, "cancelled");
        if (!ended && now_usec() - run->start_usec < c->timeout_usec)
                return 0;

        run->active = false;
        if (!ended) {
                eval_cancel(c, run);
                result_set(res, EVAL_ERROR, "still %s after %" PRIu64 " s: cancelled", strempty(info.state),
                           c->timeout_usec / USEC_PER_SEC);
        } else if (waiting) {
                /* Eval approves nothing: a task that needs a person has
                 * not passed, and is cancelled so that it does not wait. */
                if (streq_ptr(info.breaker, "gave-up"))
                        result_set(res, EVAL_GAVE_UP, "%s", strempty(info.reason));
                else
                        result_set(res, outcome_of_breaker(info.breaker), "waits for approval: %s: %s",
                                   strempty(info.breaker), strempty(info.reason));
                eval_cancel(c, run);
        } else if (streq(info.state, "succeeded")) {
                r = eval_grade(c, run);
                if (r < 0)
                        return r;
                if (r > 0)
                        result_set(res, EVAL_PASSED, "delivered; the grade passed");
        } else
                result_set(res, streq(info.state, "failed") ? outcome_of_failure(info.reason) : EVAL_ERROR, "%s: %s",
                           info.state, strempty(info.reason));

        /* A task that cannot be done has one right outcome: the agent gives
         * up (finish with cannot_complete, the gave-up breaker), saying why
         * (agentfab-corpus(5)). Delivering anything is wrong, and so is
         * failing any other way. */
        if (!res->task->solvable) {
                if (res->outcome == EVAL_GAVE_UP) {
                        _cleanup_free_ char *d = TAKE_PTR(res->detail);
                        result_set(res, EVAL_DECLINED, "the right outcome: %s", strempty(d));
                } else if (res->outcome == EVAL_PASSED)
                        result_set(res, EVAL_TESTS, "succeeded at a task that cannot be done");
        }
        res->seconds = (double) (now_usec() - run->start_usec) / USEC_PER_SEC;
        return 1;
}
