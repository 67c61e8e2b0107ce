/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox-usage.h"
#include "tap.h"
#include "task-resources.h"

static char root[] = "/tmp/test-sandbox-usage-XXXXXX";

static void put(const char *rel, const char *text) {
        char path[512], *slash;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        for (slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                (void) mkdir(path, 0755);
                *slash = '/';
        }
        f = fopen(path, "we");
        if (f) {
                fputs(text, f);
                fclose(f);
        }
}

int main(void) {
        SandboxUsage u;

        if (!mkdtemp(root))
                return 1;

        /* A hybrid system, as the test harness boots: cpu and memory in v1
         * hierarchies, nothing but tracking in the unified one; the
         * sandbox's PID 1 below its scope. */
        put("cpu,cpuacct/agentfab.slice/agentfab-task-abc.scope/cpuacct.usage", "2500000000\n");
        put("memory/agentfab.slice/agentfab-task-abc.scope/memory.max_usage_in_bytes", "220200960\n");
        put("unified/agentfab.slice/agentfab-task-abc.scope/cgroup.procs", "");
        put("blkio/agentfab.slice/blkio.throttle.io_service_bytes_recursive", "8:0 Read 99\n");
        const char *hybrid =
                "12:blkio:/agentfab.slice\n"
                "4:memory:/agentfab.slice/agentfab-task-abc.scope\n"
                "3:cpu,cpuacct:/agentfab.slice/agentfab-task-abc.scope/payload\n"
                "1:name=systemd:/agentfab.slice/agentfab-task-abc.scope\n"
                "0::/agentfab.slice/agentfab-task-abc.scope\n";
        CHECK_ERRNO(sandbox_usage_read(root, 0, hybrid, "abc", &u), 0, "hybrid read");
        CHECK_UINT_EQ(u.cpu_usec, 2500000, "cpuacct.usage in µs, from the scope, not its child");
        CHECK_UINT_EQ(u.memory_peak, 220200960, "v1 memory peak");
        CHECK_UINT_EQ(u.io_read_bytes, TASK_RESOURCE_UNKNOWN, "blkio not enabled for the scope: unknown, not the slice's");

        /* cgroup2 with its controllers: it wins where it has them. */
        put("unified/agentfab.slice/agentfab-task-abc.scope/cpu.stat", "usage_usec 3000000\nuser_usec 2000000\n");
        put("unified/agentfab.slice/agentfab-task-abc.scope/memory.peak", "300000000\n");
        put("unified/agentfab.slice/agentfab-task-abc.scope/io.stat",
            "8:0 rbytes=1000 wbytes=2000 rios=1 wios=2\n259:0 rbytes=24 wbytes=48 dbytes=0\n");
        CHECK_ERRNO(sandbox_usage_read(root, 0, hybrid, "abc", &u), 0, "unified read");
        CHECK_UINT_EQ(u.cpu_usec, 3000000, "the larger CPU time");
        CHECK_UINT_EQ(u.memory_peak, 300000000, "memory.peak");
        CHECK(u.io_read_bytes == 1024 && u.io_write_bytes == 2048, "io.stat summed over devices (%llu/%llu)",
              (unsigned long long) u.io_read_bytes, (unsigned long long) u.io_write_bytes);

        /* Not the task's scope: nothing of another's is read. */
        CHECK_ERRNO(sandbox_usage_read(root, 0, hybrid, "abd", &u), -ESRCH, "another task's scope refused");
        CHECK_ERRNO(sandbox_usage_read(root, 0, "0::/agentfab.slice/agentfab-task-abc.scope.x\n", "abc", &u), -ESRCH,
                    "a longer name is not the scope");
        CHECK_ERRNO(sandbox_usage_read(root, 0, "0::/x/../agentfab-task-abc.scope\n", "abc", &u), -ESRCH,
                    "a path with .. is not read");
        CHECK_ERRNO(sandbox_usage_read(root, 0, "garbage", "abc", &u), -ESRCH, "garbage");

        /* Garbage in a counter: unknown, not a number made up. */
        put("memory/agentfab.slice/agentfab-task-abc.scope/memory.max_usage_in_bytes", "lots\n");
        CHECK_ERRNO(sandbox_usage_read(root, 0, "4:memory:/agentfab.slice/agentfab-task-abc.scope\n", "abc", &u), 0,
                    "v1 only read");
        CHECK_UINT_EQ(u.memory_peak, TASK_RESOURCE_UNKNOWN, "a bad figure is unknown");
        CHECK_UINT_EQ(u.cpu_usec, TASK_RESOURCE_UNKNOWN, "no cpu hierarchy: unknown");

        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        (void) system(cmd);
        return tap_done();
}
