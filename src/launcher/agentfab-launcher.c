/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/magic.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "cgroup-freeze.h"
#include "environments.h"
#include "io-util.h"
#include "json-util.h"
#include "launcher-request.h"
#include "log.h"
#include "macro.h"
#include "proxy-env.h"
#include "sandbox.h"
#include "scope.h"
#include "string-util.h"
#include "task-uid.h"
#include "time-util.h"

/* The privileged launcher: one instance per connection (Accept=yes), the
 * connection is fd 3. It reads one request, checks all of it, makes the
 * sandbox and its scope, says "ready", and from then on the connection is
 * the sandbox's exec service (exec-service.h): when it closes, the sandbox
 * and its scope end, and so does this instance. */

#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202 /* not in every linux/magic.h */
#endif

#define AGENTFAB_USER "agentfab"
#define REQUEST_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define JOB_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define SCOPE_PREFIX "agentfab-task-"
#define SCOPE_SUFFIX ".scope"

static LauncherLimits arg_maxima = LAUNCHER_LIMITS_DEFAULT;
static uint64_t arg_tmp_size = 512ULL << 20;
static const char *arg_config = ENVIRONMENTS_CONFIG_FILE;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "The privileged launcher of agentfab task sandboxes. Started by\n"
               "agentfab-launcher.socket, one instance per connection (fd 3).\n\n"
               "  -h --help                  Show this help\n"
               "     --version               Show package version\n"
               "     --max-memory=BYTES      Largest MemoryMax= granted (default 2G)\n"
               "     --max-tasks=N           Largest TasksMax= granted (default 512)\n"
               "     --max-cpu-quota=PERCENT Largest CPUQuota= granted (default 100)\n"
               "     --max-runtime=SEC       Largest RuntimeMaxSec= granted (default none)\n"
               "     --tmp-size=BYTES        Size of each sandbox's /tmp (default 512M)\n"
               "\nSee agentfab-launcher(8).\n",
               program_invocation_short_name);
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_MAX_MEMORY, ARG_MAX_TASKS, ARG_MAX_CPU, ARG_MAX_RUNTIME, ARG_TMP_SIZE };
        static const struct option options[] = {
                { "help",          no_argument,       NULL, 'h'             },
                { "version",       no_argument,       NULL, ARG_VERSION     },
                { "max-memory",    required_argument, NULL, ARG_MAX_MEMORY  },
                { "max-tasks",     required_argument, NULL, ARG_MAX_TASKS   },
                { "max-cpu-quota", required_argument, NULL, ARG_MAX_CPU     },
                { "max-runtime",   required_argument, NULL, ARG_MAX_RUNTIME },
                { "tmp-size",      required_argument, NULL, ARG_TMP_SIZE    },
                {}
        };
        uint64_t u;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentfab %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_MAX_MEMORY:
                case ARG_TMP_SIZE:
                        r = parse_size(optarg, &u);
                        if (r < 0 || u == 0) {
                                log_error("Invalid size '%s'.", optarg);
                                return -EINVAL;
                        }
                        if (c == ARG_MAX_MEMORY)
                                arg_maxima.memory_max = u;
                        else
                                arg_tmp_size = u;
                        break;
                case ARG_MAX_TASKS:
                case ARG_MAX_CPU:
                        if (safe_atou64(optarg, &u) < 0 || u == 0 || (c == ARG_MAX_CPU && u > 100 * 1024)) {
                                log_error("Invalid number '%s'.", optarg);
                                return -EINVAL;
                        }
                        if (c == ARG_MAX_TASKS)
                                arg_maxima.tasks_max = u;
                        else
                                arg_maxima.cpu_quota_percent = u;
                        break;
                case ARG_MAX_RUNTIME:
                        if (parse_sec(optarg, &u) < 0 || u == 0) {
                                log_error("Invalid time '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg_maxima.runtime_max_sec = u == UINT64_MAX ? UINT64_MAX : MAX(u / USEC_PER_SEC, 1u);
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("No arguments expected.");
                return -EINVAL;
        }
        return 1;
}

static int send_line(int fd, json_object *j) {
        _cleanup_free_ char *line = NULL;

        if (asprintf(&line, "%s\n", json_to_line(j)) < 0)
                return -ENOMEM;
        for (size_t n = strlen(line), done = 0; done < n;) {
                /* MSG_NOSIGNAL: a peer that went away is an error, not SIGPIPE. */
                ssize_t k = send(fd, line + done, n - done, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) k;
        }
        return 0;
}

