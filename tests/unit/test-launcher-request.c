/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "launcher-request.h"
#include "tap.h"

static const LauncherLimits maxima = LAUNCHER_LIMITS_DEFAULT;

static int parse(const char *text, LauncherRequest *r, const char **error) {
        return launcher_request_parse(text, strlen(text), &maxima, r, error);
}

/* Expects a refusal whose message contains want. */
static void refused(const char *text, const char *want, const char *why) {
        LauncherRequest r = {};
        const char *error = NULL;
        int k = parse(text, &r, &error);
        CHECK(k == -EINVAL && error && strstr(error, want), "%s: %s -> %s", why, text, strempty(error));
        launcher_request_done(&r);
}

int main(void) {
        LauncherRequest r = {};
        const char *error = NULL;
        int k;

        /* A complete request is taken as given (below the maxima). */
        k = parse("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"memory_max\":104857600,"
                  "\"tasks_max\":50,\"cpu_quota_percent\":50,\"runtime_max_sec\":60},\"env\":{\"FOO\":\"bar\"}}", &r, &error);
        CHECK(k == 0 && r.type == LAUNCHER_REQUEST_SANDBOX && streq(r.task, "0123456789ab"), "valid request: %s", strempty(error));
        CHECK(r.limits.memory_max == 104857600 && r.limits.tasks_max == 50 && r.limits.cpu_quota_percent == 50 &&
              r.limits.runtime_max_sec == 60 && !r.clamped, "limits below the maxima kept");
        CHECK(r.env && streq(r.env[0], "FOO=bar") && !r.env[1], "env kept as NAME=VALUE");
        launcher_request_done(&r);

        /* No limits: the maxima, which are the defaults (2G, 512, 100%). */
        k = parse("{\"type\":\"sandbox\",\"task\":\"0123456789ab\"}", &r, &error);
        CHECK(k == 0 && r.limits.memory_max == 2ULL << 30 && r.limits.tasks_max == 512 &&
              r.limits.cpu_quota_percent == 100 && r.limits.runtime_max_sec == UINT64_MAX && !r.env,
              "no limits: the defaults");
        launcher_request_done(&r);

        /* The daemon cannot grant a sandbox more than the launcher allows:
         * huge limits are clamped, not refused, and that is noted. */
        k = parse("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"memory_max\":18446744073709551615,"
                  "\"tasks_max\":1000000000,\"cpu_quota_percent\":10000}}", &r, &error);
        CHECK(k == 0 && r.limits.memory_max == 2ULL << 30 && r.limits.tasks_max == 512 &&
              r.limits.cpu_quota_percent == 100 && r.clamped, "huge limits clamped to the maxima");
        launcher_request_done(&r);

        /* The egress proxy's channel comes along only when asked for, and
         * the flag must be a boolean: the fds are taken by position. */
        k = parse("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"cache\":true,\"proxy\":true}", &r, &error);
        CHECK(k == 0 && r.cache && r.proxy, "cache and proxy flags: %s", strempty(error));
        launcher_request_done(&r);
        k = parse("{\"type\":\"sandbox\",\"task\":\"0123456789ab\"}", &r, &error);
        CHECK(k == 0 && !r.proxy, "no proxy unless asked");
        launcher_request_done(&r);
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"proxy\":1}", "boolean", "proxy flag not a boolean");

        /* The history (the task's ledger, read-only for git) likewise. */
        k = parse("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"cache\":true,\"history\":true,\"proxy\":true}",
                  &r, &error);
        CHECK(k == 0 && r.cache && r.history && r.proxy, "cache, history and proxy flags: %s", strempty(error));
        launcher_request_done(&r);
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"history\":\"yes\"}", "boolean",
                "history flag not a boolean");

        /* The task id becomes a unit name: only the daemon's own id format. */
        refused("{\"type\":\"sandbox\",\"task\":\"../x\"}", "task", "path in the task id");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789abc\"}", "task", "task id too long");
        refused("{\"type\":\"sandbox\",\"task\":\"\"}", "task", "empty task id");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789AB\"}", "task", "upper case task id");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789a\\u0000\"}", "task", "NUL in the task id");
        refused("{\"type\":\"sandbox\"}", "task", "no task id");
        refused("{\"type\":\"sandbox\",\"task\":123456789012}", "task", "task id of the wrong type");

        /* Wrong types and unknown fields are refused, not ignored. */
        refused("[1,2]", "not an object", "array");
        refused("{\"task\":\"0123456789ab\"}", "type", "no type");
        refused("{\"type\":\"exec\"}", "unknown request type", "unknown type");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":[]}", "limits", "limits as array");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"memory_max\":\"2G\"}}", "positive", "limit as string");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"memory_max\":1.5}}", "positive", "limit as double");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"tasks_max\":0}}", "positive", "zero limit");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"tasks_max\":-5}}", "positive", "negative limit");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"limits\":{\"io_weight\":5}}", "unknown limit", "unknown limit");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"uid\":0}", "unknown field", "unknown field (uid)");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\"} x", "JSON", "trailing garbage");
        refused("{\"type\":\"sandbox\",", "JSON", "truncated");

        /* The environment: names a shell could set, no loader variables, bounded. */
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"LD_PRELOAD\":\"/workspace/x.so\"}}", "name", "LD_PRELOAD");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"LD_LIBRARY_PATH\":\"/x\"}}", "name", "LD_LIBRARY_PATH");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"A=B\":\"x\"}}", "name", "'=' in a name");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"1A\":\"x\"}}", "name", "name starting with a digit");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"\":\"x\"}}", "name", "empty name");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"A-B\":\"x\"}}", "name", "'-' in a name");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"A\":1}}", "strings", "value not a string");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"A\":\"x\\u0000y\"}}", "strings", "NUL in a value");
        refused("{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":[]}", "env", "env as array");
        CHECK(launcher_env_name_is_valid("_A1") && launcher_env_name_is_valid("LDX") && !launcher_env_name_is_valid("LD_X"),
              "env name rule");

        /* Bounds: too many variables, too long a value, too long a line. */
        char *big = malloc(LAUNCHER_REQUEST_MAX + 64);
        if (!big)
                abort();
        char *p = stpcpy(big, "{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{");
        for (int i = 0; i < LAUNCHER_ENV_MAX + 1; i++)
                p += sprintf(p, "%s\"V%i\":\"x\"", i ? "," : "", i);
        strcpy(p, "}}");
        refused(big, "too many", "65 variables");
        p = stpcpy(big, "{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"env\":{\"A\":\"");
        memset(p, 'x', LAUNCHER_ENV_VALUE_MAX + 1);
        strcpy(p + LAUNCHER_ENV_VALUE_MAX + 1, "\"}}");
        refused(big, "4096", "value of 4097 bytes");
        p = stpcpy(big, "{\"type\":\"sandbox\",\"task\":\"0123456789ab\",\"x\":\"");
        memset(p, 'x', LAUNCHER_REQUEST_MAX);
        strcpy(p + LAUNCHER_REQUEST_MAX, "\"}");
        refused(big, "too long", "oversized line");
        free(big);

        /* Reap: a list of valid ids, possibly empty. */
        k = parse("{\"type\":\"reap\",\"keep\":[\"0123456789ab\",\"ba9876543210\"]}", &r, &error);
        CHECK(k == 0 && r.type == LAUNCHER_REQUEST_REAP && r.keep && streq(r.keep[1], "ba9876543210") && !r.keep[2],
              "reap with keep list");
        launcher_request_done(&r);
        k = parse("{\"type\":\"reap\",\"keep\":[]}", &r, &error);
        CHECK(k == 0 && r.keep && !r.keep[0], "reap with empty keep list: all go");
        launcher_request_done(&r);
        refused("{\"type\":\"reap\"}", "keep", "reap without keep");
        refused("{\"type\":\"reap\",\"keep\":[\"../../x\"]}", "task ids", "reap with a bad id");
        refused("{\"type\":\"reap\",\"keep\":\"0123456789ab\"}", "keep", "keep as string");

        /* Freeze and thaw name a task and nothing else: no path, no unit;
         * the scope comes from the pidfd sent with the request. */
        k = parse("{\"type\":\"freeze\",\"task\":\"0123456789ab\"}", &r, &error);
        CHECK(k == 0 && r.type == LAUNCHER_REQUEST_FREEZE && streq(r.task, "0123456789ab"), "freeze request");
        launcher_request_done(&r);
        k = parse("{\"type\":\"thaw\",\"task\":\"0123456789ab\"}", &r, &error);
        CHECK(k == 0 && r.type == LAUNCHER_REQUEST_THAW, "thaw request");
        launcher_request_done(&r);
        refused("{\"type\":\"freeze\"}", "task id", "freeze without task");
        refused("{\"type\":\"freeze\",\"task\":\"../unified/x\"}", "task id", "freeze with a path for a task");
        refused("{\"type\":\"thaw\",\"task\":\"0123456789ab\",\"cgroup\":\"/sys/fs/cgroup\"}", "unknown field",
                "thaw with a cgroup path");

        return tap_done();
}
