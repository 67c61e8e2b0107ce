/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "json-util.h"
#include "ledger.h"
#include "limit-word.h"
#include "macro.h"
#include "polkit-agent.h"
#include "string-util.h"
#include "submit-request.h"

/* The SubmitTask() call for the options given: the repository as its path
 * or URL, and, when repo_fd >= 0, as an open directory or a bundle. */
static int submit_message_new(sd_bus *bus, const SubmitRequest *req, const char *repo, int repo_fd, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH,
                                           AGENTFAB_FACTORY_INTERFACE, "SubmitTask");
        if (r >= 0)
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r >= 0)
                r = bus_append_string_entry(m, "repository", repo);
        if (r >= 0 && repo_fd >= 0)
                r = sd_bus_message_append(m, "{sv}", "repository_fd", "h", repo_fd);
        if (r >= 0)
                r = bus_append_string_entry(m, "goal", req->goal);
        if (r >= 0)
                r = bus_append_string_entry(m, "acceptance", req->acceptance);
        if (r >= 0)
                r = bus_append_string_entry(m, "test_command", req->test_command);
        if (r >= 0)
                r = bus_append_string_entry(m, "coverage_report", req->coverage_report);
        if (r >= 0)
                r = bus_append_string_entry(m, "base", req->base);
        if (r >= 0)
                r = bus_append_string_entry(m, "model", req->model);
        if (r >= 0)
                r = bus_append_string_entry(m, "replay", req->replay);
        if (r >= 0)
                r = bus_append_string_entry(m, "reference", req->reference);
        if (r >= 0)
                r = bus_append_string_entry(m, "push_url", req->push_url);
        if (r >= 0)
                r = bus_append_string_entry(m, "forge", req->forge);
        if (r >= 0)
                r = bus_append_string_entry(m, "forge_repository", req->forge_repository);
        if (r >= 0)
                r = bus_append_string_entry(m, "pull_request_base", req->pull_request_base);
        if (r >= 0)
                r = bus_append_string_entry(m, "environment", req->environment);
        if (r >= 0 && req->submodules)
                r = sd_bus_message_append(m, "{sv}", "submodules", "b", 1);
        if (r >= 0 && req->limits) {
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "limits");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, SD_BUS_TYPE_VARIANT, "a{sv}");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
                for (char **l = req->limits; r >= 0 && *l; l++) {
                        _cleanup_free_ char *key = NULL;
                        uint64_t v;

                        r = limit_word_parse(*l, &key, &v);
                        if (r == -EINVAL)
                                return EXIT_USAGE;
                        if (r >= 0)
                                r = sd_bus_message_append(m, "{sv}", key, "t", v);
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0) {
                fprintf(stderr, "Failed to build request: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        *ret = TAKE_PTR(m);
        return EXIT_OK;

}

/* The history of repo at --base (default HEAD) as a bundle in a memfd, for a
 * daemon that cannot read the repository even through a directory fd. */
static int repository_bundle(const char *repo, const char *base, int *ret_fd) {
        _cleanup_free_ char *message = NULL;
        _cleanup_close_ int fd = -EBADF;
        char tip[41];
        int r;

        fd = memfd_create("agentfab-repository.bundle", MFD_CLOEXEC);
        if (fd < 0)
                return fprintf(stderr, "Cannot make a memfd for the bundle: %s\n", strerror(errno)), -errno;
        r = ledger_bundle_repository(repo, base, fd, tip, &message);
        if (r < 0) {
                fprintf(stderr, "Cannot bundle repository '%s': %s\n", repo, message ?: strerror(-r));
                return r;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int submit_task_get_id(sd_bus *bus, const SubmitRequest *req, bool ask_password, bool quiet, char **ret_id,
                       char **ret_path) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_close_ int repo_fd = -EBADF;
        char repo[PATH_MAX];
        const char *id, *path;
        int r;

        if (!req->repo || !req->goal) {
                fprintf(stderr, "submit needs --repo=PATH and --goal=TEXT.\n");
                return EXIT_USAGE;
        }
        /* A URL goes to the daemon as it is: it fetches it itself. */
        if (strstr(req->repo, "://")) {
                if (strlen(req->repo) >= sizeof(repo)) {
                        fprintf(stderr, "Repository URL is too long.\n");
                        return EXIT_USAGE;
                }
                strcpy(repo, req->repo);
        /* The daemon wants an absolute path; resolve a relative one against our cwd. */
        } else if (!realpath(req->repo, repo)) {
                /* No such directory, but what git would take for HOST:PATH. */
                if (errno == ENOENT && strchr(req->repo, ':') && strcspn(req->repo, ":") < strcspn(req->repo, "/"))
                        fprintf(stderr, "Repository '%s' looks like git's scp-like syntax, which is not supported: "
                                "write it as ssh://[USER@]HOST[:PORT]/PATH.\n", req->repo);
                else
                        fprintf(stderr, "Repository '%s': %s\n", req->repo, strerror(errno));
                return EXIT_USAGE;
        }
        /* The repository goes to the daemon as an open directory too: it is
         * read through that, with our right to read it, so a private one
         * works without giving the daemon access of its own. */
        if (!strstr(repo, "://") && (repo_fd = open(repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                fprintf(stderr, "Repository '%s': %s\n", repo, strerror(errno));
                return EXIT_USAGE;
        }

        r = submit_message_new(bus, req, repo, repo_fd, &m);
        if (r != EXIT_OK)
                return r;

        polkit_agent_open(ask_password);
        r = sd_bus_call(bus, m, REPOSITORY_CALL_TIMEOUT_USEC, &error, &reply);
        /* A repository whose own directories only its owner may read: its
         * history goes over instead, read with our rights. */
        if (r < 0 && repo_fd >= 0 && sd_bus_error_has_name(&error, AGENTFAB_ERROR_REPOSITORY_UNREADABLE)) {
                _cleanup_close_ int bundle_fd = -EBADF;

                if (!quiet)
                        fprintf(stderr, "agentfabd cannot read '%s' itself; sending its history as a bundle.\n", repo);
                if (repository_bundle(repo, req->base, &bundle_fd) < 0)
                        return EXIT_FAIL;
                sd_bus_error_free(&error);
                m = sd_bus_message_unref(m);
                r = submit_message_new(bus, req, repo, bundle_fd, &m);
                if (r != EXIT_OK)
                        return r;
                r = sd_bus_call(bus, m, REPOSITORY_CALL_TIMEOUT_USEC, &error, &reply);
        }
        if (r < 0)
                return bus_fail("submit task", &error, r);
        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0)
                return EXIT_FAIL;
        *ret_id = strdup(id);
        *ret_path = strdup(path);
        if (!*ret_id || !*ret_path) {
                *ret_id = mfree_ptr(*ret_id);
                *ret_path = mfree_ptr(*ret_path);
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

int submit_task(sd_bus *bus, const SubmitRequest *req, bool ask_password, bool json) {
        _cleanup_free_ char *id = NULL, *path = NULL;
        int r;

        r = submit_task_get_id(bus, req, ask_password, json, &id, &path);
        if (r != EXIT_OK)
                return r;
        if (json) {
                _cleanup_json_ json_object *j = json_object_new_object();
                (void) json_add_string(j, "id", id);
                (void) json_add_string(j, "object", path);
                printf("%s\n", json_to_line(j));
        } else
                printf("%s\n", id);
        return EXIT_OK;
}