static int reply_error(int fd, const char *message) {
        _cleanup_json_ json_object *j = json_object_new_object();

        if (!j || json_add_string(j, "type", "error") < 0 || json_add_string(j, "message", message) < 0)
                return -ENOMEM;
        return send_line(fd, j);
}

static int lookup_agentfab(uid_t *ret_uid) {
        struct passwd *pw;

        errno = 0;
        pw = getpwnam(AGENTFAB_USER);
        if (!pw)
                return errno > 0 ? -errno : -ESRCH;
        if (pw->pw_uid == 0)
                return -EPERM;
        *ret_uid = pw->pw_uid;
        return 0;
}

/* SECURITY: the socket's mode (0660 root:agentfab) already keeps others
 * out; the peer's credentials are checked anyway, so that a mistake in the
 * unit, a group membership or an inherited fd does not open the launcher
 * to anyone but the daemon and root. */
static int check_peer(int fd, uid_t agentfab_uid, struct ucred *ret) {
        struct ucred cred;
        socklen_t l = sizeof(cred);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0)
                return -errno;
        *ret = cred;
        if (cred.uid != 0 && cred.uid != agentfab_uid)
                return -EPERM;
        return 0;
}

/* Reads exactly one line (never a byte of what follows it: that belongs to
 * the exec service) and the fds that came with it. The kernel stops a
 * stream read at a message that carries fds, so peeking shows at most up
 * to there; then exactly what was peeked, up to the newline, is read for
 * real, with the fds. */
/* The workspace, then the cache, the history and the proxy channel when the request names them. */
#define REQUEST_FDS_MAX 4   /* as the client sends (LAUNCHER_FDS_MAX) */

static int read_request(int fd, char *buf, size_t max, size_t *ret_len, int ret_fds[static REQUEST_FDS_MAX],
                        size_t *ret_n_fds) {
        _cleanup_close_ int passed0 = -EBADF, passed1 = -EBADF, passed2 = -EBADF, passed3 = -EBADF;
        int *passed[REQUEST_FDS_MAX] = { &passed0, &passed1, &passed2, &passed3 };
        size_t n_passed = 0;
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + REQUEST_TIMEOUT_USEC;
        size_t len = 0;
        bool extra_fds = false;

        for (;;) {
                int r = fd_wait_readable(fd, deadline);
                if (r < 0)
                        return r;

                ssize_t k = recv(fd, buf + len, max - len, MSG_PEEK | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -ECONNRESET;
                char *nl = memchr(buf + len, '\n', (size_t) k);
                size_t want = nl ? (size_t) (nl - (buf + len)) + 1 : (size_t) k;

                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(sizeof(int) * 8)];
                } control = {};
                struct iovec iov = { .iov_base = buf + len, .iov_len = want };
                struct msghdr mh = {
                        .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = &control, .msg_controllen = sizeof(control),
                };
                k = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (mh.msg_flags & MSG_CTRUNC)
                        extra_fds = true;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                                continue;
                        int fds[8];
                        size_t nfds = MIN((c->cmsg_len - CMSG_LEN(0)) / sizeof(int), ELEMENTSOF(fds));
                        memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
                        for (size_t i = 0; i < nfds; i++) {
                                if (n_passed < REQUEST_FDS_MAX && !extra_fds)
                                        *passed[n_passed++] = fds[i];
                                else {
                                        safe_close(fds[i]);
                                        extra_fds = true;
                                }
                        }
                }
                len += (size_t) k;
                if (memchr(buf, '\n', len))
                        break;
                if (len >= max)
                        return -E2BIG;
        }

        /* SECURITY: at most four fds; never keep some of more. */
        if (extra_fds)
                return -ETOOMANYREFS;
        *ret_len = len - 1; /* without the newline */
        ret_fds[0] = TAKE_FD(passed0);
        ret_fds[1] = TAKE_FD(passed1);
        ret_fds[2] = TAKE_FD(passed2);
        ret_fds[3] = TAKE_FD(passed3);
        *ret_n_fds = n_passed;
        return 0;
}

/* SECURITY: the workspace becomes the sandbox's only writable directory,
 * bind-mounted by root: it must be a directory that belongs to the
 * agentfab user, i.e. one the daemon made, never a directory of the host's
 * system (root's) nor another user's. */
