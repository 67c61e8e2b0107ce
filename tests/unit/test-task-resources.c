/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "json-util.h"
#include "micros.h"
#include "tap.h"
#include "task-resources.h"

static TaskResources sample(void) {
        TaskResources r;

        task_resources_init(&r);
        r.cpu_usec = 12345678;
        r.memory_peak = 210ULL * 1024 * 1024 + 5;
        r.io_read_bytes = 1258291;
        r.io_write_bytes = 419430;
        r.processes = 17;
        r.net_up_bytes = 1024 * 1024;
        r.net_down_bytes = 209716;
        r.net_connections = 3;
        r.model_calls = 9;
        r.tokens_in = 45210;
        r.tokens_out = 3100;
        r.tokens_cached = 40000;
        r.wall_usec = 250 * 1000000ULL;
        r.cost_micros = 21000;
        strcpy(r.currency, "USD");
        return r;
}

static void test_init(void) {
        TaskResources r;

        task_resources_init(&r);
        CHECK_UINT_EQ(r.cpu_usec, 0, "a new task has used no CPU");
        CHECK_UINT_EQ(r.tokens_in, 0, "nor tokens");
        CHECK_UINT_EQ(r.cost_micros, TASK_RESOURCE_UNKNOWN, "its cost is unknown until a price is known");
        CHECK_STR_EQ(r.currency, "", "and it has no currency");
}

static void test_set(void) {
        TaskResources r;

        task_resources_init_unknown(&r);
        CHECK(r.cpu_usec == TASK_RESOURCE_UNKNOWN && r.wall_usec == TASK_RESOURCE_UNKNOWN &&
              r.cost_micros == TASK_RESOURCE_UNKNOWN, "all unknown");
        CHECK_ERRNO(task_resources_set(&r, "tokens_out", 42), 0, "set by name");
        CHECK_UINT_EQ(r.tokens_out, 42, "the named counter set");
        CHECK_ERRNO(task_resources_set(&r, "gpu_usec", 1), -ENOENT, "a name not known here");
        CHECK_ERRNO(task_resources_set(&r, "currency", 1), -ENOENT, "the currency is no counter");
}

static void test_round_trip(void) {
        TaskResources r = sample(), back;
        _cleanup_json_ json_object *j = NULL, *again = NULL;

        CHECK_ERRNO(task_resources_to_json(&r, &j), 0, "to JSON");
        CHECK_ERRNO(task_resources_from_json(&back, j), 0, "from JSON");
        CHECK(memcmp(&r, &back, sizeof(r)) == 0, "every counter round-trips: %s", json_to_line(j));

        /* Unknowns are null, and come back unknown. */
        r.cpu_usec = TASK_RESOURCE_UNKNOWN;
        r.memory_peak = TASK_RESOURCE_UNKNOWN;
        r.cost_micros = TASK_RESOURCE_UNKNOWN;
        memset(r.currency, 0, sizeof(r.currency));
        r.tokens_out = TASK_RESOURCE_UNKNOWN - 1;
        CHECK_ERRNO(task_resources_to_json(&r, &again), 0, "to JSON with unknowns");
        json_object *v = NULL;
        CHECK(json_object_object_get_ex(again, "cpu_usec", &v) && json_object_is_type(v, json_type_null),
              "unknown CPU is null: %s", json_to_line(again));
        CHECK(!json_object_object_get_ex(again, "currency", NULL), "no currency without a price");
        CHECK_ERRNO(task_resources_from_json(&back, again), 0, "from JSON with unknowns");
        CHECK(memcmp(&r, &back, sizeof(r)) == 0, "unknowns and the largest known value round-trip");
}

static void test_old_and_bad(void) {
        TaskResources r = sample();
        _cleanup_json_ json_object *empty = json_object_new_object();

        /* A state file older than the accounting: nothing counted. */
        CHECK_ERRNO(task_resources_from_json(&r, NULL), 0, "no object: loads");
        CHECK_UINT_EQ(r.cpu_usec, 0, "no object: CPU 0");
        CHECK_UINT_EQ(r.cost_micros, TASK_RESOURCE_UNKNOWN, "no object: cost unknown");
        r = sample();
        CHECK_ERRNO(task_resources_from_json(&r, empty), 0, "empty object: loads");
        CHECK_UINT_EQ(r.tokens_in, 0, "empty object: tokens 0");

        static const char *const bad[] = {
                "[]",
                "{\"cpu_usec\":-1}",
                "{\"cpu_usec\":\"12\"}",
                "{\"tokens_in\":1.5}",
                "{\"cpu_usec\":true}",
                "{\"currency\":\"US D\"}",
                "{\"currency\":\"ABCDEFGHIJ\"}",
                "{\"currency\":\"\"}",
                "{\"currency\":7}",
                "{\"currency\":\"U\\nSD\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_json_ json_object *j = NULL;
                r = sample();
                CHECK_ERRNO(json_parse_strict(bad[i], strlen(bad[i]), &j), 0, "parse %s", bad[i]);
                CHECK_ERRNO(task_resources_from_json(&r, j), -EBADMSG, "refused: %s", bad[i]);
                CHECK_UINT_EQ(r.cpu_usec, 12345678, "and what was there is untouched: %s", bad[i]);
        }
}

