/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "json-util.h"
#include "macro.h"
#include "stream-client.h"
#include "string-util.h"

int stream_client_connect(const char *socket_path, const char *id, const char *stream, bool follow) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = socket_path ?: getenv("AGENTFAB_SOCKET") ?: AGENTFAB_DEFAULT_SOCKET;
        _cleanup_json_ json_object *req = json_object_new_object();
        _cleanup_free_ char *line = NULL;

        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "Socket path '%s' is too long.\n", path);
                return -EXIT_USAGE;
        }
        strcpy(sa.sun_path, path);

        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -EXIT_FAIL;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                fprintf(stderr, "Failed to connect to '%s': %s\n", path, strerror(errno));
                safe_close(fd);
                return -EXIT_FAIL;
        }

        if (!req || json_add_string(req, "task", id) < 0 || json_add_string(req, "stream", stream) < 0 ||
            json_object_object_add(req, "follow", json_object_new_boolean(follow)) < 0 ||
            asprintf(&line, "%s\n", json_to_line(req)) < 0) {
                safe_close(fd);
                return -EXIT_FAIL;
        }
        if (send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t) strlen(line)) {
                fprintf(stderr, "Failed to send request: %s\n", strerror(errno));
                safe_close(fd);
                return -EXIT_FAIL;
        }
        return fd;
}

static const char *event_field(json_object *j, const char *key) {
        const char *s = NULL;
        (void) json_get_string(j, key, &s);
        return strempty(s);
}

/* One line per event of the agent at work; the texts come from the model
 * and the sandbox, so only their first line is shown, shortened. */
static void print_agent_event(const char *when, const char *type, json_object *j) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        const char *step = event_field(j, "step");

        if (streq(type, "plan")) {
                a = strshorten_line(skip_heading(event_field(j, "plan")), 100);
                printf("%s  plan: %s\n", when, strempty(a));
        } else if (streq(type, "model-call")) {
                a = strshorten_line(event_field(j, "error"), 100);
                printf("%s  step %s: model %s%s%s\n", when, step, event_field(j, "model"),
                       isempty(a) ? "" : " failed: ", strempty(a));
        } else if (streq(type, "command")) {
                a = strshorten_line(event_field(j, "command"), 80);
                printf("%s  step %s: $ %s (%s)\n", when, step, strempty(a), event_field(j, "result"));
        } else if (streq(type, "file-change")) {
                a = strshorten_line(event_field(j, "path"), 100);
                printf("%s  step %s: %s %s\n", when, step, event_field(j, "tool"), strempty(a));
        } else if (streq(type, "step")) {
                a = strshorten_line(event_field(j, "subject"), 72);
                printf("%s  step %s done%s%.12s: %s\n", when, step, isempty(event_field(j, "commit")) ? "" : ", commit ",
                       event_field(j, "commit"), strempty(a));
        } else if (streq(type, "left-out")) {
                a = strshorten_line(event_field(j, "paths"), 120);
                printf("%s  step %s: left out of the checkpoint: %s\n", when, step, strempty(a));
        } else if (streq(type, "breaker")) {
                b = strshorten_line(event_field(j, "reason"), 120);
                printf("%s  breaker %s: %s\n", when, event_field(j, "breaker"), strempty(b));
        } else if (streq(type, "delivered"))
                printf("%s  delivered %s at %.12s\n", when, event_field(j, "branch"), event_field(j, "commit"));
        else
                printf("%s  %s\n", when, type);
}

/* Reads JSON lines until "end" or an error; prints them for people or raw. */
int stream_client_follow(int fd, bool json) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, allocated = 0;
        int ret = EXIT_OK;

        for (;;) {
                if (len + 4096 > allocated) {
                        if (allocated > 64 * 1024 * 1024) {
                                fprintf(stderr, "Line from daemon too long.\n");
                                return EXIT_FAIL;
                        }
                        char *t = realloc(buf, allocated * 2 + 4096);
                        if (!t)
                                return EXIT_FAIL;
                        buf = t;
                        allocated = allocated * 2 + 4096;
                }
                ssize_t n = read(fd, buf + len, allocated - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        fprintf(stderr, "Read error: %s\n", strerror(errno));
                        return EXIT_FAIL;
                }
                if (n == 0) {
                        if (len > 0 || ret != EXIT_OK)
                                break;
                        fprintf(stderr, "The daemon closed the stream.\n");
                        return EXIT_FAIL;
                }
                len += (size_t) n;

                char *nl;
                while ((nl = memchr(buf, '\n', len))) {
                        _cleanup_json_ json_object *j = NULL;
                        const char *type = "", *s;

                        *nl = '\0';
                        if (json_parse_strict(buf, (size_t) (nl - buf), &j) >= 0)
                                (void) json_get_string(j, "type", &type);

                        if (json && j && !streq(type, "error"))
                                printf("%s\n", buf);
                        else if (!j)
                                ;
                        else if (streq(type, "error")) {
                                const char *e = "", *msg = "";
                                (void) json_get_string(j, "error", &e);
                                (void) json_get_string(j, "message", &msg);
                                fprintf(stderr, "%s\n", msg);
                                ret = streq(e, AGENTFAB_ERROR_NO_SUCH_TASK) ? EXIT_NO_TASK :
                                      streq(e, SD_BUS_ERROR_ACCESS_DENIED) ? EXIT_DENIED : EXIT_FAIL;
                        } else if (streq(type, "output")) {
                                if (json_get_string(j, "data", &s) >= 0)
                                        printf("%s\n", s);
                        } else if (streq(type, "end")) {
                                ;
                        } else {
                                uint64_t usec = 0;
                                char when[64];
                                const char *state = "", *reason = "", *req = "";
                                (void) json_get_uint64(j, "usec", &usec);
                                format_timestamp(usec, when, sizeof(when));
                                (void) json_get_string(j, "state", &state);
                                (void) json_get_string(j, "reason", &reason);
                                (void) json_get_string(j, "request", &req);
                                if (streq(type, "state"))
                                        printf("%s  %s%s%s\n", when, state, isempty(reason) ? "" : ": ", reason);
                                else if (streq(type, "submitted"))
                                        printf("%s  submitted (%s)\n", when, state);
                                else if (streq(type, "request"))
                                        printf("%s  %s requested\n", when, req);
                                else
                                        print_agent_event(when, type, j);
                        }
                        fflush(stdout);

                        bool end = streq(type, "end") || streq(type, "error");
                        len -= (size_t) (nl + 1 - buf);
                        memmove(buf, nl + 1, len);
                        if (end)
                                return ret;
                }
        }
        return ret;
}
