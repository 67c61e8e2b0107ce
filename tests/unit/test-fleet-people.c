/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "fleet-people.h"
#include "fleet-requests.h"
#include "tap.h"

int main(void) {
        FleetRequestArgument a = {}, b = {};
        char *text = NULL;
        Task *t = NULL;

        /* What one host writes, the holder reads back as it was: who asked,
         * their words, the breaker they saw. */
        a = (FleetRequestArgument) { .user = strdup("alice"), .comment = strdup("go on"), .breaker = strdup("budget") };
        CHECK_ERRNO(fleet_request_argument_format(&a, &text), 0, "an argument is written");
        CHECK_ERRNO(fleet_request_argument_parse(text, &b), 0, "and read back");
        CHECK(streq_ptr(b.user, "alice") && streq_ptr(b.comment, "go on") && streq_ptr(b.breaker, "budget") &&
              !b.goal && !b.acceptance, "the same fields, nothing added");
        fleet_request_argument_done(&a);
        fleet_request_argument_done(&b);
        free(text);

        /* Another host wrote it: what cannot name one user here is refused,
         * so that no request runs as somebody it does not name. */
        CHECK(fleet_request_argument_parse(NULL, &b) < 0, "no argument: refused");
        CHECK(fleet_request_argument_parse("not json", &b) < 0, "not JSON: refused");
        CHECK(fleet_request_argument_parse("[]", &b) < 0, "not an object: refused");
        CHECK(fleet_request_argument_parse("{\"comment\":\"x\"}", &b) < 0, "no user: refused");
        CHECK(fleet_request_argument_parse("{\"user\":7}", &b) < 0, "a user that is no string: refused");
        CHECK(fleet_request_argument_parse("{\"user\":\"root@host-a\"}", &b) < 0, "a user with a host: refused");
        CHECK(fleet_request_argument_parse("{\"user\":\"a\\nb\"}", &b) < 0, "a user with a newline: refused");
        CHECK(fleet_request_argument_parse("{\"user\":\"\"}", &b) < 0, "an empty user: refused");

        /* The stop an approval answers: the step the task stopped before,
         * only while it waits for approval. */
        CHECK_ERRNO(task_new(&t, "0123456789ab"), 0, "a task");
        t->progress.step = 3;
        t->state = TASK_RUNNING;
        CHECK_UINT_EQ(fleet_people_stop(t), 0, "a running task waits at no stop");
        t->state = TASK_AWAITING_APPROVAL;
        CHECK_UINT_EQ(fleet_people_stop(t), 4, "waiting for approval after step 3: the stop before step 4");
        t->progress.step = 0;
        CHECK_UINT_EQ(fleet_people_stop(t), 1, "a stop before any step is still a stop (never 0)");
        task_free(t);

        return tap_done();
}