/* A directory the sandbox mounts (what: "workspace", "cache" or "history"):
 * the agentfab user's, on a real file system. The message is the
 * launcher's own buffer, good until the next call (one request a process). */
static const char *check_workspace(int fd, uid_t agentfab_uid, struct stat *ret, const char *what) {
        static char msg[128];
        struct stat st;

        if (fd < 0)
                return snprintf(msg, sizeof(msg), "a sandbox request needs the %s directory fd (SCM_RIGHTS)", what), msg;
        if (fstat(fd, &st) < 0)
                return snprintf(msg, sizeof(msg), "cannot stat the %s fd", what), msg;
        if (!S_ISDIR(st.st_mode))
                return snprintf(msg, sizeof(msg), "the %s fd is not a directory", what), msg;
        if (st.st_uid == 0 || st.st_uid != agentfab_uid)
                return snprintf(msg, sizeof(msg), "the %s is not owned by the agentfab user", what), msg;
        if (st.st_gid == 0)
                return snprintf(msg, sizeof(msg), "the %s's group is root", what), msg;

        /* SECURITY: kernel interfaces are owned by the agentfab user too
         * (/proc/PID of the daemon, its cgroup): never a workspace. */
        static const long pseudo[] = {
                PROC_SUPER_MAGIC, SYSFS_MAGIC, CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, DEVPTS_SUPER_MAGIC,
                DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC, BPF_FS_MAGIC, NSFS_MAGIC, MQUEUE_MAGIC,
                PSTOREFS_MAGIC, EFIVARFS_MAGIC,
        };
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0)
                return snprintf(msg, sizeof(msg), "cannot stat the %s's file system", what), msg;
        for (size_t i = 0; i < ELEMENTSOF(pseudo); i++)
                if ((long) sf.f_type == pseudo[i])
                        return snprintf(msg, sizeof(msg), "the %s is on a kernel file system", what), msg;
        *ret = st;
        return NULL;
}

/* SECURITY: the egress proxy's channel (agentfab-proxy(8)) is what the
 * sandbox's PID 1 sends its forwarder's listening socket over, and holds
 * until it ends: a connected AF_UNIX SOCK_SEQPACKET socket, as the proxy
 * makes them, and nothing else (no file, no socket of another kind whose
 * peer could read what is sent). */
static const char *check_proxy_channel(int fd) {
        struct stat st;
        int v;
        socklen_t l = sizeof(v);

        if (fstat(fd, &st) < 0)
                return "cannot stat the proxy channel fd";
        if (!S_ISSOCK(st.st_mode))
                return "the proxy channel fd is not a socket";
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_UNIX)
                return "the proxy channel is not an AF_UNIX socket";
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_SEQPACKET)
                return "the proxy channel is not a SOCK_SEQPACKET socket";
        struct sockaddr_un peer;
        l = sizeof(peer);
        if (getpeername(fd, (struct sockaddr *) &peer, &l) < 0)
                return "the proxy channel is not connected";
        return NULL;
}

static volatile pid_t child_pid = 0;

static void on_terminate(int sig) {
        (void) sig;
        /* The sandbox's PID 1 ignores signals it has no handler for, from
         * outside as well: only SIGKILL ends it. */
        if (child_pid > 0)
                (void) kill(child_pid, SIGKILL);
}

static void kill_and_reap(pid_t pid) {
        (void) kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

/* Waits until the sandbox has closed its error pipe (it does when it starts
 * serving) or wrote why it could not be set up. Returns NULL or the reason. */
static const char *wait_setup(int error_fd, pid_t pid, char *msg, size_t size) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + REQUEST_TIMEOUT_USEC;
        size_t len = 0;

        for (;;) {
                int r = fd_wait_readable(error_fd, deadline);
                if (r == -ETIMEDOUT)
                        return "timed out setting up the sandbox";
                if (r < 0)
                        return "cannot wait for the sandbox";
                ssize_t k = read(error_fd, msg + len, size - 1 - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k > 0) {
                        len += (size_t) k;
                        if (len < size - 1)
                                continue;
                }
                break;
        }
        msg[len] = '\0';
        if (len > 0)
                return msg;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
                child_pid = 0;
                return "the sandbox ended during its setup";
        }
        return NULL;
}

/* Takes fd over once the sandbox is ready. */
/* SECURITY: the daemon names an environment; its image comes from our own
 * reading of the configuration, never from the request, and is checked at
 * every start (an administrator may have broken it since). */
