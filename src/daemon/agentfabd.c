/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "bus-server.h"
#include "fs-util.h"
#include "log.h"
#include "manager.h"
#include "string-util.h"
#include "trace.h"

static BusKind arg_bus = BUS_SYSTEM;
static const char *arg_bus_address = NULL;
static const char *arg_state_dir = NULL;
static const char *arg_config = AGENTFAB_CONFIG_FILE;
static const char *arg_socket = AGENTFAB_DEFAULT_SOCKET;
static uint64_t arg_idle_timeout = 0;
static bool arg_idle_timeout_set = false;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "The agentfab daemon: keeps tasks, serves org.agentfab.Factory1.\n"
               "Normally started by systemd, through agentfab.socket or D-Bus activation.\n\n"
               "  -h --help                Show this help\n"
               "     --version             Show package version\n"
               "     --system              Serve on the system bus (default)\n"
               "     --session, --user     Serve on the session bus (development; no polkit)\n"
               "     --bus-address=ADDRESS Serve on the bus at ADDRESS (development)\n"
               "     --state-dir=PATH      Task records (default: $STATE_DIRECTORY or /var/lib/agentfab)\n"
               "     --socket=PATH         Stream socket to bind when not socket-activated\n"
               "                           (default: " AGENTFAB_DEFAULT_SOCKET ")\n"
               "     --config=PATH         Configuration file (default: " AGENTFAB_CONFIG_FILE ")\n"
               "     --idle-timeout=SEC    Exit after SEC idle; \"infinity\" never (overrides IdleTimeoutSec=)\n"
               "  -v --verbose             Log debug messages\n"
               "\nSee agentfabd(8).\n",
               program_invocation_short_name);
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_SYSTEM,
                ARG_SESSION,
                ARG_BUS_ADDRESS,
                ARG_STATE_DIR,
                ARG_SOCKET,
                ARG_CONFIG,
                ARG_IDLE_TIMEOUT,
        };
        static const struct option options[] = {
                { "help",         no_argument,       NULL, 'h'              },
                { "version",      no_argument,       NULL, ARG_VERSION      },
                { "system",       no_argument,       NULL, ARG_SYSTEM       },
                { "session",      no_argument,       NULL, ARG_SESSION      },
                { "user",         no_argument,       NULL, ARG_SESSION      },
                { "bus-address",  required_argument, NULL, ARG_BUS_ADDRESS  },
                { "state-dir",    required_argument, NULL, ARG_STATE_DIR    },
                { "socket",       required_argument, NULL, ARG_SOCKET       },
                { "config",       required_argument, NULL, ARG_CONFIG       },
                { "idle-timeout", required_argument, NULL, ARG_IDLE_TIMEOUT },
                { "verbose",      no_argument,       NULL, 'v'              },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentfab %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_SYSTEM:
                        arg_bus = BUS_SYSTEM;
                        break;
                case ARG_SESSION:
                        arg_bus = BUS_SESSION;
                        break;
                case ARG_BUS_ADDRESS:
                        arg_bus_address = optarg;
                        break;
                case ARG_STATE_DIR:
                        arg_state_dir = optarg;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_IDLE_TIMEOUT:
                        if (parse_sec(optarg, &arg_idle_timeout) < 0) {
                                log_error("Invalid idle timeout '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg_idle_timeout_set = true;
                        break;
                case 'v':
                        log_set_max_level(LOG_DEBUG);
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }

        if (optind < argc) {
                log_error("%s takes no arguments.", program_invocation_short_name);
                return -EINVAL;
        }
        return 1;
}

/* Every task at work holds descriptors (its sandbox's connection and output,
 * its repository's packs, its model call's socket), and we serve hundreds:
 * systemd's soft limit of 1024 is for programs that still use select(),
 * which we do not, so we take the hard limit it leaves us, as systemd does. */
static void rlimit_nofile_bump(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning_errno(errno, "Failed to raise the limit of open files to %llu, staying at the soft limit: %m",
                                  (unsigned long long) rl.rlim_max);
}

/* With AGENTFAB_TRACE=1: how old the process was when main() ran (its
 * exec and the unit's sandboxing, seen from the kernel's start time). */
static uint64_t process_age_usec(void) {
        _cleanup_free_ char *text = NULL;
        unsigned long long start = 0;
        struct timespec ts;
        long hz = sysconf(_SC_CLK_TCK);
        const char *p;

        if (read_file_at(AT_FDCWD, "/proc/self/stat", 4096, &text, NULL) < 0 || hz <= 0)
                return 0;
        /* After the command name's closing parenthesis: field 3 on; start time is field 22. */
        p = strrchr(text, ')');
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
                return 0;
        if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
                return 0;
        uint64_t now = (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
        uint64_t born = (uint64_t) start * USEC_PER_SEC / (uint64_t) hz;
        return now > born ? now - born : 0;
}

#define START_PHASE(name, t0)                                                   \
        do {                                                                    \
                TRACE_END(name, t0);                                            \
                t0 = TRACE_BEGIN();                                             \
        } while (0)

int main(int argc, char *argv[]) {
        /* Freed in this order: the bus room, then the manager below it. */
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_(bus_server_freep) BusServer *bus = NULL;
        const char *state_dir;
        uint64_t t0 = TRACE_BEGIN();
        int r;

        if (t0 > 0)
                trace_add("exec", process_age_usec());

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        /* Everything we create is ours alone unless said otherwise. */
        umask(0077);
        rlimit_nofile_bump();

        /* StateDirectory= may list several directories; the first is ours. */
        _cleanup_free_ char *from_env = NULL;
        state_dir = arg_state_dir;
        if (!state_dir && getenv("STATE_DIRECTORY")) {
                from_env = strndup(getenv("STATE_DIRECTORY"), strcspn(getenv("STATE_DIRECTORY"), ":"));
                if (!from_env)
                        return log_oom(), 1;
                state_dir = from_env;
        }
        if (!state_dir)
                state_dir = "/var/lib/agentfab";

        r = manager_new(&m, state_dir, arg_config);
        if (r < 0) {
                log_error_errno(r, "Failed to set up: %m");
                return 1;
        }
        if (arg_idle_timeout_set)
                m->factory.config.idle_timeout_usec = arg_idle_timeout;
        START_PHASE("setup", t0);

        r = manager_load_tasks(m);
        if (r < 0)
                return 1;
        START_PHASE("load", t0);

        r = bus_server_new(m, &bus);
        if (r < 0)
                return log_oom(), 1;

        /* With the sandboxes from systemd's fd store. */
        r = bus_server_listen_stream(bus, arg_socket);
        if (r < 0)
                return 1;
        START_PHASE("listen", t0);

        r = bus_server_connect(bus, arg_bus, arg_bus_address);
        if (r < 0)
                return 1;
        START_PHASE("bus", t0);

        r = manager_start_agents(m);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the agents: %m");
                return 1;
        }
        START_PHASE("agents", t0);
        if (t0 > 0) {
                TracePhase phases[TRACE_PHASES_MAX];
                size_t n = trace_take(phases);
                _cleanup_free_ char *text = trace_format(phases, n);
                log_info("Start-up (trace): %s.", text ?: "?");
        }

        r = manager_run(m);
        if (r < 0) {
                log_error_errno(r, "Event loop failed: %m");
                return 1;
        }
        return 0;
}
