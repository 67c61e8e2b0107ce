/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* LD_PRELOAD'ed into agentfabd by the crash test (tests/crash/run.sh): the
 * moment the daemon announces an acknowledgement, marked in the write log
 * of the disk its state directory is on (tests/crash/blklog.c).
 *
 * agentfabd announces a step, a state and a delivery first in the journal
 * (audit.c: the entry, then events.jsonl and the bus), with one sendmsg()
 * to journald's socket. This sendmsg() looks at what is sent and, for an
 * entry with AGENTFAB_EVENT=step, =state or =delivered, first puts a mark
 * into the log and waits until it is there. Everything the daemon made
 * durable before the announcement (a flush it waited for) is logged before
 * the mark; whatever crash point of the log lies after the mark must hold
 * what the mark names. Marks: "step TASK STEP [COMMIT]", "state TASK
 * STATE", "delivered TASK COMMIT".
 *
 * The socket is the abstract name in $AGENTFAB_CRASH_MARK_SOCKET; without
 * it nothing is marked. Test code. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);

/* The value of FIELD= among the iovecs of a native journal message (one
 * field and its newline in separate iovecs, as sd_journal_sendv() sends). */
static size_t field(const struct msghdr *msg, const char *name, char *out, size_t size) {
        size_t n = strlen(name);

        for (size_t i = 0; i < msg->msg_iovlen; i++) {
                const char *b = msg->msg_iov[i].iov_base;
                size_t l = msg->msg_iov[i].iov_len;

                if (!b || l <= n || memcmp(b, name, n) != 0 || b[n] != '=')
                        continue;
                l -= n + 1;
                if (l >= size)
                        l = size - 1;
                memcpy(out, b + n + 1, l);
                out[l] = '\0';
                /* Values are single lines here. */
                out[strcspn(out, "\n")] = '\0';
                return l;
        }
        return 0;
}

static void mark(const char *text) {
        const char *name = getenv("AGENTFAB_CRASH_MARK_SOCKET");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char reply[16];
        int fd, saved = errno;

        if (!name || strlen(name) + 1 >= sizeof(sa.sun_path))
                return;
        memcpy(sa.sun_path + 1, name, strlen(name));
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                goto out;
        if (connect(fd, (struct sockaddr *) &sa, (socklen_t) (sizeof(sa.sun_family) + 1 + strlen(name))) >= 0 &&
            send(fd, text, strlen(text), MSG_NOSIGNAL) >= 0)
                (void) recv(fd, reply, sizeof(reply), 0);
        close(fd);
out:
        errno = saved;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
        static sendmsg_fn real = NULL;
        char event[32], task[128], text[400];

        if (!real)
                real = (sendmsg_fn) dlsym(RTLD_NEXT, "sendmsg");

        if (msg && field(msg, "AGENTFAB_EVENT", event, sizeof(event)) > 0 &&
            field(msg, "AGENTFAB_TASK", task, sizeof(task)) > 0) {
                char step[32] = "", commit[64] = "", state[32] = "";

                text[0] = '\0';
                if (strcmp(event, "step") == 0) {
                        (void) field(msg, "AGENTFAB_STEP", step, sizeof(step));
                        (void) field(msg, "AGENTFAB_COMMIT", commit, sizeof(commit));
                        (void) snprintf(text, sizeof(text), "step %s %s %s", task, step, commit);
                } else if (strcmp(event, "state") == 0) {
                        (void) field(msg, "AGENTFAB_STATE", state, sizeof(state));
                        (void) snprintf(text, sizeof(text), "state %s %s", task, state);
                } else if (strcmp(event, "delivered") == 0) {
                        (void) field(msg, "AGENTFAB_COMMIT", commit, sizeof(commit));
                        (void) snprintf(text, sizeof(text), "delivered %s %s", task, commit);
                }
                if (text[0])
                        mark(text);
        }
        return real(fd, msg, flags);
}
