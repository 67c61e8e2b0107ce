/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "environments.h"
#include "log.h"
#include "macro.h"
#include "proxy-env.h"
#include "sandbox.h"
#include "scope.h"
#include "string-util.h"

static const char *arg_workspace = NULL;
static const char *arg_chdir = NULL;
static const char *arg_unit = NULL;
static uid_t arg_uid = UID_INVALID;
static gid_t arg_gid = (gid_t) -1;
static char **arg_setenv = NULL;
static uint64_t arg_timeout_usec = UINT64_MAX;
static uint64_t arg_tmp_size = 512ULL * 1024 * 1024;
static bool arg_scope = true;
static int arg_serve_fd = -1;
static const char *arg_image = NULL;
static int arg_proxy_fd = -1;
static uint16_t arg_proxy_port = 0;
static ScopeLimits arg_limits = {
        .memory_max = 2ULL * 1024 * 1024 * 1024,
        .tasks_max = 512,
        .cpu_quota_per_sec_usec = USEC_PER_SEC, /* one CPU */
        .runtime_max_usec = UINT64_MAX,
};

#define SANDBOX_NOBODY 65534

static void help(void) {
        printf("%s [OPTIONS...] --workspace=DIR -- COMMAND [ARG...]\n\n"
               "Runs COMMAND in an agentfab task sandbox, with DIR as its only writable\n"
               "directory (/workspace, also the working directory).\n\n"
               "  -h --help               Show this help\n"
               "     --version            Show package version\n"
               "     --workspace=DIR      The workspace (required)\n"
               "     --chdir=DIR          Working directory inside the sandbox (default: /workspace)\n"
               "     --setenv=NAME=VALUE  Add to the command's (otherwise minimal) environment\n"
               "     --uid=UID --gid=GID  Run as this unprivileged user (default: the workspace's owner,\n"
               "                          or 65534 if that is root)\n"
               "     --timeout=SEC        Kill the command and everything it started after SEC\n"
               "     --memory-max=BYTES   Scope limit (default 2G)\n"
               "     --tasks-max=N        Scope limit (default 512)\n"
               "     --cpu-quota=PERCENT  Scope limit (default 100)\n"
               "     --tmp-size=BYTES     Size of /tmp (default 512M)\n"
               "     --unit=NAME          Name of the transient scope (default: agentfab-sandbox-PID.scope)\n"
               "     --no-scope           Do not create a transient scope\n"
               "     --image=DIR          The system directories from this image instead of the host's\n"
               "                          (root's, writable by nobody else; see agentfab.conf(5))\n"
               "     --serve-fd=FD        Keep the sandbox and serve exec requests on FD, a connected\n"
               "                          socket (JSON lines); instead of COMMAND\n"
               "     --proxy-fd=FD        The task's channel to agentfab-proxy(8): its commands reach the\n"
               "                          network through the egress proxy (HTTP_PROXY and the like are set)\n"
               "     --proxy-port=PORT    The proxy's port on the sandbox's loopback (default 3128)\n"
               "\nExits with COMMAND's exit status, 128+N if a signal N ended it, 127 if the\n"
               "sandbox could not be set up. See agentfab-sandbox(1).\n",
               program_invocation_short_name);
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100, ARG_WORKSPACE, ARG_CHDIR, ARG_SETENV, ARG_UID, ARG_GID, ARG_TIMEOUT,
                ARG_MEMORY_MAX, ARG_TASKS_MAX, ARG_CPU_QUOTA, ARG_TMP_SIZE, ARG_UNIT, ARG_NO_SCOPE, ARG_SERVE_FD,
                ARG_IMAGE,
                ARG_PROXY_FD, ARG_PROXY_PORT,
        };
        static const struct option options[] = {
                { "help",       no_argument,       NULL, 'h'            },
                { "version",    no_argument,       NULL, ARG_VERSION    },
                { "workspace",  required_argument, NULL, ARG_WORKSPACE  },
                { "chdir",      required_argument, NULL, ARG_CHDIR      },
                { "setenv",     required_argument, NULL, ARG_SETENV     },
                { "uid",        required_argument, NULL, ARG_UID        },
                { "gid",        required_argument, NULL, ARG_GID        },
                { "timeout",    required_argument, NULL, ARG_TIMEOUT    },
                { "memory-max", required_argument, NULL, ARG_MEMORY_MAX },
                { "tasks-max",  required_argument, NULL, ARG_TASKS_MAX  },
                { "cpu-quota",  required_argument, NULL, ARG_CPU_QUOTA  },
                { "tmp-size",   required_argument, NULL, ARG_TMP_SIZE   },
                { "unit",       required_argument, NULL, ARG_UNIT       },
                { "no-scope",   no_argument,       NULL, ARG_NO_SCOPE   },
                { "serve-fd",   required_argument, NULL, ARG_SERVE_FD   },
                { "image",      required_argument, NULL, ARG_IMAGE      },
                { "proxy-fd",   required_argument, NULL, ARG_PROXY_FD   },
                { "proxy-port", required_argument, NULL, ARG_PROXY_PORT },
                {}
        };
        uint64_t u;
        int c, r;

        /* "+": stop at the first non-option, so COMMAND's own options stay its own. */
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentfab %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_WORKSPACE:
                        arg_workspace = optarg;
                        break;
                case ARG_CHDIR:
                        if (optarg[0] != '/') {
                                log_error("--chdir= needs an absolute path inside the sandbox.");
                                return -EINVAL;
                        }
                        arg_chdir = optarg;
                        break;
                case ARG_SETENV:
                        if (!strchr(optarg, '=') || optarg[0] == '=') {
                                log_error("--setenv= needs NAME=VALUE.");
                                return -EINVAL;
                        }
                        if (strv_extend(&arg_setenv, optarg) < 0)
                                return log_oom();
                        break;
                case ARG_UID:
                case ARG_GID:
                        if (safe_atou64(optarg, &u) < 0 || u >= UINT32_MAX) {
                                log_error("Invalid id '%s'.", optarg);
                                return -EINVAL;
                        }
                        if (c == ARG_UID)
                                arg_uid = (uid_t) u;
                        else
                                arg_gid = (gid_t) u;
                        break;
                case ARG_TIMEOUT:
                        if (parse_sec(optarg, &arg_timeout_usec) < 0 || arg_timeout_usec == 0) {
                                log_error("Invalid timeout '%s'.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_MEMORY_MAX:
                        if (parse_size(optarg, &arg_limits.memory_max) < 0) {
                                log_error("Invalid size '%s'.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_TASKS_MAX:
                        if (safe_atou64(optarg, &arg_limits.tasks_max) < 0 || arg_limits.tasks_max == 0) {
                                log_error("Invalid number of tasks '%s'.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_CPU_QUOTA:
                        if (safe_atou64(optarg, &u) < 0 || u == 0 || u > 100 * 1024) {
                                log_error("Invalid CPU quota '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg_limits.cpu_quota_per_sec_usec = u * USEC_PER_SEC / 100;
                        break;
                case ARG_TMP_SIZE:
                        if (parse_size(optarg, &arg_tmp_size) < 0 || arg_tmp_size == 0) {
                                log_error("Invalid size '%s'.", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_UNIT:
                        arg_unit = optarg;
                        break;
                case ARG_NO_SCOPE:
                        arg_scope = false;
                        break;
                case ARG_SERVE_FD:
                        if (safe_atou64(optarg, &u) < 0 || u < 3 || u > INT32_MAX || fcntl((int) u, F_GETFD) < 0) {
                                log_error("--serve-fd= needs an open file descriptor above 2.");
                                return -EINVAL;
                        }
                        arg_serve_fd = (int) u;
                        break;
                case ARG_IMAGE: {
                        _cleanup_free_ char *why = NULL;
                        r = environment_image_check(optarg, &why);
                        if (r < 0) {
                                log_error("Refusing --image='%s': %s", optarg, why ?: strerror(-r));
                                return -EINVAL;
                        }
                        arg_image = optarg;
                        break;
                }
                case ARG_PROXY_FD:
                        if (safe_atou64(optarg, &u) < 0 || u < 3 || u > INT32_MAX || fcntl((int) u, F_GETFD) < 0) {
                                log_error("--proxy-fd= needs an open file descriptor above 2.");
                                return -EINVAL;
                        }
                        arg_proxy_fd = (int) u;
                        break;
                case ARG_PROXY_PORT:
                        if (safe_atou64(optarg, &u) < 0 || u == 0 || u > 65535) {
                                log_error("Invalid port '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg_proxy_port = (uint16_t) u;
                        break;
                default:
                        return -EINVAL;
                }

        if (!arg_workspace) {
                log_error("--workspace= is required.");
                return -EINVAL;
        }
        if (optind >= argc && arg_serve_fd < 0) {
                log_error("No command given.");
                return -EINVAL;
        }
        if (optind < argc && arg_serve_fd >= 0) {
                log_error("--serve-fd= takes no command: commands come as requests.");
                return -EINVAL;
        }
        return 1;
}

static int write_file(const char *path, const char *text) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, text, strlen(text)) != (ssize_t) strlen(text))
                return -errno;
        return 0;
}

static int write_id_maps(pid_t pid, uid_t uid, gid_t gid) {
        char path[64], map[64];
        int r;

        snprintf(path, sizeof(path), "/proc/%i/setgroups", (int) pid);
        r = write_file(path, "deny");
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%i/gid_map", (int) pid);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) gid, (unsigned) gid);
        r = write_file(path, map);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%i/uid_map", (int) pid);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) uid, (unsigned) uid);
        return write_file(path, map);
}

static volatile sig_atomic_t timed_out = 0;
static volatile pid_t child_pid = 0;

static void on_alarm(int sig) {
        (void) sig;
        timed_out = 1;
        if (child_pid > 0)
                (void) kill(child_pid, SIGKILL); /* PID 1 of the namespace: takes everything with it */
}

static void on_terminate(int sig) {
        if (child_pid > 0)
                (void) kill(child_pid, sig);
}

/* Whether there is to be a scope: root, with systemd as the system manager. */
static bool want_scope(void) {
        if (!arg_scope)
                return false;
        if (geteuid() != 0 || !scope_manager_booted()) {
                log_debug("No system manager to create a scope with, running without one.");
                return false;
        }
        return true;
}

/* The connection to the system manager is made after the clone, so that
 * the sandbox's processes are made without libsystemd in their address
 * space (it is loaded only then); its socket is connected before, so that
 * systemd accepts and sets it up while the kernel makes the namespaces and
 * we load libsystemd. NULL (and no error) when there is no manager. */
static sd_bus *open_scope_bus(int fd) {
        sd_bus *bus = NULL;
        int r;

        /* systemd's private socket reaches PID 1 directly, without the bus
         * daemon's extra hop (root only, as systemctl does it); the system
         * bus is the fallback. */
        r = scope_bus_open(fd, &bus);
        if (r < 0) {
                log_warning_errno(r, "No system manager reachable, running without a scope: %m");
                return NULL;
        }
        sandbox_trace("parent: bus open");
        return bus;
}

static int create_scope(int fd, pid_t pid, sd_bus **ret_bus) {
        _cleanup_(scope_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char unit[128], description[256];
        int r;

        sd_bus *bus = *ret_bus = open_scope_bus(fd);
        if (!bus)
                return 0;

        if (arg_unit)
                snprintf(unit, sizeof(unit), "%s", arg_unit);
        else
                snprintf(unit, sizeof(unit), "agentfab-sandbox-%i.scope", (int) pid);
        snprintf(description, sizeof(description), "agentfab sandbox for %s", arg_workspace);

        if (arg_timeout_usec != UINT64_MAX)
                arg_limits.runtime_max_usec = arg_timeout_usec;
        r = scope_start(bus, unit, description, pid, &arg_limits, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to create scope '%s': %s", unit, error.message ?: strerror(-r));
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_(scope_bus_closep) sd_bus *bus = NULL;
        _cleanup_close_ int bus_fd = -EBADF;
        _cleanup_strv_free_ char **env = NULL;
        int sync_pipe[2], error_pipe[2], r;
        struct stat st;

        sandbox_trace_init();
        sandbox_trace("parent: main");

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        _cleanup_close_ int workspace_fd = open(arg_workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (workspace_fd < 0) {
                log_error_errno(errno, "Failed to open workspace '%s': %m", arg_workspace);
                return 127;
        }
        if (fstat(workspace_fd, &st) < 0)
                return 127;

        bool userns = geteuid() != 0;
        SandboxConfig config = {
                .workspace_fd = workspace_fd,
                .userns = userns,
                .argv = argv + optind,
                .cwd = arg_chdir,
                .seccomp = &seccomp_builtin_program,
                .tmp_size = arg_tmp_size,
                .serve_fd = arg_serve_fd,
                .image = arg_image,
                .cache_fd = -EBADF,
                .history_fd = -EBADF,
                .proxy_fd = arg_proxy_fd,
                .proxy_port = arg_proxy_port,
        };
        if (userns) {
                /* Unprivileged: the sandbox's user is the caller, mapped to itself. */
                if ((arg_uid != UID_INVALID && arg_uid != getuid()) || (arg_gid != (gid_t) -1 && arg_gid != getgid())) {
                        log_error("Only root may choose another user.");
                        return 2;
                }
                config.uid = getuid();
                config.gid = getgid();
        } else {
                config.uid = arg_uid != UID_INVALID ? arg_uid : st.st_uid != 0 ? st.st_uid : SANDBOX_NOBODY;
                config.gid = arg_gid != (gid_t) -1 ? arg_gid : arg_uid != UID_INVALID ? (gid_t) arg_uid :
                             st.st_uid != 0 ? st.st_gid : SANDBOX_NOBODY;
        }
        if (config.uid == 0 || config.gid == 0) {
                log_error("Commands never run as root in a sandbox.");
                return 2;
        }

        if (arg_proxy_fd >= 0) {
                /* The proxy's variables first, so that --setenv= may override them. */
                _cleanup_strv_free_ char **pe = proxy_environment(arg_proxy_port);
                if (!pe)
                        return log_oom(), 127;
                for (char **s = arg_setenv; s && *s; s++)
                        if (strv_extend(&pe, *s) < 0)
                                return log_oom(), 127;
                strv_free(arg_setenv);
                arg_setenv = TAKE_PTR(pe);
        }
        env = sandbox_environment(arg_setenv);
        if (!env)
                return log_oom(), 127;
        config.envp = env;

        if (pipe2(sync_pipe, O_CLOEXEC) < 0 || pipe2(error_pipe, O_CLOEXEC) < 0) {
                log_error_errno(errno, "Failed to create pipes: %m");
                return 127;
        }
        /* SECURITY: the child gets a copy of this socket; it closes it with
         * all other fds before anything of the task runs. */
        bool scope = want_scope();
        if (scope)
                bus_fd = scope_connect_private(); /* on failure, the bus is tried after the clone */

        fflush(stdout);
        fflush(stderr);

        sandbox_trace("parent: clone");
        pid_t pid = (pid_t) syscall(SYS_clone, sandbox_clone_flags(userns) | SIGCHLD, NULL, NULL, NULL, NULL);
        if (pid < 0) {
                log_error_errno(errno, "Failed to create the sandbox namespaces: %m");
                return 127;
        }
        if (pid == 0) {
                safe_close(sync_pipe[1]);
                safe_close(error_pipe[0]);
                sandbox_child(&config, sync_pipe[0], error_pipe[1]);
        }
        child_pid = pid;
        if (arg_serve_fd >= 0)
                safe_close(arg_serve_fd); /* the sandbox's now; its end tells the client when it is gone */
        if (arg_proxy_fd >= 0)
                safe_close(arg_proxy_fd); /* likewise: the proxy ends the task when the sandbox's copy closes */
        safe_close(sync_pipe[0]);
        safe_close(error_pipe[1]);

        struct sigaction sa = { .sa_handler = on_terminate };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sa.sa_handler = on_alarm;
        sigaction(SIGALRM, &sa, NULL);

        sandbox_trace("parent: cloned");
        r = userns ? write_id_maps(pid, config.uid, config.gid) : 0;
        if (r < 0)
                log_error_errno(r, "Failed to write the user namespace's id maps: %m");
        else if (write(sync_pipe[1], "x", 1) != 1) /* first go: build the sandbox */
                r = -errno;
        else if (scope)
                r = create_scope(TAKE_FD(bus_fd), pid, &bus);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return 127;
        }

        sandbox_trace("parent: in scope");
        /* Second go: only now, inside its limits, may the command start. */
        if (write(sync_pipe[1], "x", 1) != 1) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return 127;
        }
        safe_close(sync_pipe[1]);
        /* Done with the system manager: not kept while the command runs. */
        bus = scope_bus_close(bus);

        if (arg_timeout_usec != UINT64_MAX)
                alarm((unsigned) ((arg_timeout_usec + USEC_PER_SEC - 1) / USEC_PER_SEC));

        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        log_error_errno(errno, "Failed to wait for the sandbox: %m");
                        return 127;
                }
        alarm(0);
        sandbox_trace("parent: sandbox exited");

        char msg[512];
        ssize_t n = read(error_pipe[0], msg, sizeof(msg) - 1);
        safe_close(error_pipe[0]);
        if (n > 0) {
                msg[n] = '\0';
                log_error("Sandbox: %s", msg);
                return 127;
        }

        if (timed_out)
                log_error("Command timed out after %llu s and was killed with everything it started.",
                          (unsigned long long) (arg_timeout_usec / USEC_PER_SEC));
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return 127;
}
