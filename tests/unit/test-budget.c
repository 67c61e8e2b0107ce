/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "micros.h"
#include "quota.h"
#include "task-budget.h"
#include "tap.h"
#include "time-util.h"

/* Money is typed as a decimal ("0.50") and held as millionths: the
 * parser must be exact and refuse what it cannot hold, never round. */
static void test_micros(void) {
        uint64_t u = 0;
        char b[32];

        CHECK(parse_micros("0.50", &u) == 0 && u == 500000, "0.50 is 500000 millionths");
        CHECK(parse_micros("3", &u) == 0 && u == 3000000, "a whole number");
        CHECK(parse_micros("12.345678", &u) == 0 && u == 12345678, "six decimals");
        CHECK(parse_micros("1.2500000", &u) == 0 && u == 1250000, "trailing zeros past six are fine");
        CHECK_ERRNO(parse_micros("1.0000001", &u), -ERANGE, "finer than a millionth refused, not rounded");
        CHECK_ERRNO(parse_micros("", &u), -EINVAL, "empty refused");
        CHECK_ERRNO(parse_micros("-1", &u), -EINVAL, "negative refused");
        CHECK_ERRNO(parse_micros("1e3", &u), -EINVAL, "exponent refused");
        CHECK_ERRNO(parse_micros(".5", &u), -EINVAL, "no leading digit refused");
        CHECK_ERRNO(parse_micros("5.", &u), -EINVAL, "no digit after the point refused");
        CHECK_ERRNO(parse_micros(" 5", &u), -EINVAL, "space refused");
        CHECK_ERRNO(parse_micros("99999999999999999999", &u), -ERANGE, "huge refused");
        CHECK_ERRNO(parse_micros("1000000000001", &u), -ERANGE, "past MICROS_MAX refused");
        CHECK(parse_micros("1000000000000", &u) == 0 && u == MICROS_MAX, "MICROS_MAX itself");
        CHECK_STR_EQ(format_micros(b, 500000), "0.50", "two decimals kept");
        CHECK_STR_EQ(format_micros(b, 12345678), "12.345678", "six decimals shown");
        CHECK_STR_EQ(format_micros(b, 3000000), "3.00", "a whole number with two decimals");
        CHECK_STR_EQ(format_micros(b, UINT64_MAX), "18446744073709.551615", "any uint64_t fits");
}

/* The defaults a site sets in agentfab.conf: none unless set, 0 refused
 * (a budget of nothing would stop every task at once), infinity is none. */
static void test_config(void) {
        Config c;

        config_init(&c);
        CHECK(c.max_cpu_usec == UINT64_MAX && c.max_network_bytes == UINT64_MAX && c.max_cost == UINT64_MAX &&
              c.max_cost_per_user_per_day == UINT64_MAX && c.max_cpu_usec_per_user_per_day == UINT64_MAX,
              "no budgets by default");
        config_parse(&c, "[Agent]\nMaxCPUSec=10min\nMaxNetworkBytes=100M\nMaxCost=0.50\n"
                     "[Daemon]\nMaxCostPerUserPerDay=20\nMaxCPUSecPerUserPerDay=1h\n", "test");
        CHECK_UINT_EQ(c.max_cpu_usec, 600 * USEC_PER_SEC, "MaxCPUSec=10min");
        CHECK_UINT_EQ(c.max_network_bytes, 100ULL * 1024 * 1024, "MaxNetworkBytes=100M");
        CHECK_UINT_EQ(c.max_cost, 500000, "MaxCost=0.50");
        CHECK_UINT_EQ(c.max_cost_per_user_per_day, 20000000, "MaxCostPerUserPerDay=20");
        CHECK_UINT_EQ(c.max_cpu_usec_per_user_per_day, 3600 * USEC_PER_SEC, "MaxCPUSecPerUserPerDay=1h");
        config_parse(&c, "[Agent]\nMaxCPUSec=0\nMaxNetworkBytes=0\nMaxCost=0\nMaxCost=-1\nMaxCost=0.0000001\n", "test");
        CHECK(c.max_cpu_usec == 600 * USEC_PER_SEC && c.max_network_bytes == 100ULL * 1024 * 1024 &&
              c.max_cost == 500000, "zero, negative and too fine refused, the earlier values stay");
        config_parse(&c, "[Agent]\nMaxCPUSec=infinity\nMaxCost=\n", "test");
        CHECK(c.max_cpu_usec == UINT64_MAX && c.max_cost == UINT64_MAX, "infinity and empty mean none");
        config_done(&c);
}

/* The new limits are known by name (an unknown one is refused with the
 * list, which must name them), and zero is refused like the others. */
