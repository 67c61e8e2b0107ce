/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentfab-bus.h"
#include "bus-client.h"
#include "eval-corpus.h"
#include "eval-report.h"
#include "eval-run.h"
#include "eval.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"

extern char **environ;

/* Where the package installs what eval uses; the environment variables
 * AGENTFAB_EVAL_CORPUS, AGENTFAB_EVAL_AGENT and AGENTFAB_SANDBOX override
 * them, for a build that is not installed (agentfabctl(1), ENVIRONMENT). */
#ifndef EVAL_CORPUS_DIR
#define EVAL_CORPUS_DIR "/usr/share/agentfab/corpus"
#endif
#ifndef EVAL_AGENT_PATH
#define EVAL_AGENT_PATH "/usr/libexec/agentfab-eval-agent"
#endif
#ifndef SANDBOX_PATH
#define SANDBOX_PATH "/usr/bin/agentfab-sandbox"
#endif

#define EVAL_DEFAULT_BUILTIN_PORT 8431u
#define EVAL_MAX_RUNS 1000u
#define EVAL_MAX_JOBS 64u
#define EVAL_POLL_USEC (500 * USEC_PER_MSEC)

/* The built-in agents, as eval-agent.py names them. */
static const char *const builtin_agents[] = {
        "oracle", "null", "oracle-whitespace", "oracle-wrong-first", "oracle-text-calls", "oracle-cut-off",
        "cheat-weaken-tests", "cheat-delete-tests",
};

static struct {
        char **agents;
        unsigned runs;
        const char *tasks;
        bool compare;
        unsigned jobs;
        const char *builtin_profile;
        unsigned builtin_port;
        uint64_t timeout_usec;
        bool keep;
} arg = {
        .runs = 1,
        .jobs = 1,
        .builtin_profile = "eval",
        .builtin_port = EVAL_DEFAULT_BUILTIN_PORT,
        .timeout_usec = 1800 * USEC_PER_SEC,
};

static volatile sig_atomic_t interrupted = 0;

void eval_options_free(void) {
        strv_free(arg.agents);
        arg.agents = NULL;
}

static bool builtin_agent_is_valid(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(builtin_agents); i++)
                if (streq(builtin_agents[i], name))
                        return true;
        return false;
}

static int add_agents(const char *list) {
        _cleanup_free_ char *copy = strdup(list);
        char *next = copy, *a;

        if (!copy)
                return -ENOMEM;
        while ((a = strsep(&next, ","))) {
                if (isempty(a))
                        continue;
                if (!builtin_agent_is_valid(a)) {
                        fprintf(stderr, "Unknown built-in agent '%s'. The built-in agents:", a);
                        for (size_t i = 0; i < ELEMENTSOF(builtin_agents); i++)
                                fprintf(stderr, " %s", builtin_agents[i]);
                        fprintf(stderr, "\n");
                        return -EINVAL;
                }
                bool dup = false;
                for (char **x = arg.agents; x && *x; x++)
                        dup = dup || streq(*x, a);
                if (!dup && strv_extend(&arg.agents, a) < 0)
                        return -ENOMEM;
        }
        return 1;
}

static int parse_unsigned(const char *what, const char *s, unsigned min, unsigned max, unsigned *ret) {
        uint64_t v;
        if (safe_atou64(s, &v) < 0 || v < min || v > max) {
                fprintf(stderr, "Invalid %s '%s': a number from %u to %u.\n", what, s, min, max);
                return -EINVAL;
        }
        *ret = (unsigned) v;
        return 1;
}

