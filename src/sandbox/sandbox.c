/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-service.h"
#include "macro.h"
#include "proxy-env.h"
#include "sandbox.h"
#include "socket-util.h"
#include "string-util.h"

/* Everything here runs in the freshly cloned child: no allocation, no stdio
 * buffers shared with the parent, errors as text on error_fd. */

#define NEW_ROOT "/tmp"

static int error_fd_global = -1;

_printf_(1, 2) __attribute__((noreturn))
static void die(const char *fmt, ...) {
        char buf[512];
        va_list ap;
        int saved = errno;

        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 64, fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        if ((size_t) n > sizeof(buf) - 64)
                n = sizeof(buf) - 64;
        if (saved)
                n += snprintf(buf + n, sizeof(buf) - (size_t) n, ": %s", strerror(saved));
        if (error_fd_global >= 0)
                (void) !write(error_fd_global, buf, (size_t) n);
        _exit(127);
}

static uint64_t trace_base_ns = 0; /* 0: no trace */

static uint64_t trace_now_ns(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

void sandbox_trace_init(void) {
        const char *e = getenv("AGENTFAB_SANDBOX_TRACE");
        uint64_t base;

        if (!e)
                return;
        if (safe_atou64(e, &base) < 0 || base == 0 || base > trace_now_ns())
                base = trace_now_ns();
        trace_base_ns = base;
}

void sandbox_trace(const char *what) {
        char buf[128];

        if (trace_base_ns == 0)
                return;
        uint64_t d = trace_now_ns() - trace_base_ns;
        int n = snprintf(buf, sizeof(buf), "trace: +%3llu.%03llu ms [%i] %s\n",
                         (unsigned long long) (d / 1000000), (unsigned long long) (d / 1000 % 1000),
                         (int) getpid(), what);
        if (n > 0)
                (void) !write(STDERR_FILENO, buf, MIN((size_t) n, sizeof(buf) - 1));
}

unsigned long sandbox_clone_flags(bool userns) {
        /* The network namespace, the one that is expensive to make (about
         * half a millisecond), is not among them: the child makes it
         * itself (sandbox_child()), so that the parent has the pid, and can
         * ask for the scope, that much earlier. */
        return CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP |
                (userns ? CLONE_NEWUSER : 0);
}

static int mount_setattr_(int dfd, const char *path, unsigned flags, struct mount_attr *attr) {
        return (int) syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}

/* Makes path and every mount below it read-only, nosuid, nodev. */
static void make_read_only(const char *path) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        };
        if (mount_setattr_(AT_FDCWD, path, AT_RECURSIVE | AT_SYMLINK_NOFOLLOW, &attr) < 0)
                die("Failed to make '%s' read-only", path);
}

static void bind_read_only(const char *source, const char *target) {
        if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0)
                die("Failed to bind '%s'", source);
        make_read_only(target);
}

static void mkdir_p_in_root(const char *path) {
        char buf[256];

        snprintf(buf, sizeof(buf), NEW_ROOT "%s", path);
        for (char *p = buf + strlen(NEW_ROOT) + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        (void) mkdir(buf, 0755);
                        *p = '/';
                }
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                die("Failed to create '%s'", path);
}

static void tmpfs_at(const char *path, const char *options, unsigned long flags) {
        char target[256];

        mkdir_p_in_root(path);
        snprintf(target, sizeof(target), NEW_ROOT "%s", path);
        if (mount("tmpfs", target, "tmpfs", flags, options) < 0)
                die("Failed to mount tmpfs on '%s'", path);
}

/* The system directories, read-only, of the host or of the environment's
 * image (root); symlinks (merged /usr) copied as symlinks. */