static void test_limit_names(void) {
        _cleanup_free_ char *names = task_limit_names();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        TaskSpec s;

        CHECK(names && strstr(names, "max_cpu_sec") && strstr(names, "max_network_bytes") && strstr(names, "max_cost"),
              "the list of known limits names the budgets");
        CHECK_INT_EQ(task_limit_from_string("max_cpu_sec"), TASK_LIMIT_MAX_CPU_SEC, "max_cpu_sec known");
        task_spec_init(&s);
        CHECK(task_spec_set_limit(&s, "max_cpu_sec", 2, &e) >= 0 && s.limits[TASK_LIMIT_MAX_CPU_SEC] == 2 &&
              s.n_extra_limits == 0, "max_cpu_sec is a limit of its own, not an extra one");
        CHECK(task_spec_set_limit(&s, "max_cost", 0, &e) < 0, "max_cost=0 refused");
        sd_bus_error_free(&e);
        task_spec_done(&s);
}

/* The breaker's arithmetic: the task's limit overrides the default, an
 * unknown counter never trips, and the reason names the budget with the
 * figures as a person reads them. */
static void test_exceeded(void) {
        _cleanup_free_ char *reason = NULL;
        TaskResources r;
        TaskSpec s;
        Config c;

        config_init(&c);
        task_spec_init(&s);
        task_resources_init(&r);

        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, TASK_RESOURCE_UNKNOWN, NULL), _TASK_LIMIT_INVALID,
                     "no budget, nothing exceeded");
        s.limits[TASK_LIMIT_MAX_CPU_SEC] = 2;
        CHECK_UINT_EQ(task_budget_limit(&s, &c, TASK_LIMIT_MAX_CPU_SEC), 2 * USEC_PER_SEC, "seconds become µs");
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, TASK_RESOURCE_UNKNOWN, NULL), _TASK_LIMIT_INVALID,
                     "an unknown CPU counter does not trip");
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, 1999999, NULL), _TASK_LIMIT_INVALID, "just below");
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, 2400000, &reason), TASK_LIMIT_MAX_CPU_SEC,
                     "the live CPU figure trips it");
        CHECK_STR_EQ(reason, "CPU time 2.4 s of max_cpu_sec=2", "the reason names the budget and the figures");
        reason = mfree_ptr(reason);
        r.cpu_usec = 3000000;
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, 100, NULL), TASK_LIMIT_MAX_CPU_SEC,
                     "the counter counts when it is ahead of a live reading");

        task_resources_init(&r);
        s.limits[TASK_LIMIT_MAX_CPU_SEC] = TASK_LIMIT_UNSET;
        c.max_cost = 500000;
        r.cost_micros = 520000;
        strcpy(r.currency, "USD");
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, 0, &reason), TASK_LIMIT_MAX_COST, "the default MaxCost= trips");
        CHECK_STR_EQ(reason, "cost 0.52 USD of max_cost=0.50", "cost in the currency");
        reason = mfree_ptr(reason);
        s.limits[TASK_LIMIT_MAX_COST] = 1000000;
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, 0, NULL), _TASK_LIMIT_INVALID, "the task's limit overrides it");

        s.limits[TASK_LIMIT_MAX_NETWORK_BYTES] = 10 * 1024 * 1024;
        r.net_up_bytes = 2 * 1024 * 1024;
        r.net_down_bytes = 10 * 1024 * 1024;
        CHECK_INT_EQ(task_budget_exceeded(&s, &c, &r, 0, &reason), TASK_LIMIT_MAX_NETWORK_BYTES, "up and down count");
        CHECK_STR_EQ(reason, "network 12.0 MiB of max_network_bytes=10485760", "network in MiB");
        r.net_up_bytes = TASK_RESOURCE_UNKNOWN;
        r.net_down_bytes = UINT64_MAX - 1;
        CHECK_UINT_EQ(task_budget_used(&r, 0, TASK_LIMIT_MAX_NETWORK_BYTES), UINT64_MAX - 1, "no overflow");
        task_spec_done(&s);
        config_done(&c);
}

/* approve --limit=: only above what is used, or the task stops again at
 * once; only the budgets, not the sandbox's scope limits. */