int eval_parse_option(int option, const char *a) {
        switch (option) {
        case EVAL_OPT_RUNS:
                return parse_unsigned("--runs", a, 1, EVAL_MAX_RUNS, &arg.runs);
        case EVAL_OPT_TASKS:
                arg.tasks = a;
                return 1;
        case EVAL_OPT_ORACLE:
                return add_agents("oracle");
        case EVAL_OPT_NULL:
                return add_agents("null");
        case EVAL_OPT_AGENT:
                return add_agents(a);
        case EVAL_OPT_COMPARE:
                arg.compare = true;
                return 1;
        case EVAL_OPT_JOBS:
                return parse_unsigned("--jobs", a, 1, EVAL_MAX_JOBS, &arg.jobs);
        case EVAL_OPT_BUILTIN_PROFILE:
                arg.builtin_profile = a;
                return 1;
        case EVAL_OPT_BUILTIN_PORT:
                return parse_unsigned("--builtin-port", a, 1, 65535, &arg.builtin_port);
        case EVAL_OPT_TIMEOUT: {
                uint64_t usec;
                if (parse_sec(a, &usec) < 0 || usec == 0) {
                        fprintf(stderr, "Invalid --timeout '%s'.\n", a);
                        return -EINVAL;
                }
                arg.timeout_usec = usec;
                return 1;
        }
        case EVAL_OPT_KEEP:
                arg.keep = true;
                return 1;
        }
        return -EINVAL;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

static void on_signal(int sig) {
        (void) sig;
        interrupted = 1;
}

/* ---- the built-in agents' server ---- */

typedef struct Agent {
        pid_t pid;
} Agent;

static void agent_stop(Agent *a) {
        if (a->pid <= 0)
                return;
        (void) kill(a->pid, SIGTERM);
        while (waitpid(a->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        a->pid = 0;
}

/* Starts eval-agent.py serving agent on the built-in profile's port, and
 * waits for its "ready" line. */
static int agent_start(Agent *a, const char *corpus, const char *agent) {
        const char *path = getenv("AGENTFAB_EVAL_AGENT") ?: EVAL_AGENT_PATH;
        char port[16], line[64] = {};
        int pipefd[2], r;
        posix_spawn_file_actions_t fa;
        size_t n = 0;

        snprintf(port, sizeof(port), "%u", arg.builtin_port);
        char *argv[] = { (char *) path, (char *) "serve", (char *) "--corpus", (char *) corpus, (char *) "--agent",
                         (char *) agent, (char *) "--port", port, NULL };
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
        r = posix_spawn(&a->pid, path, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        safe_close(pipefd[1]);
        _cleanup_close_ int fd = pipefd[0];
        if (r != 0) {
                a->pid = 0;
                fprintf(stderr, "Cannot run the built-in agents' server '%s': %s\n", path, strerror(r));
                return -r;
        }
        uint64_t deadline = now_usec() + 30 * USEC_PER_SEC;
        while (!memchr(line, '\n', n) && n < sizeof(line) - 1) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                uint64_t now = now_usec();
                if (now >= deadline || poll(&p, 1, (int) ((deadline - now) / USEC_PER_MSEC) + 1) <= 0)
                        break;
                ssize_t k = read(fd, line + n, sizeof(line) - 1 - n);
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        if (!strneq(line, "ready ", 6)) {
                fprintf(stderr, "The built-in agents' server did not start on 127.0.0.1:%u (see above).\n",
                        arg.builtin_port);
                agent_stop(a);
                return -EIO;
        }
        return 0;
}

/* ---- the runs ---- */

static void progress(bool tty, const char *profile, size_t done, size_t total, unsigned passed, uint64_t start) {
        if (!tty)
                return;
        /* Straight to the terminal: the stream filter of stderr would show
         * the carriage return as an escape. The profile's name is the
         * user's own argument. */
        dprintf(STDERR_FILENO, "\r\033[K%s: %zu of %zu done, %u passed, %" PRIu64 " s", profile, done, total, passed,
                (now_usec() - start) / USEC_PER_SEC);
}

static int run_profile(EvalContext *c, EvalResult *results, size_t n, const char *model, bool builtin, bool tty) {
        _cleanup_free_ EvalRun *slots = calloc(arg.jobs, sizeof(EvalRun));
        _cleanup_free_ bool *busy = calloc(arg.jobs, sizeof(bool));
        size_t next = 0, done = 0, submitted = 0;
        unsigned passed = 0;
        uint64_t start = now_usec();
        int r = 0;

        if (!slots || !busy)
                return -ENOMEM;
        while (done < n) {
                for (unsigned j = 0; j < arg.jobs && next < n && !interrupted; j++) {
                        if (busy[j])
                                continue;
                        r = eval_run_start(c, &slots[j], &results[next++], model);
                        if (r < 0)
                                break;
                        busy[j] = true;
                        submitted += slots[j].submitted;
                        /* The profile's first task refused (no such profile,
                         * say): the others would be too. */
                        if (submitted == 0 && !slots[j].submitted) {
                                fprintf(stderr, "The first task of '%s' was not submitted; its other runs are left out.%s\n",
                                        results[0].profile, builtin ? " Does agentfab.conf have the model profile of the "
                                        "built-in agents? See agentfab-corpus(5), \"BUILT-IN AGENTS\"." : "");
                                n = next;
                        }
                }
                if (r < 0 || interrupted)
                        break;
                (void) usleep(EVAL_POLL_USEC);
                for (unsigned j = 0; j < arg.jobs; j++) {
                        if (!busy[j])
                                continue;
                        r = eval_run_poll(c, &slots[j]);
                        if (r < 0)
                                break;
                        if (r > 0) {
                                passed += slots[j].result->passed;
                                done++;
                                busy[j] = false;
                                eval_run_done(&slots[j]);
                        }
                }
                if (r < 0)
                        break;
                r = 0;
                progress(tty, results[0].profile, done, n, passed, start);
        }

        /* Interrupted or failed: what is at work is cancelled, not left. */
        for (unsigned j = 0; j < arg.jobs; j++)
                if (busy[j]) {
                        if (slots[j].active)
                                (void) sd_bus_call_method(c->bus, AGENTFAB_BUS_NAME, slots[j].path,
                                                          AGENTFAB_TASK_INTERFACE, "Cancel", NULL, NULL, NULL);
                        eval_run_done(&slots[j]);
                }
        if (tty)
                dprintf(STDERR_FILENO, "\r\033[K");
        if (interrupted)
                return -EINTR;
        return r;
}

static char *daemon_version(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char *v = NULL;
        if (sd_bus_get_property_string(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                       "Version", &error, &v) < 0)
                return NULL;
        return v;
}

/* One basic value of a variant, as text: strings as they are, booleans as
 * yes/no, numbers in decimal. NULL in *ret for a type not shown. */
static int bus_read_basic_as_text(sd_bus_message *m, char type, char **ret) {
        union {
                const char *s;
                int b;
                uint32_t u;
                uint64_t t;
                double d;
        } v;
        int r;

        *ret = NULL;
        switch (type) {
        case 's':
                r = sd_bus_message_read_basic(m, type, &v.s);
                return r < 0 ? r : (*ret = strdup(v.s)) ? 0 : -ENOMEM;
        case 'b':
                r = sd_bus_message_read_basic(m, type, &v.b);
                return r < 0 ? r : (*ret = strdup(v.b ? "yes" : "no")) ? 0 : -ENOMEM;
        case 'u':
                r = sd_bus_message_read_basic(m, type, &v.u);
                return r < 0 ? r : asprintf(ret, "%" PRIu32, v.u) < 0 ? -ENOMEM : 0;
        case 't':
                r = sd_bus_message_read_basic(m, type, &v.t);
                return r < 0 ? r : asprintf(ret, "%" PRIu64, v.t) < 0 ? -ENOMEM : 0;
        case 'd':
                r = sd_bus_message_read_basic(m, type, &v.d);
                return r < 0 ? r : asprintf(ret, "%g", v.d) < 0 ? -ENOMEM : 0;
        default:
                return sd_bus_message_skip(m, (char[]) { type, 0 });
        }
}

/* ListModelProfiles() as {"NAME": {"Endpoint": ..., ...}, ...}, for the
 * report's stamp; NULL when the daemon cannot say. Settings are shown as
 * strings, in the names agentfab.conf(5) gives them. */
static json_object *model_profiles_settings(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_json_ json_object *all = NULL;
        const char *name;
        int r;

        if (sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "ListModelProfiles", &error, &reply, NULL) < 0)
                return NULL;
        all = json_object_new_object();
        if (!all || sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(sa{sv})") < 0)
                return NULL;
        while ((r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_STRUCT, "sa{sv}")) > 0) {
                _cleanup_json_ json_object *settings = json_object_new_object();
                const char *key;

                if (!settings || sd_bus_message_read(reply, "s", &name) < 0 ||
                    sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{sv}") < 0)
                        return NULL;
                while (sd_bus_message_enter_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv") > 0) {
                        _cleanup_free_ char *text = NULL;
                        const char *contents = NULL;
                        char type;

                        if (sd_bus_message_read(reply, "s", &key) < 0 ||
                            sd_bus_message_peek_type(reply, &type, &contents) < 0 || !contents ||
                            sd_bus_message_enter_container(reply, SD_BUS_TYPE_VARIANT, contents) < 0)
                                return NULL;
                        if (bus_read_basic_as_text(reply, contents[0], &text) < 0 ||
                            sd_bus_message_exit_container(reply) < 0 || sd_bus_message_exit_container(reply) < 0)
                                return NULL;
                        if (text && json_add_string(settings, key, text) < 0)
                                return NULL;
                }
                if (sd_bus_message_exit_container(reply) < 0 || sd_bus_message_exit_container(reply) < 0)
                        return NULL;
                json_object_object_add(all, name, TAKE_PTR(settings));
        }
        if (r < 0)
                return NULL;
        return TAKE_PTR(all);
}

typedef struct Results {
        EvalResult *r;
        size_t n;
} Results;

static void results_done(Results *rs) {
        for (size_t i = 0; i < rs->n; i++)
                eval_result_done(&rs->r[i]);
        free(rs->r);
}

/* The runs' directory: removed at the end, or kept with --keep. */
static void workdir_done(char **dir) {
        if (!*dir)
                return;
        if (arg.keep)
                fprintf(stderr, "The runs' repositories and grading trees are kept in %s.\n", *dir);
        else
                (void) rm_rf_at(AT_FDCWD, *dir);
        free(*dir);
}

static void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

/* Every profile's runs, one profile after the other: a built-in agent's
 * server serves one agent at a time. */
static int run_all(EvalContext *c, const EvalCorpus *corpus, char **profiles, size_t n_models, Results *rs) {
        bool tty = isatty(STDERR_FILENO);
        int r;

        rs->r = calloc(strv_length(profiles) * arg.runs * corpus->n_tasks, sizeof(EvalResult));
        if (!rs->r)
                return -ENOMEM;
        for (size_t p = 0; profiles[p] && !interrupted; p++) {
                bool builtin = p >= n_models;
                Agent agent = {};
                size_t first = rs->n;

                for (unsigned run = 1; run <= arg.runs; run++)
                        for (size_t i = 0; i < corpus->n_tasks; i++) {
                                EvalResult *res = &rs->r[rs->n++];
                                res->task = &corpus->tasks[i];
                                res->run = run;
                                res->solvable = corpus->tasks[i].solvable;
                                res->outcome = EVAL_ERROR;
                                res->task_name = strdup(corpus->tasks[i].name);
                                res->profile = strdup(profiles[p]);
                                if (!res->task_name || !res->profile)
                                        return -ENOMEM;
                        }
                if (builtin) {
                        r = agent_start(&agent, corpus->path, profiles[p]);
                        if (r < 0)
                                return r;
                }
                r = run_profile(c, rs->r + first, rs->n - first, builtin ? arg.builtin_profile : profiles[p], builtin, tty);
                agent_stop(&agent);
                if (r < 0)
                        return r;
        }
        return 0;
}

int eval_verb(int argc, char *argv[], const char *model, const char *json_file, bool ask_password,
              int (*connect)(sd_bus **ret)) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(eval_corpus_done) EvalCorpus corpus = {};
        _cleanup_strv_free_ char **profiles = NULL;
        _cleanup_free_ char *dversion = NULL;
        _cleanup_json_ json_object *profile_settings = NULL;
        _cleanup_(results_done) Results rs = {};
        _cleanup_(workdir_done) char *workdir = NULL;
        _cleanup_(fclosep) FILE *json = NULL;
        int r, ret = EXIT_OK;

        if (arg.compare) {
                if (argc != 3) {
                        fprintf(stderr, "eval --compare takes two reports: agentfabctl eval --compare A.json B.json\n");
                        return EXIT_USAGE;
                }
                return eval_compare(argv[1], argv[2]);
        }
        if (argc > 2) {
                fprintf(stderr, "eval takes at most one corpus.\n");
                return EXIT_USAGE;
        }

        /* The profiles in the order given: the models, then the built-in agents. */
        if (model) {
                _cleanup_free_ char *copy = strdup(model);
                char *next = copy, *p;
                if (!copy)
                        return EXIT_FAIL;
                while ((p = strsep(&next, ",")))
                        if (!isempty(p) && strv_extend(&profiles, p) < 0)
                                return EXIT_FAIL;
        }
        size_t n_models = strv_length(profiles);
        for (char **a = arg.agents; a && *a; a++) {
                for (char **p = profiles; p && *p; p++)
                        if (streq(*p, *a)) {
                                fprintf(stderr, "'%s' is the name of a built-in agent; a model profile of that name "
                                        "cannot be measured beside it.\n", *a);
                                return EXIT_USAGE;
                        }
                if (strv_extend(&profiles, *a) < 0)
                        return EXIT_FAIL;
        }
        if (!profiles) {
                fprintf(stderr, "Name what to measure: --model=PROFILE[,PROFILE...], --oracle, --null or --agent=NAME.\n");
                return EXIT_USAGE;
        }

        const char *path = argc > 1 ? argv[1] : getenv("AGENTFAB_EVAL_CORPUS") ?: EVAL_CORPUS_DIR;
        r = eval_corpus_load(path, arg.tasks, &corpus);
        if (r < 0)
                return r == -ENOMEM ? EXIT_FAIL : EXIT_USAGE;

        if (json_file && !(json = fopen(json_file, "we"))) {
                fprintf(stderr, "Cannot write '%s': %m\n", json_file);
                return EXIT_FAIL;
        }
        if (connect(&bus) < 0)
                return EXIT_FAIL;
        dversion = daemon_version(bus);
        profile_settings = model_profiles_settings(bus);
        /* A built-in agent speaks through the daemon's profile for them
         * (--builtin-profile=): its report is stamped with that one's. */
        json_object *builtin_settings = NULL;
        if (profile_settings && json_object_object_get_ex(profile_settings, arg.builtin_profile, &builtin_settings))
                for (char **a = arg.agents; a && *a; a++)
                        json_object_object_add(profile_settings, *a, json_object_get(builtin_settings));

        const char *tmp = getenv("TMPDIR") ?: "/tmp";
        if (asprintf(&workdir, "%s/agentfab-eval.XXXXXX", tmp) < 0)
                return EXIT_FAIL;
        if (!mkdtemp(workdir)) {
                fprintf(stderr, "Cannot make a directory in '%s': %m\n", tmp);
                workdir = mfree_ptr(workdir);
                return EXIT_FAIL;
        }

        struct sigaction sa = { .sa_handler = on_signal };
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);

        (void) git_libgit2_init();
        EvalContext c = {
                .bus = bus,
                .workdir = workdir,
                .sandbox = getenv("AGENTFAB_SANDBOX") ?: SANDBOX_PATH,
                .ask_password = ask_password,
                .timeout_usec = arg.timeout_usec,
        };
        r = eval_sandbox_probe(&c);
        if (r < 0)
                return r == -ENOMEM ? (log_oom(), EXIT_FAIL) : EXIT_FAIL;
        r = run_all(&c, &corpus, profiles, n_models, &rs);
        (void) git_libgit2_shutdown();
        if (r == -EACCES) {
                fprintf(stderr, "Not allowed to submit tasks.\n");
                return EXIT_DENIED;
        }
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAIL;
        if (r == -EINTR)
                printf("Interrupted: the report covers the runs that ended.\n");
        else if (r < 0) {
                fprintf(stderr, "Failed to run the tasks: %s\n", strerror(-r));
                ret = EXIT_FAIL;
        }

        EvalStamp stamp = {
                .corpus_name = corpus.name,
                .corpus_version = corpus.version,
                .corpus_path = corpus.path,
                .version = PROJECT_VERSION,
                .daemon_version = dversion,
                .runs = arg.runs,
                .n_tasks = corpus.n_tasks,
                .profiles = profile_settings,
        };
        for (size_t i = 0; i < corpus.n_tasks; i++)
                stamp.n_named += corpus.tasks[i].files_named;
        stamp.repository_map = corpus.n_tasks ? (double) stamp.n_named / corpus.n_tasks : 0;

        eval_print_stamp(stdout, &stamp);
        for (size_t i = 0; i < rs.n; i++)
                if (json && eval_result_ended(&rs.r[i]) && eval_write_result(json, &rs.r[i]) < 0)
                        return log_oom(), EXIT_FAIL;
        for (char **p = profiles; *p; p++) {
                _cleanup_(eval_summary_done) EvalSummary s = {};
                if (eval_summarize(rs.r, rs.n, *p, &s) < 0)
                        return log_oom(), EXIT_FAIL;
                if (s.tasks == 0)
                        continue;
                eval_print_profile(stdout, rs.r, rs.n, &s, &stamp);
                if (json && eval_write_summary(json, &s, &stamp) < 0)
                        return log_oom(), EXIT_FAIL;
        }
        if (json) {
                r = fclose(TAKE_PTR(json));
                if (r != 0) {
                        fprintf(stderr, "Cannot write '%s': %m\n", json_file);
                        return EXIT_FAIL;
                }
        }
        return ret;
}