static int find_image(int fd, const LauncherRequest *req, char **ret_image) {
        _cleanup_(environments_done) Environments envs = {};
        _cleanup_free_ char *why = NULL, *message = NULL;
        const Environment *e;
        int r;

        *ret_image = NULL;
        r = environments_load(&envs, arg_config, false);
        if (r < 0)
                return log_error_errno(r, "Failed to read '%s': %m", arg_config), reply_error(fd, "cannot read the configuration");
        e = environments_find(&envs, isempty(req->environment) ? ENVIRONMENT_DEFAULT : req->environment);
        if (!e)
                return reply_error(fd, "unknown environment");
        if (!e->image)
                return 0;
        r = environment_image_check(e->image, &why);
        if (r < 0) {
                if (asprintf(&message, "environment '%s': %s", e->name, why ?: strerror(-r)) < 0)
                        return log_oom();
                log_error("Refusing the sandbox of task '%s': %s", req->task, message);
                return reply_error(fd, message);
        }
        *ret_image = strdup(e->image);
        return *ret_image ? 1 : log_oom();
}

static int run_sandbox(int fd, const LauncherRequest *req, int workspace_fd, int cache_fd, int history_fd,
                       int proxy_fd, const struct stat *st) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_ int sync_r = -EBADF, sync_w = -EBADF, error_r = -EBADF, error_w = -EBADF;
        _cleanup_close_ int uid_lock_fd = -EBADF, idmap_fd = -EBADF;
        char unit[64], description[128], msg[512];
        int pipes[2], r;

        snprintf(unit, sizeof(unit), SCOPE_PREFIX "%s" SCOPE_SUFFIX, req->task);
        snprintf(description, sizeof(description), "agentfab sandbox of task %s", req->task);

        r = scope_bus_open(-EBADF, &bus);
        if (r < 0) {
                log_error_errno(r, "Failed to connect to the system manager: %m");
                return reply_error(fd, "cannot reach the system manager");
        }

        /* A scope of this name can only be left over from a sandbox whose
         * daemon crashed (while it lives, the daemon never asks twice): stop
         * it, so that no two sandboxes of one task ever run. */
        r = scope_stop(bus, unit, JOB_TIMEOUT_USEC, &error);
        if (r < 0) {
                log_error_errno(r, "Failed to stop stale scope '%s': %s", unit, error.message ?: strerror(-r));
                return reply_error(fd, "cannot stop the task's stale scope");
        }
        if (r > 0)
                log_notice("Stopped stale scope '%s' before making a new sandbox for task '%s'.", unit, req->task);

        env = sandbox_environment(req->env);
        if (!env)
                return log_oom();
        if (proxy_fd >= 0) {
                /* Where the commands find the network: the forwarder on
                 * their own loopback. The daemon's variables may not
                 * point them elsewhere. */
                _cleanup_strv_free_ char **pe = proxy_environment(AGENTFAB_PROXY_PORT);
                if (!pe)
                        return log_oom();
                for (char **v = pe; *v; v++)
                        if (strv_env_set(&env, *v) < 0)
                                return log_oom();
        }

        if (history_fd >= 0) {
                /* git in /workspace answers from the task's history,
                 * mounted read-only: the ledger's own config, hooks and
                 * index are read, never run or written, and its owner (the
                 * task's uid through the idmap) is not questioned. */
                static const char *const git_env[] = {
                        "GIT_DIR=" SANDBOX_HISTORY,
                        "GIT_WORK_TREE=" SANDBOX_WORKSPACE,
                        "GIT_OPTIONAL_LOCKS=0",
                        "GIT_CONFIG_COUNT=4",
                        "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
                        "GIT_CONFIG_KEY_1=core.hooksPath", "GIT_CONFIG_VALUE_1=/dev/null",
                        "GIT_CONFIG_KEY_2=core.fsmonitor", "GIT_CONFIG_VALUE_2=false",
                        "GIT_CONFIG_KEY_3=core.checkStat", "GIT_CONFIG_VALUE_3=minimal",
                };
                for (size_t i = 0; i < ELEMENTSOF(git_env); i++)
                        if (strv_env_set(&env, git_env[i]) < 0)
                                return log_oom();
        }

        _cleanup_free_ char *image = NULL;
        r = find_image(fd, req, &image);
        if (r < 0)
                return r;

        /* SECURITY: commands run as a uid of the task's own, never root, never
         * agentfab (whose workspace they see as theirs through an idmapped
         * mount), without capabilities. The id is ours as long as we live,
         * which is as long as the sandbox does. */
        uid_t task_uid;
        uid_lock_fd = task_uid_acquire(TASK_UID_LOCK_DIR, req->task, &task_uid);
        if (uid_lock_fd < 0) {
                log_error_errno(uid_lock_fd, "Failed to find a free uid for task '%s' in %u-%u: %m",
                                req->task, (unsigned) TASK_UID_MIN, (unsigned) TASK_UID_MAX);
                return reply_error(fd, uid_lock_fd == -EBUSY ? "every task uid is in use" : "cannot allocate a task uid");
        }
        r = task_uid_idmap_userns(st->st_uid, st->st_gid, task_uid, &idmap_fd);
        if (r < 0) {
                log_error_errno(r, "Failed to make the id map of task '%s': %m", req->task);
                return reply_error(fd, "cannot map the workspace to the task's uid");
        }

        SandboxConfig config = {
                .workspace_fd = workspace_fd,
                .uid = task_uid,
                .gid = (gid_t) task_uid,
                .idmap = true,
                .idmap_userns_fd = idmap_fd,
                .userns = false,
                .envp = env,
                .seccomp = &seccomp_builtin_program,
                .tmp_size = arg_tmp_size,
                .serve_fd = fd,
                .image = image,
                .cache_fd = cache_fd,
                .history_fd = history_fd,
                .proxy_fd = proxy_fd,
                .proxy_port = AGENTFAB_PROXY_PORT,
        };

        if (pipe2(pipes, O_CLOEXEC) < 0)
                return log_error_errno(errno, "Failed to create a pipe: %m");
        sync_r = pipes[0], sync_w = pipes[1];
        if (pipe2(pipes, O_CLOEXEC) < 0)
                return log_error_errno(errno, "Failed to create a pipe: %m");
        error_r = pipes[0], error_w = pipes[1];
        fflush(stdout);
        fflush(stderr);

        pid_t pid = (pid_t) syscall(SYS_clone, sandbox_clone_flags(false) | SIGCHLD, NULL, NULL, NULL, NULL);
        if (pid < 0) {
                log_error_errno(errno, "Failed to create the sandbox namespaces: %m");
                return reply_error(fd, "cannot create the sandbox namespaces");
        }
        if (pid == 0) {
                /* SECURITY: our stdout/stderr are the unit's journal stream;
                 * the sandbox's PID 1 gets /dev/null instead. */
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                        _exit(127);
                safe_close(sync_w);
                safe_close(error_r);
                sandbox_child(&config, sync_r, error_w);
        }
        child_pid = pid;
        sync_r = safe_close(sync_r);
        idmap_fd = safe_close(idmap_fd);
        error_w = safe_close(error_w);

        struct sigaction sa = { .sa_handler = on_terminate };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        /* First go: build the sandbox while systemd makes the scope. */
        if (write(sync_w, "x", 1) != 1) {
                kill_and_reap(pid);
                return reply_error(fd, "the sandbox did not start");
        }

        ScopeLimits limits = {
                .memory_max = req->limits.memory_max,
                .tasks_max = req->limits.tasks_max,
                .cpu_quota_per_sec_usec = req->limits.cpu_quota_percent >= UINT64_MAX / USEC_PER_SEC ? UINT64_MAX :
                                          req->limits.cpu_quota_percent * USEC_PER_SEC / 100,
                /* Beyond what microseconds can hold is no limit at all. */
                .runtime_max_usec = req->limits.runtime_max_sec >= UINT64_MAX / USEC_PER_SEC ? UINT64_MAX :
                                    req->limits.runtime_max_sec * USEC_PER_SEC,
        };
        r = scope_start(bus, unit, description, pid, &limits, &error);
        if (r < 0) {
                log_error_errno(r, "Failed to create scope '%s': %s", unit, error.message ?: strerror(-r));
                kill_and_reap(pid);
                return reply_error(fd, "cannot create the task's scope");
        }

        /* Second go: it is inside its limits; nothing ran before this. A
         * sandbox that failed its setup meanwhile has said why. */
        if (write(sync_w, "x", 1) != 1) {
                sync_w = safe_close(sync_w);
                const char *why = wait_setup(error_r, pid, msg, sizeof(msg));
                log_error("Sandbox of task '%s' could not be set up: %s", req->task, why ?: "it did not start");
                if (child_pid > 0)
                        kill_and_reap(pid);
                return reply_error(fd, why ?: "the sandbox did not start");
        }
        sync_w = safe_close(sync_w);

        const char *failed = wait_setup(error_r, pid, msg, sizeof(msg));
        if (failed) {
                log_error("Sandbox of task '%s' could not be set up: %s", req->task, failed);
                if (child_pid > 0)
                        kill_and_reap(pid);
                return reply_error(fd, failed);
        }

        /* "ready" goes out before the peer may send its first command, and
         * the sandbox only ever answers commands: nothing is interleaved. */
        _cleanup_json_ json_object *j = json_object_new_object();
        if (!j || json_add_string(j, "type", "ready") < 0 || json_add_string(j, "unit", unit) < 0 ||
            json_add_uint64(j, "pid", (uint64_t) pid) < 0 || json_add_uint64(j, "uid", (uint64_t) task_uid) < 0) {
                kill_and_reap(pid);
                return log_oom();
        }
        r = send_line(fd, j);
        if (r < 0) {
                log_warning_errno(r, "Peer of task '%s' went away before the sandbox was ready: %m", req->task);
                kill_and_reap(pid);
                return r;
        }
        log_info("Sandbox of task '%s' ready in '%s' (pid %i, uid %u, MemoryMax=%llu TasksMax=%llu CPUQuota=%llu%%%s).",
                 req->task, unit, (int) pid, (unsigned) task_uid, (unsigned long long) req->limits.memory_max,
                 (unsigned long long) req->limits.tasks_max, (unsigned long long) req->limits.cpu_quota_percent,
                 req->clamped ? ", clamped to the maxima" : "");

        /* From here the connection is the sandbox's alone: once the peer
         * closes it, the sandbox ends, its scope empties and goes, and so do
         * we; and once the sandbox ends (its scope was stopped, say), the
         * peer sees the connection close, as we hold no copy of it. */
        (void) close(fd);
        bus = sd_bus_flush_close_unref(bus);

        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return log_error_errno(errno, "Failed to wait for the sandbox: %m");
        child_pid = 0;
        log_info("Sandbox of task '%s' ended (%s %i).", req->task,
                 WIFEXITED(status) ? "status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
}