static void test_raise(void) {
        _cleanup_free_ char *why = NULL;

        CHECK(task_limit_is_raisable(TASK_LIMIT_MAX_CPU_SEC) && task_limit_is_raisable(TASK_LIMIT_MAX_STEPS) &&
              !task_limit_is_raisable(TASK_LIMIT_MEMORY_MAX) && !task_limit_is_raisable(TASK_LIMIT_CPU_QUOTA_PERCENT),
              "the budgets may be raised, the scope limits not");
        CHECK_INT_EQ(task_budget_raise_check(TASK_LIMIT_MAX_CPU_SEC, 600, 2400000, NULL, &why), 0, "600 s above 2.4 s");
        CHECK(!why, "no reason when allowed");
        CHECK_ERRNO(task_budget_raise_check(TASK_LIMIT_MAX_CPU_SEC, 2, 2400000, NULL, &why), -ERANGE, "2 s below 2.4 s");
        CHECK_STR_EQ(why, "max_cpu_sec=2 is not above what the task has used (CPU time 2.4 s)", "the error says why");
        why = mfree_ptr(why);
        CHECK_ERRNO(task_budget_raise_check(TASK_LIMIT_MAX_STEPS, 7, 7, NULL, &why), -ERANGE, "equal to what is used");
        why = mfree_ptr(why);
        CHECK_INT_EQ(task_budget_raise_check(TASK_LIMIT_MAX_COST, 600000, 520000, "USD", &why), 0, "cost above");
        CHECK_ERRNO(task_budget_raise_check(TASK_LIMIT_MAX_COST, 500000, 520000, "USD", &why), -ERANGE, "cost below");
        CHECK_STR_EQ(why, "max_cost=0.50 is not above what the task has used (cost 0.52 USD)", "max_cost as an amount");
}

/* The daily quotas' arithmetic: days are UTC days since the epoch, an
 * unknown counter adds nothing, sums saturate rather than wrap, and the
 * reason a held task shows names the owner, the figure and the setting. */
static void test_quota(void) {
        _cleanup_free_ char *reason = NULL;
        QuotaUse u = { .owner = 1000 };
        TaskResources r;
        Config c;

        CHECK_UINT_EQ(quota_day_of(0), 0, "the epoch is day 0");
        CHECK_UINT_EQ(quota_day_of(USEC_PER_DAY - 1), 0, "23:59:59.999999 is the same day");
        CHECK_UINT_EQ(quota_day_of(USEC_PER_DAY), 1, "midnight UTC begins the next");
        CHECK_UINT_EQ(quota_day_of(1733356800ULL * USEC_PER_SEC), 20062, "2024-12-05 00:00 UTC is day 20062");

        task_resources_init(&r);
        r.cpu_usec = 3000 * USEC_PER_SEC;
        r.cost_micros = 1500000;
        strcpy(r.currency, "EUR");
        quota_use_add(&u, &r);
        task_resources_init(&r);        /* all unknown */
        quota_use_add(&u, &r);
        r.cpu_usec = 612 * USEC_PER_SEC;
        r.net_up_bytes = 10;
        r.net_down_bytes = 20;
        r.memory_peak = 4096;
        quota_use_add(&u, &r);
        CHECK(u.tasks == 3 && u.cpu_usec == 3612 * USEC_PER_SEC && u.cost_micros == 1500000 && u.net_bytes == 30 &&
              u.memory_peak == 4096 && streq(u.currency, "EUR") && !u.mixed_currencies,
              "three tasks summed, the unknown counters as 0");
        r.cpu_usec = UINT64_MAX - 2;
        quota_use_add(&u, &r);
        CHECK_UINT_EQ(u.cpu_usec, UINT64_MAX - 1, "the sum saturates below unknown");
        u.cpu_usec = 3612 * USEC_PER_SEC;

        config_init(&c);
        CHECK_INT_EQ(quota_exceeded(&c, &u, "alice", &reason), 0, "no quota, never held");
        c.max_cpu_usec_per_user_per_day = 3600 * USEC_PER_SEC;
        CHECK_INT_EQ(quota_exceeded(&c, &u, "alice", &reason), 1, "past MaxCPUSecPerUserPerDay=");
        CHECK_STR_EQ(reason, "waiting: alice used 3612 s CPU of MaxCPUSecPerUserPerDay=3600 today (UTC); new tasks "
                     "start after 00:00 UTC", "the reason names owner, figure and setting");
        reason = mfree_ptr(reason);
        c.max_cpu_usec_per_user_per_day = 3613 * USEC_PER_SEC;
        CHECK_INT_EQ(quota_exceeded(&c, &u, "alice", &reason), 0, "just below it");
        c.max_cost_per_user_per_day = 1500000;
        CHECK_INT_EQ(quota_exceeded(&c, &u, "alice", &reason), 1, "reaching MaxCostPerUserPerDay= holds");
        CHECK_STR_EQ(reason, "waiting: alice used 1.50 EUR of MaxCostPerUserPerDay=1.50 today (UTC); new tasks start "
                     "after 00:00 UTC", "cost in the tasks' currency");
        config_done(&c);
}

int main(void) {
        test_micros();
        test_config();
        test_limit_names();
        test_exceeded();
        test_raise();
        test_quota();
        return tap_done();
}