static void setup_system(const char *root) {
        static const char *const dirs[] = { "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
        char source[4096], target[256], link[256];
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(source, sizeof(source), "%s%s", root ?: "", dirs[i]);
                if (lstat(source, &st) < 0)
                        continue;
                snprintf(target, sizeof(target), NEW_ROOT "%s", dirs[i]);
                if (S_ISLNK(st.st_mode)) {
                        ssize_t n = readlink(source, link, sizeof(link) - 1);
                        if (n < 0)
                                die("Failed to read link '%s'", source);
                        link[n] = '\0';
                        if (symlink(link, target) < 0)
                                die("Failed to create link '%s'", dirs[i]);
                } else if (S_ISDIR(st.st_mode)) {
                        mkdir_p_in_root(dirs[i]);
                        bind_read_only(source, target);
                }
        }

        /* SECURITY: the service's own configuration and credentials are not
         * part of the system a task sees: hidden under empty read-only tmpfs. */
        static const char *const masked[] = { "/etc/agentfab", "/etc/credstore", "/etc/credstore.encrypted", "/etc/ssh" };
        for (size_t i = 0; i < ELEMENTSOF(masked); i++) {
                snprintf(target, sizeof(target), NEW_ROOT "%s", masked[i]);
                if (lstat(target, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                if (mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0755") < 0)
                        die("Failed to hide '%s'", masked[i]);
        }
}

/* The fd belongs to the parent's mount namespace, from which nothing can be
 * bound here: clone the same path's mount tree in our copy of it, before
 * the new root hides that path, and check that it is the very directory the
 * parent opened. */
static int clone_directory(int dir_fd, const char *what) {
        char proc[64], path[4096];
        struct stat want, got;

        snprintf(proc, sizeof(proc), "/proc/self/fd/%i", dir_fd);
        ssize_t n = readlink(proc, path, sizeof(path) - 1);
        if (n < 0)
                die("Failed to resolve the %s", what);
        path[n] = '\0';
        if (fstat(dir_fd, &want) < 0)
                die("Failed to stat the %s", what);

        int tree = (int) syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (tree < 0)
                die("Failed to clone the %s mount '%s'", what, path);
        if (fstat(tree, &got) < 0 || got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
                errno = 0;
                die("The %s changed while the sandbox was set up", what);
        }
        return tree;
}

/* Mounts a cloned tree (the workspace, the cache) writable at target, or
 * (the history) read-only. */
static void setup_tree(const SandboxConfig *c, int tree, const char *target, const char *what, bool read_only) {
        char path[256];

        /* The task's own uid owns what agentfab owns on disk, here only. */
        if (c->idmap) {
                struct mount_attr idmap = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) c->idmap_userns_fd };
                if (mount_setattr_(tree, "", AT_EMPTY_PATH, &idmap) < 0) {
                        if (errno == EINVAL)
                                die("The %s's file system does not support idmapped mounts, which give the task "
                                    "its own uid (it needs ext4, xfs, btrfs or tmpfs; not overlayfs or NFS)", what);
                        die("Failed to map the %s to the task's uid", what);
                }
        }
        mkdir_p_in_root(target);
        snprintf(path, sizeof(path), NEW_ROOT "%s", target);
        if (syscall(SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                die("Failed to mount the %s", what);
        safe_close(tree);
        /* SECURITY: read-only is the mount's, not the files' modes: the
         * task's uid owns them through the idmap. */
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC : 0),
        };
        if (mount_setattr_(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, &attr) < 0)
                die("Failed to restrict the %s mount", what);
}

static void setup_dev(void) {
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
        char target[64], source[64];

        tmpfs_at("/dev", "mode=0755,size=64k", MS_NOSUID | MS_NOEXEC);
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                snprintf(source, sizeof(source), "/dev/%s", nodes[i]);
                snprintf(target, sizeof(target), NEW_ROOT "/dev/%s", nodes[i]);
                int fd = open(target, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd < 0)
                        die("Failed to create '%s'", target);
                safe_close(fd);
                if (mount(source, target, NULL, MS_BIND, NULL) < 0)
                        die("Failed to bind '%s'", source);
        }

        mkdir_p_in_root("/dev/pts");
        if (mount("devpts", NEW_ROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
                die("Failed to mount devpts");
        if (symlink("pts/ptmx", NEW_ROOT "/dev/ptmx") < 0 ||
            symlink("/proc/self/fd", NEW_ROOT "/dev/fd") < 0 ||
            symlink("/proc/self/fd/0", NEW_ROOT "/dev/stdin") < 0 ||
            symlink("/proc/self/fd/1", NEW_ROOT "/dev/stdout") < 0 ||
            symlink("/proc/self/fd/2", NEW_ROOT "/dev/stderr") < 0)
                die("Failed to create links in /dev");
        tmpfs_at("/dev/shm", "mode=1777,size=64m", MS_NOSUID | MS_NODEV);
}

static void setup_proc(void) {
        static const char *const read_only[] = { "sys", "sysrq-trigger", "irq", "bus", "fs", "kcore", "timer_list" };
        char target[64];
        struct stat st;

        mkdir_p_in_root("/proc");
        if (mount("proc", NEW_ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                die("Failed to mount /proc");

        /* SECURITY: what of /proc reaches the kernel, not the task's own processes, is read-only. */
        for (size_t i = 0; i < ELEMENTSOF(read_only); i++) {
                snprintf(target, sizeof(target), NEW_ROOT "/proc/%s", read_only[i]);
                if (lstat(target, &st) < 0)
                        continue;
                if (mount(target, target, NULL, MS_BIND | MS_REC, NULL) < 0)
                        die("Failed to bind '%s'", target);
                make_read_only(target);
        }
}

static void setup_root(const SandboxConfig *c) {
        char options[64];

        /* Nothing we mount from here on may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die("Failed to make mounts private");
        sandbox_trace("child: mounts private");

        int workspace = clone_directory(c->workspace_fd, "workspace");
        int cache = c->cache_fd >= 0 ? clone_directory(c->cache_fd, "cache") : -EBADF;
        int history = c->history_fd >= 0 ? clone_directory(c->history_fd, "history") : -EBADF;
        sandbox_trace("child: workspace cloned");

        /* The image is opened before the new root may hide its path (the
         * new root is mounted on /tmp) and bound through its fd. */
        char image_root[64] = "";
        if (c->image) {
                int image_fd = open(c->image, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (image_fd < 0)
                        die("Failed to open the image '%s'", c->image);
                snprintf(image_root, sizeof(image_root), "/proc/self/fd/%i", image_fd);
        }

        if (mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
                die("Failed to mount the new root");

        setup_system(c->image ? image_root : NULL);
        sandbox_trace("child: system dirs bound");
        setup_tree(c, workspace, SANDBOX_WORKSPACE, "workspace", false);
        if (cache >= 0)
                setup_tree(c, cache, SANDBOX_CACHE, "cache", false);
        if (history >= 0)
                setup_tree(c, history, SANDBOX_HISTORY, "history", true);

        snprintf(options, sizeof(options), "mode=1777,size=%llu", (unsigned long long) c->tmp_size);
        tmpfs_at("/tmp", options, MS_NOSUID | MS_NODEV);
        tmpfs_at("/run", "mode=0755,size=16m", MS_NOSUID | MS_NODEV);
        mkdir_p_in_root("/var");
        if (symlink("../tmp", NEW_ROOT "/var/tmp") < 0)
                die("Failed to create /var/tmp");
        sandbox_trace("child: workspace, tmp, run");
        setup_dev();
        sandbox_trace("child: dev");
        setup_proc();
        sandbox_trace("child: proc");

        /* Swap the roots; the old one is stacked below and detached. */
        if (chdir(NEW_ROOT) < 0)
                die("Failed to enter the new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                die("Failed to pivot into the new root");
        if (umount2(".", MNT_DETACH) < 0)
                die("Failed to detach the old root");
        if (chdir("/") < 0)
                die("Failed to enter /");

        /* The root itself (its directories and links) is read-only too. */
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                die("Failed to make / read-only");
        sandbox_trace("child: pivoted, root read-only");
}

static void setup_network(void) {
        struct ifreq ifr = {};

        /* SECURITY: before anything else is set up, and long before anything
         * of the task runs, the sandbox leaves the host's network. */
        if (unshare(CLONE_NEWNET) < 0)
                die("Failed to create the network namespace");

        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("Failed to open a socket");
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                die("Failed to read flags of lo");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                die("Failed to bring lo up");

        if (sethostname("agentfab-sandbox", strlen("agentfab-sandbox")) < 0)
                die("Failed to set the host name");
}

/* The forwarder of the egress proxy: a listening socket on the sandbox's
 * own loopback, handed over the task's channel to agentfab-proxy, which
 * accepts the commands' connections on it itself. Nothing of the proxy
 * runs in here, so no command can stop, trace or starve it, and no byte
 * is copied through the sandbox. The channel stays open in PID 1 (and in
 * nothing else: close-on-exec) for the sandbox's life: its closing ends
 * the task's proxy state. */
static void setup_proxy_listener(const SandboxConfig *c) {
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_port = htons(c->proxy_port ?: AGENTFAB_PROXY_PORT),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };

        if (fcntl(c->proxy_fd, F_SETFD, FD_CLOEXEC) < 0)
                die("Failed to set close-on-exec on the proxy channel");
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("Failed to open the forwarder's socket");
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                die("Failed to bind the forwarder to 127.0.0.1:%u", (unsigned) ntohs(sa.sin_port));
        if (listen(fd, 128) < 0)
                die("Failed to listen on the forwarder's socket");

        if (socket_send_fds(c->proxy_fd, "L", 1, &fd, 1, 0) != 1)
                die("Failed to hand the forwarder's socket to the proxy");
        /* Our copy goes: only the proxy accepts on it. */
}

static void drop_privileges(const SandboxConfig *c) {
        /* Everything the process could ever gain goes first, while we may still drop it. */
        for (unsigned long cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        die("Failed to drop capability %lu from the bounding set", cap);

        if (!c->userns && setgroups(0, NULL) < 0)
                die("Failed to drop supplementary groups");
        if (setresgid(c->gid, c->gid, c->gid) < 0)
                die("Failed to change group");
        if (setresuid(c->uid, c->uid, c->uid) < 0)
                die("Failed to change user");

        /* A non-root uid has no effective capabilities left; clear the rest explicitly. */
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        if (syscall(SYS_capset, &h, d) < 0)
                die("Failed to clear capabilities");
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                die("Failed to clear ambient capabilities");

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                die("Failed to set no_new_privs");
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                die("Failed to clear dumpable");
}

void sandbox_exec_command(char **argv, char **envp) {
        const char *path = "/usr/local/bin:/usr/bin:/bin";
        char buf[4096];

        if (strchr(argv[0], '/')) {
                execve(argv[0], argv, envp);
                return;
        }
        for (char **e = envp; *e; e++)
                if (strneq(*e, "PATH=", 5))
                        path = *e + 5;

        int saved = ENOENT;
        for (const char *p = path; *p;) {
                size_t l = strcspn(p, ":");
                if (l > 0 && l + 1 + strlen(argv[0]) < sizeof(buf)) {
                        memcpy(buf, p, l);
                        buf[l] = '/';
                        strcpy(buf + l + 1, argv[0]);
                        execve(buf, argv, envp);
                        if (errno != ENOENT && errno != ENOTDIR)
                                saved = errno;
                }
                p += l;
                if (*p == ':')
                        p++;
        }
        errno = saved;
}

static int compare_int(const void *a, const void *b) {
        return *(const int *) a - *(const int *) b;
}

static void close_all_but(int *keep, size_t n) {
        int next = 3;

        qsort(keep, n, sizeof(int), compare_int);
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < next)
                        continue;
                if (keep[i] > next)
                        (void) syscall(SYS_close_range, next, keep[i] - 1, 0);
                next = keep[i] + 1;
        }
        (void) syscall(SYS_close_range, next, ~0U, 0);
}

static pid_t main_pid = 0;

static void forward_signal(int sig) {
        if (main_pid > 0)
                (void) kill(-main_pid, sig);
}

void sandbox_child(const SandboxConfig *c, int sync_fd, int error_fd) {
        char b;

        error_fd_global = error_fd;
        sandbox_trace("child: cloned");

        /* Die with the parent (bubblewrap's --die-with-parent). The parent
         * says go twice: once our user namespace's id maps are written (at
         * once without one), so that we may build the sandbox; and once we
         * are in our scope, so that the command may run. Building overlaps
         * with systemd's work on the scope; nothing of the task runs before
         * the second go. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                die("Failed to set parent death signal");
        if (read(sync_fd, &b, 1) != 1)
                _exit(127); /* the parent went away or refused */

        sandbox_trace("child: go 1");

        setup_network();
        if (c->proxy_fd > 2)
                setup_proxy_listener(c);
        sandbox_trace("child: network, hostname");
        setup_root(c);
        drop_privileges(c);
        sandbox_trace("child: privileges dropped");

        /* The kernel forgets the parent death signal when the uid changes:
         * set it again, or a sandbox would outlive a launcher killed with
         * SIGKILL, and with it the uid lock that the launcher holds, so that
         * another task could be given the same uid. Had the parent died
         * before this point, its end of the error pipe is closed: look. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                die("Failed to set parent death signal");
        struct pollfd pfd = { .fd = error_fd, .events = POLLOUT };
        if (poll(&pfd, 1, 0) < 0 || (pfd.revents & (POLLERR | POLLHUP)))
                _exit(127);

        /* Only stdin, stdout, stderr, our error pipe, the go pipe, the
         * exec service's connection and the proxy channel survive. */
        int keep[] = { sync_fd, error_fd, c->serve_fd, c->proxy_fd > 2 ? c->proxy_fd : -1 };
        close_all_but(keep, ELEMENTSOF(keep));

        if (seccomp_program_load(c->seccomp) < 0)
                die("Failed to load the seccomp filter");
        sandbox_trace("child: fds closed, seccomp loaded; waiting for go 2");

        if (read(sync_fd, &b, 1) != 1)
                _exit(127);
        sandbox_trace("child: go 2");
        safe_close(sync_fd);

        if (c->serve_fd >= 0) {
                safe_close(error_fd); /* set up: from here on, errors are replies */
                exec_service_run(c, c->serve_fd);
        }

        /* We are PID 1 of the sandbox: run the command as a child, reap
         * everything, forward termination signals, and leave with the
         * command's status. When we leave, the kernel kills whatever else is
         * left in the namespace: nothing outlives the command.
         *
         * The command is started with vfork(): no copy of our address space
         * to make and throw away again at its execve(). Until then it only
         * touches its own stack frame (on ours), its signal dispositions and
         * working directory (not shared with us), and ends with execve() or
         * _exit(). */
        pid_t pid = vfork();
        if (pid < 0)
                die("Failed to fork the command");
        if (pid == 0) {
                (void) setsid();
                if (chdir(c->cwd ?: SANDBOX_WORKSPACE) < 0)
                        die("Failed to change to '%s'", c->cwd ?: SANDBOX_WORKSPACE);
                signal(SIGPIPE, SIG_DFL);
                sandbox_trace("command: execve");
                sandbox_exec_command(c->argv, c->envp);
                die("Failed to execute '%s'", c->argv[0]);
        }
        main_pid = pid;
        safe_close(error_fd);

        struct sigaction sa = { .sa_handler = forward_signal };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        for (;;) {
                int status;
                pid_t p = waitpid(-1, &status, 0);
                if (p < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(127);
                }
                if (p != main_pid)
                        continue;
                if (WIFEXITED(status))
                        _exit(WEXITSTATUS(status));
                _exit(128 + WTERMSIG(status));
        }
}

char **sandbox_environment(char **extra) {
        _cleanup_strv_free_ char **env = NULL;

        /* SECURITY: nothing of the caller's environment (a unit's, a user's):
         * only what is declared. */
        if (strv_extend(&env, "PATH=/usr/local/bin:/usr/bin:/bin") < 0 ||
            strv_extend(&env, "HOME=" SANDBOX_WORKSPACE) < 0 ||
            strv_extend(&env, "LANG=C.UTF-8") < 0)
                return NULL;
        for (char **s = extra; s && *s; s++)
                if (strv_env_set(&env, *s) < 0)
                        return NULL;
        return TAKE_PTR(env);
}
