/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A task's state file (tasks/<id>/state.json) as task_load() reads it:
 * at most TASK_STATE_FILE_MAX bytes, one JSON object, task_from_json().
 *
 * Invariants: an accepted record has a valid state and a spec whose keys
 * pass the submission checks again, and it survives a round trip: written
 * as task_save() writes it and read again, it gives the same JSON. */
#include "fuzz.h"
#include "json-util.h"
#include "string-util.h"
#include "task-store.h"
#include "task.h"

#define ID "0123456789ab"

static void spec_check(const TaskSpec *s) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec v;

        task_spec_init(&v);
        const struct { const char *key, *value; } strings[] = {
                { "goal", s->goal }, { "acceptance", s->acceptance }, { "test_command", s->test_command }, { "base", s->base },
                { "model", s->model }, { "replay", s->replay }, { "push_url", s->push_url }, { "forge", s->forge },
                { "forge_repository", s->forge_repository }, { "pull_request_base", s->pull_request_base },
        };
        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                if (strings[i].value)
                        FUZZ_CHECK(task_spec_set_string(&v, strings[i].key, strings[i].value, &e) >= 0,
                                   "stored '%s' passes the submission check: %s", strings[i].key, e.message);
        for (int l = 0; l < _TASK_LIMIT_MAX; l++)
                if (s->limits[l] != TASK_LIMIT_UNSET)
                        FUZZ_CHECK(task_spec_set_limit(&v, task_limit_to_string(l), s->limits[l], &e) >= 0,
                                   "stored limit '%s' passes: %s", task_limit_to_string(l), e.message);
        FUZZ_CHECK(s->n_extra_limits <= TASK_EXTRA_LIMITS_MAX, "%zu extra limits", s->n_extra_limits);
        FUZZ_CHECK(s->repository_fd < 0, "no fd from a file");
        sd_bus_error_free(&e);
        task_spec_done(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *j = NULL, *j2 = NULL, *j3 = NULL, *back = NULL;
        Task *t = NULL, *u = NULL;
        char *error = NULL;

        if (size > TASK_STATE_FILE_MAX)
                return -1;
        fuzz_quiet();
        if (json_parse_strict((const char *) data, size, &j) < 0)
                return 0;
        if (task_new(&t, ID) < 0)
                abort();
        int r = task_from_json(t, j, &error);
        if (r < 0) {
                FUZZ_CHECK(IN_SET(r, -EBADMSG, -EPROTONOSUPPORT, -ENOMEM) && (error || r == -ENOMEM),
                           "refusal %d says why", r);
                goto out;
        }
        FUZZ_CHECK(t->state >= 0 && t->state < _TASK_STATE_MAX, "state");
        FUZZ_CHECK(t->reason && strlen(t->reason) <= 4096, "reason");
        spec_check(&t->spec);

        /* As task_save() writes it, then as task_load() reads it. */
        j2 = task_to_json(t);
        FUZZ_CHECK(j2, "written");
        const char *text = json_object_to_json_string_ext(j2, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        FUZZ_CHECK(strlen(text) <= TASK_STATE_FILE_MAX, "a record fits its own bound");
        FUZZ_CHECK(json_parse_strict(text, strlen(text), &back) == 0, "what we write is JSON");
        if (task_new(&u, ID) < 0)
                abort();
        free(error);
        error = NULL;
        r = task_from_json(u, back, &error);
        FUZZ_CHECK(r == 0, "what we write we read: %s\n%s", strempty(error), text);
        j3 = task_to_json(u);
        FUZZ_CHECK(j3 && streq(json_to_line(j2), json_to_line(j3)), "the same record after a round trip:\n%s\n%s",
                   json_to_line(j2), j3 ? json_to_line(j3) : "-");
out:
        free(error);
        json_object_put(j);
        json_object_put(j2);
        json_object_put(j3);
        json_object_put(back);
        task_free(t);
        task_free(u);
        return 0;
}