static int run_reap(int fd, const LauncherRequest *req) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_strv_free_ char **units = NULL;
        _cleanup_json_ json_object *j = json_object_new_object(), *reaped = json_object_new_array();
        int r;

        if (!j || !reaped)
                return log_oom();

        r = scope_bus_open(-EBADF, &bus);
        if (r < 0) {
                log_error_errno(r, "Failed to connect to the system manager: %m");
                return reply_error(fd, "cannot reach the system manager");
        }
        r = scope_list(bus, SCOPE_PREFIX "*" SCOPE_SUFFIX, &units, &error);
        if (r < 0) {
                log_error_errno(r, "Failed to list task scopes: %s", error.message ?: strerror(-r));
                return reply_error(fd, "cannot list the task scopes");
        }

        for (char **u = units; *u; u++) {
                char id[AGENTFAB_TASK_ID_LEN + 1] = "";
                size_t n = strlen(*u);
                bool keep = false;

                if (n == strlen(SCOPE_PREFIX) + AGENTFAB_TASK_ID_LEN + strlen(SCOPE_SUFFIX)) {
                        memcpy(id, *u + strlen(SCOPE_PREFIX), AGENTFAB_TASK_ID_LEN);
                        for (char **k = req->keep; *k; k++)
                                if (streq(*k, id))
                                        keep = true;
                }
                if (keep)
                        continue;

                sd_bus_error_free(&error);
                r = scope_stop(bus, *u, JOB_TIMEOUT_USEC, &error);
                if (r < 0) {
                        log_warning_errno(r, "Failed to stop stale scope '%s', ignoring: %s", *u, error.message ?: strerror(-r));
                        continue;
                }
                if (r == 0)
                        continue; /* gone meanwhile */
                log_notice("Stopped stale scope '%s' (reap).", *u);
                if (json_object_array_add(reaped, json_object_new_string(*u)) < 0)
                        return log_oom();
        }

        if (json_add_string(j, "type", "reaped") < 0 || json_object_object_add(j, "units", json_object_get(reaped)) < 0)
                return log_oom();
        return send_line(fd, j);
}

