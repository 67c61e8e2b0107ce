/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Drives the daemon's asynchronous sandbox client (exec-session.h) against
 * the real launcher, on an sd-event loop, the way agentfabd will. Run as
 * the agentfab user inside the harness; prints "ok ..." or "FAIL ..." lines.
 *
 *   agentfab-session-probe WORKSPACE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exec-session.h"
#include "macro.h"

#define CHECK(cond, ...)                                                \
        do {                                                            \
                printf((cond) ? "ok " : "FAIL ");                       \
                printf(__VA_ARGS__);                                    \
                printf("\n");                                           \
                fflush(stdout);                                         \
        } while (0)

static sd_event *event;
static SandboxSession *session;
static int log_fd = -EBADF;
static unsigned ticks, chunks, step;
static uint64_t step_start;

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        ticks++;
        (void) sd_event_source_set_time(s, usec + 10 * USEC_PER_MSEC);
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static void on_output(const char *stream, const char *data, size_t n, void *userdata) {
        chunks++;
}

static void next_step(void);

static void on_done(SandboxSession *s, int error, const ExecResult *r, void *userdata) {
        uint64_t ms = (now_usec() - step_start) / 1000;

        switch (step) {
        case 0:
                CHECK(error == 0 && r->status == 3 && r->output && strstr(r->output, "out") && strstr(r->output, "err") && chunks >= 1,
                      "async exec: status %i, output %s, %u chunks seen live", r->status, r->output ? "whole" : "missing", chunks);
                break;
        case 1:
                CHECK(error == 0 && r->status == 0 && ticks >= 50 && ms < 3000,
                      "the event loop ran during a 1 s command: %u ticks of 10 ms in %llu ms", ticks, (unsigned long long) ms);
                break;
        case 2: {
                struct stat st;
                CHECK(error == 0 && r->output_bytes == 3000000 && strlen(r->output) < 1100 && fstat(log_fd, &st) >= 0 &&
                      st.st_size == 3000000, "3 MB of output: %llu bytes logged in full, %zu kept for the model",
                      (unsigned long long) r->output_bytes, strlen(r->output));
                break;
        }
        case 3:
                CHECK(error == 0 && r->signal == 9, "memory bomb killed: signal %i, limit_killed %s, peak %llu bytes",
                      r->signal, r->limit_killed ? "yes" : "no", (unsigned long long) r->peak_memory);
                break;
        case 4:
                CHECK(error == -EINVAL, "a request the sandbox refuses: %s", strerror(-error));
                break;
        case 5:
                CHECK(error == 0 && r->status == 0, "the session carries on after a refusal");
                /* Freed from its own handler: the connection closes, the sandbox ends. */
                session = sandbox_session_free(s);
                (void) sd_event_exit(event, 0);
                return;
        }
        step++;
        next_step();
}

static void next_step(void) {
        static char *argv0[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };
        static char *argv1[] = { "sleep", "1", NULL };
        static char *argv2[] = { "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x", NULL };
        static char *argv3[] = { "python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))", NULL };
        static char *argv5[] = { "true", NULL };
        ExecRequest req = { .timeout_usec = 60 * USEC_PER_SEC };
        int r;

        switch (step) {
        case 0: req.argv = argv0; break;
        case 1: req.argv = argv1; ticks = 0; break;
        case 2: req.argv = argv2; break;
        case 3: req.argv = argv3; break;
        case 4: req.argv = argv5; req.cwd = "relative"; break;
        case 5: req.argv = argv5; break;
        }
        step_start = now_usec();
        r = sandbox_session_exec(session, &req, step == 2 ? log_fd : -EBADF, 1000, on_output, on_done, NULL);
        if (r < 0) {
                CHECK(false, "exec step %u: %s", step, strerror(-r));
                (void) sd_event_exit(event, 1);
                return;
        }
        if (step == 0) {
                r = sandbox_session_exec(session, &req, -EBADF, 1000, NULL, on_done, NULL);
                CHECK(r == -EBUSY, "one command at a time: %s", strerror(-r));
        }
}

static bool scope_gone(const char *unit) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "systemctl show -p LoadState --value %s | grep -qx not-found", unit);
        for (int i = 0; i < 250; i++) {
                if (system(cmd) == 0)
                        return true;
                usleep(20 * 1000);
        }
        return false;
}

static int compare_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *error = NULL;
        char unit[64];
        int r;

        if (argc != 2)
                return 2;
        _cleanup_close_ int ws = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        log_fd = memfd_create("log", MFD_CLOEXEC);
        if (ws < 0 || log_fd < 0 || sd_event_default(&event) < 0)
                return 1;

        SandboxLimits limits = { .memory_max = 64 << 20, .tasks_max = 64 };
        char *env[] = { "PROBE=1", NULL };
        uint64_t t0 = now_usec();
        r = sandbox_session_open(event, NULL, "0e0e0e0e0e01", ws, &limits, env, &error, &session);
        uint64_t t1 = now_usec();
        CHECK(r >= 0, "sandbox_session_open: %s in %.1f ms, %s pid %i", r < 0 ? strerror(-r) : "ready",
              (t1 - t0) / 1000.0, sandbox_session_get_unit(session), (int) sandbox_session_get_pid(session));
        if (r < 0) {
                printf("  launcher said: %s\n", strempty(error));
                return 1;
        }
        snprintf(unit, sizeof(unit), "%s", sandbox_session_get_unit(session));

        sd_event_source *tick = NULL;
        (void) sd_event_add_time(event, &tick, CLOCK_MONOTONIC, now_usec() + 10 * USEC_PER_MSEC, 0, on_tick, NULL);
        next_step();
        r = sd_event_loop(event);
        CHECK(r == 0 && !session, "event loop ended after the last command (%i)", r);
        CHECK(scope_gone(unit), "session freed: %s gone", unit);
        sd_event_source_disable_unref(tick);

        /* A refusal comes back with the launcher's reason. */
        error = mfree_ptr(error);
        _cleanup_close_ int usr = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = sandbox_session_open(event, NULL, "0e0e0e0e0e02", usr, NULL, NULL, &error, &session);
        CHECK(r == -EREMOTEIO && error && strstr(error, "not owned"), "refusal: %s: '%s'", strerror(-r), strempty(error));

        /* Timing: open until ready, a few times (on a new loop: the first one has finished). */
        event = sd_event_unref(event);
        if (sd_event_new(&event) < 0)
                return 1;
        uint64_t t[7];
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                SandboxSession *x = NULL;
                char id[16];
                snprintf(id, sizeof(id), "0e0e0e0e0f%02zx", i);
                t0 = now_usec();
                error = mfree_ptr(error);
                r = sandbox_session_open(event, NULL, id, ws, NULL, NULL, &error, &x);
                t[i] = now_usec() - t0;
                if (r < 0)
                        printf("  open %s: %s: %s\n", id, strerror(-r), strempty(error));
                sandbox_session_free(x);
                snprintf(unit, sizeof(unit), "agentfab-task-%s.scope", id);
                (void) scope_gone(unit);
        }
        qsort(t, ELEMENTSOF(t), sizeof(uint64_t), compare_u64);
        CHECK(r >= 0, "timing: sandbox_session_open until ready: median %.1f ms (min %.1f, max %.1f)",
              t[3] / 1000.0, t[0] / 1000.0, t[6] / 1000.0);

        r = sandbox_session_reap(NULL, NULL);
        CHECK(r == 0, "reap with nothing stale: %i", r);

        sd_event_unref(event);
        safe_close(log_fd);
        return 0;
}
