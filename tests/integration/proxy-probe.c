/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Drives agentfab-proxy the way agentfabd will: through the client library,
 * over the real control socket. Reads one request a line on stdin:
 *
 *   register TASK MODE [ENTRY...]    register; prints "registered" or "error ERRNO REASON"
 *   allow TASK ENTRY...              prints "allowed" or "error ..."
 *   unregister TASK                  prints "unregistered" or "error ..."
 *   run TASK SHELL-COMMAND           runs /bin/sh -c SHELL-COMMAND with TASK's channel as fd 3;
 *                                    prints "exit N", then every event that came ("event ...")
 *   close TASK                       closes our copy of TASK's channel
 *   limits MAXCONN MAXBYTES IDLESEC  limits of the next registrations
 *   sleep MS                         waits (for the proxy to see a channel close)
 *
 * With --as=USER (run as root), the control connection is made as USER
 * (SO_PEERCRED records the effective uid at connect()) and the commands
 * run as root: as in agentfab, where agentfabd registers the task and the
 * root launcher makes its sandbox.
 *
 * Used by tests/integration/proxy.sh; not installed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proxy-client.h"
#include "string-util.h"

#define TASKS_MAX 16

static struct {
        char id[PROXY_TASK_ID_MAX + 1];
        int channel;
} tasks[TASKS_MAX];

static int *channel_of(const char *id) {
        for (size_t i = 0; i < TASKS_MAX; i++)
                if (streq(tasks[i].id, id))
                        return &tasks[i].channel;
        return NULL;
}

static void print_events(ProxyClient *c, int wait_ms) {
        ProxyEvent e;
        int r;

        /* The proxy sends an event before it answers the client, so it is
         * there once the command ended; a short wait covers scheduling. */
        struct pollfd p = { .fd = proxy_client_fd(c), .events = POLLIN };
        (void) poll(&p, 1, wait_ms);
        while ((r = proxy_client_next_event(c, &e)) > 0) {
                printf("event %s %s %s %s %u %s %s\n", e.task, proxy_mode_to_string(e.mode),
                       proxy_refusal_kind_to_string(e.kind), e.host[0] ? e.host : "-", (unsigned) e.port,
                       e.address ?: "-", e.reason);
                proxy_event_done(&e);
        }
        if (r < 0)
                printf("events: %s\n", strerror(-r));
}

int main(int argc, char *argv[]) {
        _cleanup_(proxy_client_freep) ProxyClient *c = NULL;
        ProxyLimits limits = {};
        char line[4096];
        int r;

        setvbuf(stdout, NULL, _IOLBF, 0);
        const char *as = argc > 1 && strneq(argv[1], "--as=", 5) ? argv[1] + 5 : NULL;
        if (as) {
                struct passwd *pw = getpwnam(as);
                if (!pw || setresgid((gid_t) -1, pw->pw_gid, (gid_t) -1) < 0 ||
                    setresuid((uid_t) -1, pw->pw_uid, (uid_t) -1) < 0) {
                        printf("error cannot become '%s'\n", as);
                        return 1;
                }
                argc--, argv++;
        }
        r = proxy_client_connect(argc > 1 ? argv[1] : NULL, &c);
        if (as && (setresuid((uid_t) -1, 0, (uid_t) -1) < 0 || setresgid((gid_t) -1, 0, (gid_t) -1) < 0)) {
                printf("error cannot become root again\n");
                return 1;
        }
        if (r < 0) {
                printf("error %d cannot connect: %s\n", -r, strerror(-r));
                return 1;
        }
        printf("connected\n");

        while (fgets(line, sizeof(line), stdin)) {
                _cleanup_strv_free_ char **words = NULL;
                line[strcspn(line, "\n")] = '\0';
                char *rest = NULL, *verb = strtok_r(line, " ", &rest);
                if (!verb)
                        continue;

                if (streq(verb, "run")) {
                        char *id = strtok_r(NULL, " ", &rest);
                        int *ch = id ? channel_of(id) : NULL;
                        if (!ch || *ch < 0) {
                                printf("error no channel\n");
                                continue;
                        }
                        fflush(stdout);
                        pid_t pid = fork();
                        if (pid == 0) {
                                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                                if (dup2(*ch, 3) < 0 || null < 0 || dup2(null, 0) < 0)
                                        _exit(126);
                                execl("/bin/sh", "sh", "-c", rest, NULL);
                                _exit(127);
                        }
                        int status = 0;
                        (void) waitpid(pid, &status, 0);
                        printf("exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                        print_events(c, 300);
                        continue;
                }

                for (char *w; (w = strtok_r(NULL, " ", &rest));)
                        if (strv_extend(&words, w) < 0)
                                return 1;
                size_t n = strv_length(words);
                _cleanup_free_ char *error = NULL;

                if (streq(verb, "limits") && n == 3) {
                        limits.max_connections = (unsigned) strtoul(words[0], NULL, 10);
                        limits.max_bytes = strtoull(words[1], NULL, 10);
                        limits.idle_timeout_usec = strtoull(words[2], NULL, 10) * USEC_PER_SEC;
                        printf("limits set\n");
                } else if (streq(verb, "register") && n >= 2) {
                        size_t i;
                        for (i = 0; i < TASKS_MAX && tasks[i].id[0]; i++)
                                ;
                        int fd = -EBADF;
                        r = proxy_client_register(c, words[0], proxy_mode_from_string(words[1]), words + 2, &limits,
                                                  &fd, &error);
                        if (r < 0)
                                printf("error %d %s\n", -r, error ?: strerror(-r));
                        else if (i == TASKS_MAX)
                                printf("error too many tasks in the probe\n");
                        else {
                                snprintf(tasks[i].id, sizeof(tasks[i].id), "%s", words[0]);
                                tasks[i].channel = fd;
                                printf("registered\n");
                        }
                } else if (streq(verb, "allow") && n >= 2) {
                        r = proxy_client_allow(c, words[0], words + 1, &error);
                        if (r < 0)
                                printf("error %d %s\n", -r, error ?: strerror(-r));
                        else
                                printf("allowed\n");
                } else if (streq(verb, "unregister") && n == 1) {
                        r = proxy_client_unregister(c, words[0]);
                        if (r < 0)
                                printf("error %d %s\n", -r, strerror(-r));
                        else
                                printf("unregistered\n");
                } else if (streq(verb, "close") && n == 1) {
                        int *ch = channel_of(words[0]);
                        if (ch)
                                *ch = safe_close(*ch);
                        printf("closed\n");
                } else if (streq(verb, "sleep") && n == 1) {
                        (void) usleep((useconds_t) MIN(strtoul(words[0], NULL, 10), 10000UL) * 1000);
                        printf("slept\n");
                } else if (streq(verb, "events")) {
                        print_events(c, 500);
                } else
                        printf("error unknown request '%s'\n", verb);
        }
        return 0;
}
