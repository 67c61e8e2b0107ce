/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "macro.h"
#include "polkit-agent.h"

static pid_t agent_pid = 0;

/* Like systemctl: when we may ask and sit on a terminal, run pkttyagent for
 * our own process, so that an auth_admin check can prompt right here.
 *
 * --fallback (let a session's graphical agent go first) only inside a logind
 * session: polkitd 122 ignores a fallback agent when the subject has no
 * session at all (get_authentication_agent_for_subject() gives up before it
 * considers the fallback), so on a console without a session the agent must
 * register as the process's own. */
void polkit_agent_open(bool ask_password) {
        int pipefd[2];

        if (!ask_password || agent_pid > 0 || !isatty(STDIN_FILENO) || access("/usr/bin/pkttyagent", X_OK) < 0)
                return;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return;

        pid_t parent = getpid();
        bool in_session = sd_pid_get_session(0, NULL) >= 0;
        agent_pid = fork();
        if (agent_pid < 0) {
                agent_pid = 0;
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return;
        }
        if (agent_pid == 0) {
                char fd[16], pid[16];
                /* The notify fd must survive exec. */
                int nfd = dup(pipefd[1]);
                snprintf(fd, sizeof(fd), "%i", nfd);
                snprintf(pid, sizeof(pid), "%i", (int) parent);
                if (in_session)
                        execl("/usr/bin/pkttyagent", "pkttyagent", "--notify-fd", fd, "--fallback", "--process", pid, (char *) NULL);
                else
                        execl("/usr/bin/pkttyagent", "pkttyagent", "--notify-fd", fd, "--process", pid, (char *) NULL);
                _exit(127);
        }
        safe_close(pipefd[1]);
        /* Wait until the agent says it is registered (or dies). */
        struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
        (void) poll(&p, 1, 10000);
        safe_close(pipefd[0]);
}

void polkit_agent_close(void) {
        if (agent_pid <= 0)
                return;
        (void) kill(agent_pid, SIGTERM);
        (void) waitpid(agent_pid, NULL, 0);
        agent_pid = 0;
}