/* Freeze or thaw the sandbox behind pidfd: systemd's FreezeUnit() where
 * the unit supports it, else the scope's cgroup v2 cgroup.freeze. The scope
 * is the one the kernel names for the pidfd's process, and must be the
 * task's; nothing the peer names is a path. Replies "frozen"/"thawed" with
 * the way it was done and how long it took, or an error with both reasons. */
static int run_freezer(int fd, const LauncherRequest *req, int pidfd) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL, *reason = NULL;
        bool freeze = req->type == LAUNCHER_REQUEST_FREEZE;
        const char *why = NULL, *method;
        uint64_t start = clock_now_usec(CLOCK_MONOTONIC);
        int r;

        if (pidfd < 0)
                return reply_error(fd, "a freeze or thaw request needs the sandbox's pidfd (SCM_RIGHTS)");
        r = cgroup_task_path_of_pidfd(pidfd, req->task, &path, &why);
        if (r < 0) {
                log_warning("Refused to %s task '%s': %s", freeze ? "freeze" : "thaw", req->task, why);
                return reply_error(fd, why);
        }
        const char *unit = strrchr(path, '/') + 1;

        r = scope_bus_open(-EBADF, &bus);
        if (r >= 0)
                r = scope_freeze(bus, unit, freeze, &error);
        if (r >= 0)
                method = "systemd";
        else {
                /* systemd 252 on a hybrid hierarchy: "Unit ... does not
                 * support freezing". The kernel's freezer does. */
                log_debug("%s of '%s' through systemd failed (%s); using cgroup.freeze.", freeze ? "Freeze" : "Thaw",
                          unit, error.message ?: strerror(-r));
                r = cgroup_freeze_path(path, freeze, &why);
                if (r < 0) {
                        if (asprintf(&reason, "cannot %s the sandbox: systemd: %s; cgroup v2: %s", freeze ? "freeze" : "thaw",
                                     error.message ?: strerror(-r), why) < 0)
                                return log_oom();
                        log_error("Task '%s': %s", req->task, reason);
                        return reply_error(fd, reason);
                }
                method = "cgroup";
        }

        uint64_t usec = clock_now_usec(CLOCK_MONOTONIC) - start;
        log_info("%s '%s' (%s, %llu us).", freeze ? "Froze" : "Thawed", unit, method, (unsigned long long) usec);
        _cleanup_json_ json_object *j = json_object_new_object();
        if (!j || json_add_string(j, "type", freeze ? "frozen" : "thawed") < 0 || json_add_string(j, "method", method) < 0 ||
            json_add_uint64(j, "usec", usec) < 0)
                return log_oom();
        return send_line(fd, j);
}