static void test_format(void) {
        TaskResources r = sample();
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        a = task_resources_format(&r);
        CHECK_STR_EQ(a, "cpu 12.3 s, memory 210 MiB, io 1.1 MiB/409 KiB, net 1.2 MiB, tokens 45210/3100, "
                        "0.021 USD, wall 4 min 10 s", "the one line");

        task_resources_init(&r);
        r.cpu_usec = TASK_RESOURCE_UNKNOWN;
        r.memory_peak = TASK_RESOURCE_UNKNOWN;
        r.io_read_bytes = r.io_write_bytes = TASK_RESOURCE_UNKNOWN;
        b = task_resources_format(&r);
        CHECK_STR_EQ(b, "cpu unknown, memory unknown, io unknown, net 0 B, tokens 0/0, wall 0.0 s",
                     "unknowns say so; no price, no money");

        r = sample();
        r.cpu_usec = 2 * 3600 * 1000000ULL + 5 * 60 * 1000000ULL;
        r.memory_peak = 1023;
        r.io_write_bytes = TASK_RESOURCE_UNKNOWN;
        r.net_up_bytes = TASK_RESOURCE_UNKNOWN - 1;
        r.net_down_bytes = 10;
        r.cost_micros = 1500000;
        strcpy(r.currency, "EUR");
        r.wall_usec = 59999999;
        c = task_resources_format(&r);
        CHECK_STR_EQ(c, "cpu 2 h 5 min, memory 1023 B, io 1.1 MiB/unknown, net 15.9 EiB, tokens 45210/3100, "
                        "1.50 EUR, wall 59.9 s", "hours, bytes, saturated sums, cents");

}

static void test_arithmetic(void) {
        uint64_t c = 0;

        task_resource_add(&c, 5);
        CHECK_UINT_EQ(c, 5, "add");
        task_resource_add(&c, TASK_RESOURCE_UNKNOWN);
        CHECK_UINT_EQ(c, 5, "an unknown delta changes nothing");
        c = TASK_RESOURCE_UNKNOWN;
        task_resource_add(&c, 7);
        CHECK_UINT_EQ(c, 7, "a known delta makes an unknown counter known");
        c = TASK_RESOURCE_UNKNOWN - 3;
        task_resource_add(&c, 100);
        CHECK_UINT_EQ(c, TASK_RESOURCE_UNKNOWN - 1, "overflow saturates below unknown");
        c = 10;
        task_resource_max(&c, 3);
        CHECK_UINT_EQ(c, 10, "a lower peak keeps the higher");
        task_resource_max(&c, 30);
        CHECK_UINT_EQ(c, 30, "a higher peak is kept");
        task_resource_max(&c, TASK_RESOURCE_UNKNOWN);
        CHECK_UINT_EQ(c, 30, "an unknown sample keeps the peak");

        /* Cost: 45210 in at 0.15 and 3100 out at 0.60 per million is
         * 0.0067815 + 0.00186 = 0.0086415, rounded to 0.008642. */
        CHECK_UINT_EQ(task_resources_cost(45210, 3100, 150000, 600000), 8642, "cost rounds to the nearest millionth");
        CHECK_UINT_EQ(task_resources_cost(1000000, 0, 3000000, 0), 3000000, "a million tokens at 3 cost 3");
        CHECK_UINT_EQ(task_resources_cost(0, 0, 3000000, 15000000), 0, "no tokens cost nothing");
        CHECK_UINT_EQ(task_resources_cost(TASK_RESOURCE_UNKNOWN, 0, 1, 1), TASK_RESOURCE_UNKNOWN, "unknown tokens: unknown cost");
        CHECK_UINT_EQ(task_resources_cost(UINT64_MAX - 1, UINT64_MAX - 1, MICROS_MAX, MICROS_MAX),
                      TASK_RESOURCE_UNKNOWN - 1, "no overflow: saturates");
        /* Summed call by call or at once: the same within a millionth a call. */
        uint64_t sum = 0;
        for (int i = 0; i < 1000; i++)
                sum += task_resources_cost(4521, 310, 150000, 600000);
        uint64_t once = task_resources_cost(4521000, 310000, 150000, 600000);
        CHECK(sum >= once - 1000 && sum <= once + 1000, "per-call rounding drifts at most a millionth a call (%llu vs %llu)",
              (unsigned long long) sum, (unsigned long long) once);
}

int main(void) {
        test_init();
        test_set();
        test_round_trip();
        test_old_and_bad();
        test_format();
        test_arithmetic();
        return tap_done();
}