int main(int argc, char *argv[]) {
        _cleanup_close_ int workspace_fd = -EBADF, cache_fd = -EBADF, history_fd = -EBADF, proxy_fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        int fds[REQUEST_FDS_MAX] = { -EBADF, -EBADF, -EBADF, -EBADF };
        size_t n_fds = 0;
        LauncherRequest req = {};
        const char *error;
        struct ucred peer = {};
        uid_t agentfab_uid;
        struct stat st;
        size_t len = 0;
        int fd, r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

        /* A peer that goes away must not kill us before we cleaned up. */
        signal(SIGPIPE, SIG_IGN);

        r = sd_listen_fds(true);
        if (r != 1) {
                log_error("Expected exactly one connection from socket activation (Accept=yes), got %i.", r);
                return EXIT_FAILURE;
        }
        fd = SD_LISTEN_FDS_START;

        r = lookup_agentfab(&agentfab_uid);
        if (r < 0) {
                log_error_errno(r, "Cannot look up user '%s': %m", AGENTFAB_USER);
                (void) reply_error(fd, "launcher misconfigured");
                return EXIT_FAILURE;
        }
        r = check_peer(fd, agentfab_uid, &peer);
        if (r < 0) {
                log_warning_errno(r, "Refusing a peer that is neither root nor '%s' (pid %i, uid %u): %m",
                                  AGENTFAB_USER, (int) peer.pid, (unsigned) peer.uid);
                (void) reply_error(fd, "permission denied");
                return EXIT_FAILURE;
        }

        buf = malloc(LAUNCHER_REQUEST_MAX + 1);
        if (!buf)
                return log_oom(), EXIT_FAILURE;
        r = read_request(fd, buf, LAUNCHER_REQUEST_MAX, &len, fds, &n_fds);
        workspace_fd = fds[0];
        if (r < 0) {
                for (size_t k = 1; k < REQUEST_FDS_MAX; k++)
                        safe_close(fds[k]);
                error = r == -E2BIG ? "request too long" :
                        r == -ETOOMANYREFS ? "at most four fds may come with a request" :
                        r == -ETIMEDOUT ? "timed out waiting for the request" : NULL;
                if (error)
                        log_warning("Refused request from pid %i: %s", (int) peer.pid, error);
                else
                        log_warning_errno(r, "Failed to read a request from pid %i: %m", (int) peer.pid);
                (void) reply_error(fd, error ?: "cannot read the request");
                return EXIT_FAILURE;
        }

        r = launcher_request_parse(buf, len, &arg_maxima, &req, &error);
        if (r >= 0) {
                /* The fds are taken by position: the workspace, then the
                 * cache if the request names one, the history if it asks
                 * for it, then the proxy channel if it asks for one. */
                size_t k = 1;
                if (req.cache && k < n_fds)
                        cache_fd = TAKE_FD(fds[k++]);
                if (req.history && k < n_fds)
                        history_fd = TAKE_FD(fds[k++]);
                if (req.proxy && k < n_fds)
                        proxy_fd = TAKE_FD(fds[k++]);
                for (; k < REQUEST_FDS_MAX; k++)
                        if (fds[k] >= 0) {
                                fds[k] = safe_close(fds[k]);
                                error = "more fds came than the request names (one fd, the workspace's, and the cache's, the history's and the proxy channel's only if it names them)";
                        }
                if (error) {
                        log_warning("Refused request from pid %i: %s", (int) peer.pid, error);
                        (void) reply_error(fd, error);
                        launcher_request_done(&req);
                        return EXIT_FAILURE;
                }
        } else {
                for (size_t k = 1; k < REQUEST_FDS_MAX; k++)
                        safe_close(fds[k]);
        }
        if (r < 0) {
                log_warning("Refused request from pid %i: %s", (int) peer.pid, error);
                (void) reply_error(fd, error);
                return EXIT_FAILURE;
        }
        buf = mfree_ptr(buf);

        struct stat cache_st, history_st;
        if (req.type == LAUNCHER_REQUEST_REAP) {
                workspace_fd = safe_close(workspace_fd);
                cache_fd = safe_close(cache_fd);
                history_fd = safe_close(history_fd);
                proxy_fd = safe_close(proxy_fd);
                r = run_reap(fd, &req);
        } else if (IN_SET(req.type, LAUNCHER_REQUEST_FREEZE, LAUNCHER_REQUEST_THAW)) {
                /* The fd that came with it is the sandbox's pidfd here; nothing else may come. */
                if (cache_fd >= 0 || history_fd >= 0) {
                        (void) reply_error(fd, "a freeze or thaw request takes one fd, the sandbox's pidfd");
                        r = -EPERM;
                } else
                        r = run_freezer(fd, &req, workspace_fd);
        } else if ((error = check_workspace(workspace_fd, agentfab_uid, &st, "workspace")) ||
                   (req.cache && cache_fd < 0 && (error = "the request names a cache but no cache fd came")) ||
                   (req.proxy && proxy_fd < 0 && (error = "the request names a proxy channel but no fd came for it")) ||
                   (req.history && history_fd < 0 && (error = "the request names a history but no fd came for it")) ||
                   (cache_fd >= 0 && (error = check_workspace(cache_fd, agentfab_uid, &cache_st, "cache"))) ||
                   (history_fd >= 0 && (error = check_workspace(history_fd, agentfab_uid, &history_st, "history"))) ||
                   (proxy_fd >= 0 && (error = check_proxy_channel(proxy_fd)))) {
                log_warning("Refused sandbox request for task '%s' from pid %i: %s", req.task, (int) peer.pid, error);
                (void) reply_error(fd, error);
                r = -EPERM;
        } else if (cache_fd >= 0 && (cache_st.st_uid != st.st_uid || cache_st.st_gid != st.st_gid)) {
                (void) reply_error(fd, "the cache and the workspace have different owners");
                r = -EPERM;
        } else if (history_fd >= 0 && (history_st.st_uid != st.st_uid || history_st.st_gid != st.st_gid)) {
                (void) reply_error(fd, "the history and the workspace have different owners");
                r = -EPERM;
        } else
                r = run_sandbox(fd, &req, workspace_fd, cache_fd, history_fd, proxy_fd, &st);

        launcher_request_done(&req);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
