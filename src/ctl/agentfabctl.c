/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <systemd/sd-bus.h>
#include <time.h>

#include "agentfab-bus.h"
#include "audit-list.h"
#include "audit-verify.h"
#include "bus-client.h"
#include "eval.h"
#include "export-client.h"
#include "fleet-list.h"
#include "fleet-task.h"
#include "json-util.h"
#include "log.h"
#include "limit-word.h"
#include "polkit-agent.h"
#include "stream-client.h"
#include "string-util.h"
#include "submit-request.h"
#include "usage.h"
#include "task-id.h"
#include "task-info.h"
#include "task-list.h"
#include "task-state.h"
#include "terminal-escape.h"

static bool arg_json = false;
static const char *arg_json_file = NULL;
static bool arg_ask_password = true;
static bool arg_follow = false;
static bool arg_session = false;
static const char *arg_bus_address = NULL;
static const char *arg_socket = NULL;
static const char *arg_repo = NULL;
static const char *arg_goal = NULL;
static const char *arg_acceptance = NULL;
static const char *arg_test = NULL;
static const char *arg_coverage_report = NULL;
static const char *arg_base = NULL;
static const char *arg_model = NULL;
static const char *arg_comment = NULL;
static const char *arg_format = "mbox";
static const char *arg_replay = NULL;
static const char *arg_push_url = NULL;
static const char *arg_forge = NULL;
static const char *arg_forge_repository = NULL;
static const char *arg_pr_base = NULL;
static bool arg_submodules = false;
static const char *arg_environment = NULL;
static const char *arg_ref = NULL;
static bool arg_verify = false;
static char **arg_limits = NULL;
static char **arg_allow_hosts = NULL;
static char **arg_states = NULL;
static const char *arg_since = NULL;
static const char *arg_user = NULL;
static bool arg_all = false;
static bool arg_fleet = false;
static const char *arg_directory = NULL;
static char **arg_files = NULL;
static bool arg_merge = false;

static void help(void) {
        printf("%s [OPTIONS...] COMMAND ...\n\n"
               "Control the agentfab software factory.\n\n"
               "Commands:\n"
               "  submit --repo PATH --goal TEXT [--test CMD] [--base REF]\n"
               "                               Submit a task; prints its id\n"
               "  list [--all] [--state=STATE,...] [--fleet]\n"
               "                               List the tasks not finished (all with --all)\n"
               "  status ID                    Show a task\n"
               "  cancel ID                    Cancel a task\n"
               "  approve ID [--comment=TEXT] [--allow-host=HOST...] [--limit=NAME=N...]\n"
               "                               Approve the paused step of a task\n"
               "  reject ID [--comment=TEXT]  Reject the paused step of a task\n"
               "  pause ID                     Pause a task: freeze its sandbox where it stands\n"
               "  resume ID                    Resume a paused task, or a failed one from its last checkpoint\n"
               "  reset ID COMMIT|base         Reset a failed task to one of its checkpoints\n"
               "  amend ID [--goal=TEXT] [--acceptance=TEXT]\n"
               "                               Revise the requirement of a task that is not at work\n"
               "  audit ID [--verify [--repo=PATH]] [--directory=DIR|--file=PATH...|--merge]\n"
               "                               Show the task's audit entries from the journal, or\n"
               "                               check them against the task's branch\n"
               "  watch ID                     Follow the task's state changes\n"
               "  logs ID [-f]                 Show (and follow) the task's command output\n"
               "  summary ID                   Show the summary of a delivered task\n"
               "  review ID                    Show the review's findings on the task's change\n"
               "  replay ID [--repo=PATH]      Run a finished task again on its recorded model answers\n"
               "  diff ID                      Show the task's changes as a patch\n"
               "  export ID [--format=FORMAT]  Write the task's branch as mbox (default), bundle or diff\n"
               "  fetch ID [--repo=PATH]       Import branch agentfab/ID into the task's repository\n"
               "  environments                 List the environments a task may name\n"
               "  usage [--since=DATE] [--user=NAME]\n"
               "                               What each owner's tasks used (today, UTC, by default)\n"
               "  cache [clear ENVIRONMENT]    Show the sizes of your dependency caches, or clear one\n"
               "  eval [CORPUS] --model=PROFILE[,...] | --oracle | --null | --agent=NAME[,...]\n"
               "       [--runs=N] [--tasks=GLOB] [--jobs=N] [--json=FILE]\n"
               "                               Measure models on a corpus of tasks (the bundled one)\n"
               "  eval --compare A.json B.json Compare two reports task by task\n"
               "\nOn a host of a fleet, status, logs, summary, approve, reject, cancel, pause, resume\n"
               "and amend also take a task another host holds (as that host last wrote it; the\n"
               "requests are applied there).\n"
               "\nOptions:\n"
               "  -h --help                    Show this help\n"
               "     --version                 Show package version\n"
               "     --json                    Print JSON for scripts\n"
               "     --no-ask-password         Do not ask for a password to authorize\n"
               "     --system                  Talk to the system instance (default)\n"
               "     --session, --user         Talk to a development daemon on the session bus\n"
               "     --since=DATE              With usage: from this UTC day (YYYY-MM-DD, default today)\n"
               "     --user=NAME               With usage: this owner only\n"
               "     --bus-address=ADDRESS     Talk to the daemon on this bus\n"
               "     --socket=PATH             Stream socket (default: $AGENTFAB_SOCKET or " AGENTFAB_DEFAULT_SOCKET ")\n"
               "  -a --all                     With list: show finished tasks too\n"
               "     --state=STATE[,STATE...]  With list: show tasks in these states ('help' lists them)\n"
               "     --fleet                   With list: the tasks of the whole fleet, with their hosts\n"
               "  -f --follow                  With logs: keep following\n"
               "     --comment=TEXT            With approve and reject: the approver's words\n"
               "     --allow-host=HOST[:PORT]  With approve: add to the task's network allowlist (repeatable)\n"
               "     --limit=NAME=N            With approve: the task goes on with this limit, e.g. max_cpu_sec=600\n"
               "     --format=FORMAT           With export: mbox, bundle or diff\n"
               "     --verify                  With audit: report every gap between journal and branch\n"
               "     --directory=DIR           With audit: read the journal files in DIR (a central\n"
               "                               journal of systemd-journal-remote), not the local journal\n"
               "     --file=PATH               With audit: read this journal file (repeatable)\n"
               "     --merge                   With audit: the journals of all machines here, as journalctl's\n"
               "     --repo=PATH               With audit --verify: the branch from this fleet's Remote= (or\n"
               "                               a mirror), refs/agentfab/ID/*, not from the daemon\n"
               "\nSubmit options:\n"
               "     --repo=PATH               Local git repository\n"
               "     --goal=TEXT               What the task should achieve\n"
               "     --acceptance=TEXT         Acceptance criteria\n"
               "     --test=CMD                Test command that judges the result\n"
               "     --base=REF                Commit to start from (default: HEAD)\n"
               "     --ref=TICKET              The requirement's ticket id or URL (Agentfab-Ref:)\n"
               "     --coverage-report=PATH    Coverage report the test command writes (lcov, Cobertura)\n"
               "     --submodules              Fetch the submodules of base too\n"
               "     --environment=NAME        Build and test in this environment (see environments)\n"
               "     --model=PROFILE           Model profile\n"
               "     --limit=NAME=N            A limit, e.g. max_steps=20, max_cpu_sec=600, max_cost=0.50 (repeatable)\n"
               "     --push-url=URL            At delivery, push branch agentfab/ID there (https://)\n"
               "     --forge=NAME              And open a pull request on this [Forge] of agentfab.conf\n"
               "     --forge-repository=OWNER/REPO\n"
               "                               The forge's repository for the pull request\n"
               "     --pr-base=BRANCH          The branch the pull request is for (default: main)\n"
               "\nEval options:\n"
               "     --oracle, --null          Measure the built-in oracle or null agent too\n"
               "     --agent=NAME[,NAME...]    Measure built-in agents (oracle-whitespace, oracle-wrong-first, ...)\n"
               "     --runs=N                  Run each task N times (default: 1)\n"
               "     --tasks=GLOB[,GLOB...]    Only the tasks whose names match\n"
               "     --jobs=N                  Tasks at work at once (default: 1)\n"
               "     --json=FILE               Write a JSON line a run and one a profile to FILE\n"
               "     --timeout=TIME            Cancel a run after this long (default: 30min)\n"
               "     --builtin-profile=NAME    The model profile that reaches the built-in agents (default: eval)\n"
               "     --builtin-port=PORT       The port their server binds on 127.0.0.1 (default: 8431)\n"
               "     --keep                    Keep the runs' repositories and graded trees\n"
               "\nSee agentfabctl(1).\n",
               program_invocation_short_name);
}

static int connect_bus(sd_bus **ret) {
        return bus_connect(arg_bus_address, arg_session, arg_ask_password, ret);
}

/* ---------- verbs ---------- */

static int verb_submit(sd_bus *bus, int argc, char *argv[]) {
        const SubmitRequest req = {
                .repo = arg_repo,
                .goal = arg_goal,
                .acceptance = arg_acceptance,
                .test_command = arg_test,
                .coverage_report = arg_coverage_report,
                .base = arg_base,
                .model = arg_model,
                .replay = arg_replay,
                .reference = arg_ref,
                .push_url = arg_push_url,
                .forge = arg_forge,
                .forge_repository = arg_forge_repository,
                .pull_request_base = arg_pr_base,
                .environment = arg_environment,
                .submodules = arg_submodules,
                .limits = arg_limits,
        };

        (void) argv;
        if (argc > 1) {
                fprintf(stderr, "submit takes no positional arguments; use --repo and --goal.\n");
                return EXIT_USAGE;
        }
        return submit_task(bus, &req, arg_ask_password, arg_json);
}

static int verb_usage(sd_bus *bus, int argc, char *argv[]) {
        (void) argc, (void) argv;
        polkit_agent_open(arg_ask_password);
        return usage_show(bus, arg_since, arg_user, arg_json);
}

static int verb_environments(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_json_ json_object *array = NULL;
        const char *name, *image, *identity, *network, *caches;
        int r;

        (void) argc, (void) argv;
        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                               "ListEnvironments", &error, &reply, NULL);
        if (r < 0)
                return bus_fail("list environments", &error, r);
        if (arg_json) {
                array = json_object_new_array();
                if (!array)
                        return EXIT_FAIL;
        } else
                printf("%-16s  %-10s  %-24s  %s\n", "NAME", "NETWORK", "IMAGE", "SYSTEM");
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(sssss)");
        if (r < 0)
                return EXIT_FAIL;
        while ((r = sd_bus_message_read(reply, "(sssss)", &name, &image, &identity, &network, &caches)) > 0) {
                if (arg_json) {
                        json_object *j = json_object_new_object();
                        if (!j || json_add_string(j, "name", name) < 0 || json_add_string(j, "image", image) < 0 ||
                            json_add_string(j, "identity", identity) < 0 || json_add_string(j, "network", network) < 0 ||
                            json_add_string(j, "caches", caches) < 0 || json_object_array_add(array, j) < 0)
                                return EXIT_FAIL;
                } else
                        printf("%-16s  %-10s  %-24s  %s%s%s\n", name, network, isempty(image) ? "(host)" : image, identity,
                               isempty(caches) ? "" : "; caches: ", caches);
        }
        if (r < 0)
                return EXIT_FAIL;
        if (arg_json)
                printf("%s\n", json_object_to_json_string_ext(array, JSON_C_TO_STRING_PRETTY));
        return 0;
}

static int verb_cache(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_json_ json_object *array = NULL;
        const char *name;
        uint64_t bytes, files;
        int r;

        if (argc > 1 && !(argc == 3 && streq(argv[1], "clear"))) {
                fprintf(stderr, "Usage: agentfabctl cache [clear ENVIRONMENT]\n");
                return EXIT_USAGE;
        }
        if (argc == 3)
                r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                       "ClearCache", &error, &reply, "s", argv[2]);
        else
                r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, AGENTFAB_FACTORY_PATH, AGENTFAB_FACTORY_INTERFACE,
                                       "ListCaches", &error, &reply, NULL);
        if (r < 0)
                return bus_fail(argc == 3 ? "clear the cache" : "list the caches", &error, r);
        if (arg_json) {
                array = json_object_new_array();
                if (!array)
                        return EXIT_FAIL;
        } else
                printf("%-16s  %12s  %s\n", "ENVIRONMENT", "BYTES", "FILES");
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(stt)");
        if (r < 0)
                return EXIT_FAIL;
        while ((r = sd_bus_message_read(reply, "(stt)", &name, &bytes, &files)) > 0) {
                if (arg_json) {
                        json_object *j = json_object_new_object();
                        if (!j || json_add_string(j, "environment", name) < 0 || json_add_uint64(j, "bytes", bytes) < 0 ||
                            json_add_uint64(j, "files", files) < 0 || json_object_array_add(array, j) < 0)
                                return EXIT_FAIL;
                } else
                        printf("%-16s  %12" PRIu64 "  %" PRIu64 "\n", name, bytes, files);
        }
        if (r < 0)
                return EXIT_FAIL;
        if (arg_json)
                printf("%s\n", json_object_to_json_string_ext(array, JSON_C_TO_STRING_PRETTY));
        return 0;
}

static int verb_list(sd_bus *bus, int argc, char *argv[]) {
        (void) argc, (void) argv;
        if (arg_fleet)
                return fleet_task_list(bus, arg_states, arg_all, arg_json);
        return task_list(bus, arg_states, arg_all, arg_json);
}

/* "Checkpoints:" lines, one per commit of the task's branch (step, short
 * id, subject), from the task's GetAll() reply; the subjects come from the
 * model, so control characters are shown as '?'. */
static void print_checkpoints(sd_bus_message *reply) {
        const char *name, *commit, *subject;
        unsigned n = 0;
        uint32_t step;

        if (sd_bus_message_rewind(reply, true) < 0 || sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{sv}") < 0)
                return;
        while (sd_bus_message_enter_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv") > 0) {
                if (sd_bus_message_read(reply, "s", &name) < 0)
                        return;
                if (!streq(name, "Checkpoints")) {
                        if (sd_bus_message_skip(reply, "v") < 0 || sd_bus_message_exit_container(reply) < 0)
                                return;
                        continue;
                }
                if (sd_bus_message_enter_container(reply, SD_BUS_TYPE_VARIANT, "a(uss)") <= 0 ||
                    sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(uss)") <= 0)
                        return;
                while (sd_bus_message_read(reply, "(uss)", &step, &commit, &subject) > 0) {
                        _cleanup_free_ char *c = strdup(subject);
                        if (!c)
                                return;
                        for (char *x = c; *x; x++)
                                if ((unsigned char) *x < ' ')
                                        *x = '?';
                        printf("%s%u %.10s %s\n", n++ == 0 ? "  Checkpoints: " : "               ", step, commit, c);
                }
                return;
        }
}

static int verb_status(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        FleetTaskExtra fleet = {};
        TaskInfo info;
        int r;

        (void) argc;
        polkit_agent_open(arg_ask_password);
        /* A task another host of the fleet holds: as that host last wrote it. */
        r = fleet_task_lookup(bus, argv[1], false, &reply);
        if (r < 0)
                return -r;
        if (r > 0 && (task_info_read(reply, &info) < 0 || fleet_task_extra(reply, &fleet) < 0))
                return EXIT_FAIL;
        if (r == 0) {
                r = task_info_load(bus, argv[1], &reply, &info);
                if (r != EXIT_OK)
                        return r;
        }

        if (arg_json) {
                _cleanup_json_ json_object *j = task_info_to_json(&info);
                if (fleet.fleet_owner) {
                        (void) json_add_string(j, "host", fleet.host);
                        (void) json_add_uint64(j, "epoch", fleet.epoch);
                        (void) json_add_string(j, "fleet_owner", fleet.fleet_owner);
                        (void) json_add_uint64(j, "breaker_stop", fleet.stop);
                }
                printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
                return EXIT_OK;
        }

        char created[64], updated[64];
        format_timestamp(info.created, created, sizeof(created));
        format_timestamp(info.updated, updated, sizeof(updated));
        printf("Task %s\n"
               "        State: %s%s%s%s\n"
               "        Owner: %u\n"
               "   Repository: %s\n"
               "         Base: %s\n"
               "       Branch: %s\n"
               "         Goal: %s\n",
               info.id, info.state, isempty(info.reason) ? "" : " (", strempty(info.reason), isempty(info.reason) ? "" : ")",
               info.owner, strempty(info.repository), strempty(info.base), strempty(info.branch), strempty(info.goal));
        if (!isempty(info.acceptance))
                printf("   Acceptance: %s\n", info.acceptance);
        if (info.requirement > 1)
                printf("  Requirement: v%u (amended)\n", info.requirement);
        if (!isempty(info.reference))
                printf("    Reference: %s\n", info.reference);
        printf("         Test: %s\n"
               "        Model: %s\n"
               "      Created: %s\n"
               "      Updated: %s\n",
               isempty(info.test_command) ? "(none)" : info.test_command,
               isempty(info.model) ? "(default)" : info.model, created, updated);
        printf("  Environment: %s\n", !isempty(info.environment_identity) ? info.environment_identity :
                                      !isempty(info.environment) ? info.environment : "default");
        printf("         Step: %u (%" PRIu64 " tokens, %" PRIu64 " commands)\n", info.step, info.tokens, info.commands);
        if (info.has_resources) {
                _cleanup_free_ char *used = task_resources_format(&info.resources);
                if (used)
                        printf("         Used: %s\n", used);
        }
        if (!isempty(info.head))
                printf("         Head: %s\n", info.head);
        print_checkpoints(reply);
        if (!isempty(info.breaker))
                printf("      Breaker: %s\n", info.breaker);
        if (fleet.fleet_owner)
                printf("         Host: %s (epoch %" PRIu64 "; owner %s; as that host last wrote it)\n",
                       isempty(fleet.host) ? "none yet" : fleet.host, fleet.epoch, fleet.fleet_owner);
        /* Frozen: no CPU, memory kept; none: no sandbox (any more). */
        if (!isempty(info.freezer) && !streq(info.freezer, "none"))
                printf("      Sandbox: %s\n", info.freezer);
        else if (streq_ptr(info.state, "paused") || streq_ptr(info.state, "awaiting-approval"))
                printf("      Sandbox: none (made again when the task goes on)\n");
        if (!isempty(info.push_url))
                printf("     Push URL: %s\n", info.push_url);
        if (!isempty(info.forge))
                printf("        Forge: %s, %s into %s\n", info.forge, strempty(info.forge_repository),
                       strempty(info.pull_request_base));
        if (!isempty(info.pull_request))
                printf(" Pull request: %s\n", info.pull_request);
        if (!isempty(info.plan)) {
                /* The whole plan, as the model wrote it, each line indented;
                 * it comes from the model, so control characters are shown
                 * as '?' rather than reaching the terminal. */
                _cleanup_free_ char *plan = strdup(info.plan);
                unsigned n = 0;

                if (!plan)
                        return EXIT_FAIL;
                for (char *next = plan, *l; (l = strsep(&next, "\n")) && n < 40; n++) {
                        for (char *c = l; *c; c++)
                                if ((unsigned char) *c < ' ' && *c != '\t')
                                        *c = '?';
                        printf("%s%s\n", n == 0 ? "         Plan: " : "               ", l);
                }
        }
        return EXIT_OK;
}

/* Submits the task again, with its model's recorded answers instead of the
 * model: for an audit of what the agent did with them. */
static int verb_replay(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        TaskInfo info;
        int r;

        (void) argc;
        r = task_info_load(bus, argv[1], &reply, &info);
        if (r != EXIT_OK)
                return r;

        arg_repo = arg_repo ?: info.repository;
        arg_goal = info.goal;
        arg_acceptance = isempty(info.acceptance) ? NULL : info.acceptance;
        arg_test = isempty(info.test_command) ? NULL : info.test_command;
        arg_base = isempty(info.base) ? NULL : info.base;
        arg_model = isempty(info.model) ? NULL : info.model;
        arg_replay = argv[1];
        return verb_submit(bus, 1, NULL);
}

static int verb_summary(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL;
        const char *text;
        int r;

        (void) argc;
        r = fleet_task_lookup(bus, argv[1], false, &reply);
        if (r < 0)
                return -r;
        if (r > 0)
                return fleet_task_output(bus, argv[1], "summary");
        r = task_get_path(bus, argv[1], &path);
        if (r < 0)
                return -r;
        r = sd_bus_call_method(bus, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE, "GetSummary", &error, &reply, NULL);
        if (r < 0)
                return bus_fail("get summary", &error, r);
        r = sd_bus_message_read(reply, "s", &text);
        if (r < 0)
                return EXIT_FAIL;
        fputs(text, stdout);
        return EXIT_OK;
}

/* The review's findings (the task's Findings property): one line each,
 * errors first, or a JSON array with --json. The daemon escaped every
 * string already; a secret's value is never among them. */
static int verb_review(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_object_putp) json_object *list = NULL;
        _cleanup_free_ char *path = NULL;
        const char *kind, *severity, *file, *message;
        unsigned n = 0, n_errors = 0;
        uint32_t line;
        int r;

        (void) argc;
        r = task_get_path(bus, argv[1], &path);
        if (r < 0)
                return -r;
        r = sd_bus_get_property(bus, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE, "Findings", &error, &reply,
                                "a(sssus)");
        if (r < 0)
                return bus_fail("read the findings", &error, r);
        if (arg_json && !(list = json_object_new_array()))
                return log_oom(), EXIT_FAIL;
        r = sd_bus_message_enter_container(reply, 'a', "(sssus)");
        if (r < 0)
                return EXIT_FAIL;
        while ((r = sd_bus_message_read(reply, "(sssus)", &kind, &severity, &file, &line, &message)) > 0) {
                n++;
                if (streq(severity, "error"))
                        n_errors++;
                if (arg_json) {
                        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
                        if (!o || json_add_string(o, "kind", kind) < 0 || json_add_string(o, "severity", severity) < 0 ||
                            json_add_string(o, "file", isempty(file) ? NULL : file) < 0 ||
                            (line > 0 && json_add_uint64(o, "line", line) < 0) ||
                            json_add_string(o, "message", message) < 0 ||
                            json_object_array_add(list, TAKE_PTR(o)) < 0)
                                return log_oom(), EXIT_FAIL;
                        continue;
                }
                if (isempty(file))
                        printf("%-7s %-21s %s\n", severity, kind, message);
                else if (line > 0)
                        printf("%-7s %-21s %s:%" PRIu32 ": %s\n", severity, kind, file, line, message);
                else
                        printf("%-7s %-21s %s: %s\n", severity, kind, file, message);
        }
        if (r < 0)
                return EXIT_FAIL;
        if (arg_json) {
                puts(json_object_to_json_string_ext(list, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
                return EXIT_OK;
        }
        if (n == 0)
                printf("No findings (the review has not run, or found nothing).\n");
        else
                printf("\n%u findings, %u errors.\n", n, n_errors);
        return EXIT_OK;
}

static int verb_diff(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        return export_to_stdout(bus, argv[1], "diff");
}

static int verb_export(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        if (!streq(arg_format, "mbox") && !streq(arg_format, "bundle") && !streq(arg_format, "diff")) {
                fprintf(stderr, "Unknown format '%s': use mbox, bundle or diff.\n", arg_format);
                return EXIT_USAGE;
        }
        if (streq(arg_format, "bundle") && isatty(STDOUT_FILENO)) {
                fprintf(stderr, "A bundle is binary: redirect the output to a file.\n");
                return EXIT_USAGE;
        }
        return export_to_stdout(bus, argv[1], arg_format);
}

static int verb_fetch(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        return export_fetch(bus, argv[1], arg_repo);
}

#define INTERACTIVE_CALL_TIMEOUT_USEC (5 * 60 * 1000000ULL)

/* A task another host of the fleet holds: the request is posted for it. */
static int fleet_request(sd_bus *bus, const char *id, sd_bus_message *status, const char *kind) {
        if (arg_allow_hosts || arg_limits) {
                fprintf(stderr, "--allow-host= and --limit= are for a task on this host; task %s is on another host "
                        "of the fleet.\n", id);
                return EXIT_USAGE;
        }
        return fleet_task_request(bus, id, status, &(const FleetTaskRequest) {
                .kind = kind,
                .comment = arg_comment,
                .goal = arg_goal,
                .acceptance = arg_acceptance,
                .timeout_usec = arg_ask_password ? INTERACTIVE_CALL_TIMEOUT_USEC : 0,
                .json = arg_json,
        });
}

static int call_task_method(sd_bus *bus, const char *id, const char *method, const char *what, bool with_comment) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *status = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        polkit_agent_open(arg_ask_password);
        r = fleet_task_lookup(bus, id, false, &status);
        if (r < 0)
                return -r;
        if (r > 0) {
                /* "cancel task" → "cancel": the request's kind. */
                _cleanup_free_ char *kind = strndup(what, strcspn(what, " "));
                return kind ? fleet_request(bus, id, status, kind) : EXIT_FAIL;
        }
        r = task_get_path(bus, id, &path);
        if (r < 0)
                return -r;

        /* Hosts to allow and limits to set go with ApproveWithOptions();
         * without them plain Approve(), which every daemon version knows. */
        bool options = streq(method, "Approve") && (arg_allow_hosts || arg_limits);
        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE,
                                           options ? "ApproveWithOptions" : method);
        if (r >= 0 && with_comment)
                r = sd_bus_message_append(m, "s", strempty(arg_comment));
        if (r >= 0 && options) {
                r = approve_options_append(m, arg_allow_hosts, arg_limits);
                if (r == -EINVAL)
                        return EXIT_USAGE;
        }
        if (r < 0) {
                fprintf(stderr, "Failed to build request: %s\n", strerror(-r));
                return EXIT_FAIL;
        }

        /* The call may wait for a person typing an administrator's password
         * at the polkit prompt: the bus's default 25 s is too short for that. */
        r = sd_bus_call(bus, m, arg_ask_password ? INTERACTIVE_CALL_TIMEOUT_USEC : 0, &error, NULL);
        if (r < 0)
                return bus_fail(what, &error, r);
        return EXIT_OK;
}

static int verb_cancel(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        return call_task_method(bus, argv[1], "Cancel", "cancel task", false);
}

static int verb_approve(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        return call_task_method(bus, argv[1], "Approve", "approve task", true);
}

static int verb_reject(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        if (arg_allow_hosts || arg_limits) {
                fprintf(stderr, "--allow-host= and --limit= go with approve only.\n");
                return EXIT_FAIL;
        }
        return call_task_method(bus, argv[1], "Reject", "reject task", true);
}

static int verb_pause(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        return call_task_method(bus, argv[1], "Pause", "pause task", false);
}

static int verb_resume(sd_bus *bus, int argc, char *argv[]) {
        (void) argc;
        return call_task_method(bus, argv[1], "Resume", "resume task", false);
}

static int verb_amend(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_free_ char *path = NULL;
        uint32_t version;
        int r;

        (void) argc;
        if (!arg_goal && !arg_acceptance) {
                fprintf(stderr, "amend needs --goal=TEXT, --acceptance=TEXT or both.\n");
                return EXIT_USAGE;
        }
        polkit_agent_open(arg_ask_password);
        r = fleet_task_lookup(bus, argv[1], false, &reply);
        if (r < 0)
                return -r;
        if (r > 0)
                return fleet_request(bus, argv[1], reply, "amend");
        r = task_get_path(bus, argv[1], &path);
        if (r < 0)
                return -r;
        r = sd_bus_message_new_method_call(bus, &m, AGENTFAB_BUS_NAME, path, AGENTFAB_TASK_INTERFACE, "Amend");
        if (r >= 0)
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r >= 0)
                r = bus_append_string_entry(m, "goal", arg_goal);
        if (r >= 0)
                r = bus_append_string_entry(m, "acceptance", arg_acceptance);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0) {
                fprintf(stderr, "Failed to build request: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        r = sd_bus_call(bus, m, arg_ask_password ? INTERACTIVE_CALL_TIMEOUT_USEC : 0, &error, &reply);
        if (r < 0)
                return bus_fail("amend task", &error, r);
        r = sd_bus_message_read(reply, "u", &version);
        if (r < 0)
                return EXIT_FAIL;
        if (arg_json) {
                _cleanup_json_ json_object *j = json_object_new_object();
                (void) json_add_uint64(j, "requirement_version", version);
                printf("%s\n", json_to_line(j));
        } else
                printf("Task %s: the requirement is now v%u; the model hears of it before its next step.\n", argv[1], version);
        return EXIT_OK;
}

static int verb_reset(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL;
        const char *commit;
        uint32_t step;
        int r;

        (void) argc;
        polkit_agent_open(arg_ask_password);
        r = task_get_path(bus, argv[1], &path);
        if (r < 0)
                return -r;
        r = bus_call_task_method_s(bus, path, "ResetTo", argv[2], &error, &reply);
        if (r < 0)
                return bus_fail("reset task", &error, r);
        r = sd_bus_message_read(reply, "us", &step, &commit);
        if (r < 0)
                return EXIT_FAIL;
        if (arg_json) {
                _cleanup_json_ json_object *j = json_object_new_object();
                (void) json_add_uint64(j, "step", step);
                (void) json_add_string(j, "commit", commit);
                printf("%s\n", json_to_line(j));
        } else if (step > 0)
                printf("Task %s reset to the checkpoint of step %u, %s. Resume it to go on from there.\n", argv[1], step, commit);
        else
                printf("Task %s reset to its base, %s. Resume it to start again.\n", argv[1], commit);
        return EXIT_OK;
}

static int verb_audit(sd_bus *bus, int argc, char *argv[]) {
        int r;

        (void) bus, (void) argc;

        if (!task_id_is_valid(argv[1])) {
                fprintf(stderr, "'%s' is not a task id (12 hex digits).\n", argv[1]);
                return EXIT_USAGE;
        }
        if (!!arg_directory + !!arg_files + arg_merge > 1) {
                fprintf(stderr, "--directory=, --file= and --merge each name where the journal is: give one.\n");
                return EXIT_USAGE;
        }
        audit_set_journal_source(arg_directory, arg_files, arg_merge);
        if (!arg_verify)
                return audit_list(argv[1], arg_json);

        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        _cleanup_free_ char *path = NULL;

        /* --repo=: the branch from a fleet's Remote= (or a mirror of it),
         * where no daemon knows the task, as on a central journal's host. */
        if (!arg_repo) {
                if (connect_bus(&b) < 0)
                        return EXIT_FAIL;
                r = task_get_path(b, argv[1], &path);
                if (r < 0)
                        return -r;
        }
        r = audit_verify(b, argv[1], path, arg_repo, arg_json);
        return r < 0 ? (r == -ENOENT ? EXIT_NO_TASK : EXIT_FAIL) : r > 0 ? EXIT_FAIL : EXIT_OK;
}

static int verb_watch(sd_bus *bus, int argc, char *argv[]) {
        (void) bus, (void) argc;
        if (!task_id_is_valid(argv[1])) {
                fprintf(stderr, "'%s' is not a task id (12 hex digits).\n", argv[1]);
                return EXIT_USAGE;
        }
        _cleanup_close_ int fd = stream_client_connect(arg_socket, argv[1], "events", true);
        if (fd < 0)
                return -fd;
        return stream_client_follow(fd, arg_json);
}

static int verb_eval(sd_bus *bus, int argc, char *argv[]) {
        (void) bus;
        if (arg_json && !arg_json_file) {
                fprintf(stderr, "eval writes its JSON lines to a file: --json=FILE.\n");
                return EXIT_USAGE;
        }
        return eval_verb(argc, argv, arg_model, arg_json_file, arg_ask_password, connect_bus);
}

static int verb_logs(sd_bus *bus, int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *status = NULL;

        (void) bus, (void) argc;
        if (!task_id_is_valid(argv[1])) {
                fprintf(stderr, "'%s' is not a task id (12 hex digits).\n", argv[1]);
                return EXIT_USAGE;
        }
        /* A task another host of the fleet holds: the tail of its log, as
         * that host last wrote it to the fleet's database. */
        if (connect_bus(&b) >= 0 && fleet_task_lookup(b, argv[1], true, &status) > 0) {
                if (arg_follow)
                        fprintf(stderr, "Task %s is on another host of the fleet: its log as that host last wrote it, "
                                "not followed.\n", argv[1]);
                return fleet_task_output(b, argv[1], "log");
        }
        _cleanup_close_ int fd = stream_client_connect(arg_socket, argv[1], "output", arg_follow);
        if (fd < 0)
                return -fd;
        return stream_client_follow(fd, arg_json);
}

typedef struct Verb {
        const char *name;
        int args;          /* positional arguments after the verb; -1: the verb checks them */
        bool needs_bus;
        int (*run)(sd_bus *bus, int argc, char *argv[]);
} Verb;

static const Verb verbs[] = {
        { "submit",  0, true,  verb_submit  },
        { "list",    0, true,  verb_list    },
        { "status",  1, true,  verb_status  },
        { "cancel",  1, true,  verb_cancel  },
        { "approve", 1, true,  verb_approve },
        { "reject",  1, true,  verb_reject  },
        { "pause",   1, true,  verb_pause   },
        { "resume",  1, true,  verb_resume  },
        { "reset",   2, true,  verb_reset   },
        { "amend",   1, true,  verb_amend   },
        { "audit",   1, false, verb_audit   },
        { "watch",   1, false, verb_watch   },
        { "logs",    1, false, verb_logs    },
        { "summary", 1, true,  verb_summary },
        { "review",  1, true,  verb_review  },
        { "replay",  1, true,  verb_replay  },
        { "diff",    1, true,  verb_diff    },
        { "export",  1, true,  verb_export  },
        { "fetch",   1, true,  verb_fetch   },
        { "environments", 0, true, verb_environments },
        { "usage",   0, true,  verb_usage   },
        { "cache",   -1, true,  verb_cache   },
        { "eval",    -1, false, verb_eval    },
};

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100, ARG_JSON, ARG_NO_ASK_PASSWORD, ARG_SYSTEM, ARG_SESSION, ARG_BUS_ADDRESS,
                ARG_SOCKET, ARG_REPO, ARG_GOAL, ARG_ACCEPTANCE, ARG_TEST, ARG_BASE, ARG_MODEL, ARG_COMMENT, ARG_LIMIT, ARG_FORMAT,
                ARG_PUSH_URL, ARG_FORGE, ARG_FORGE_REPOSITORY, ARG_PR_BASE, ARG_SUBMODULES, ARG_ENVIRONMENT, ARG_REF, ARG_VERIFY,
                ARG_ALLOW_HOST,
                ARG_COVERAGE_REPORT,
                ARG_STATE,
                ARG_FLEET,
                ARG_SINCE,
                ARG_USER,
                ARG_DIRECTORY,
                ARG_FILE,
                ARG_MERGE,
                ARG_EVAL_BASE = 0x200,
        };
        static const struct option options[] = {
                { "help",            no_argument,       NULL, 'h'                 },
                { "version",         no_argument,       NULL, ARG_VERSION         },
                { "json",            optional_argument, NULL, ARG_JSON            },
                { "no-ask-password", no_argument,       NULL, ARG_NO_ASK_PASSWORD },
                { "system",          no_argument,       NULL, ARG_SYSTEM          },
                { "session",         no_argument,       NULL, ARG_SESSION         },
                /* --user alone: the session bus, as systemctl has it; --user=NAME: usage's owner. */
                { "user",            optional_argument, NULL, ARG_USER            },
                { "bus-address",     required_argument, NULL, ARG_BUS_ADDRESS     },
                { "socket",          required_argument, NULL, ARG_SOCKET          },
                { "follow",          no_argument,       NULL, 'f'                 },
                { "repo",            required_argument, NULL, ARG_REPO            },
                { "goal",            required_argument, NULL, ARG_GOAL            },
                { "acceptance",      required_argument, NULL, ARG_ACCEPTANCE      },
                { "test",            required_argument, NULL, ARG_TEST            },
                { "base",            required_argument, NULL, ARG_BASE            },
                { "model",           required_argument, NULL, ARG_MODEL           },
                { "comment",         required_argument, NULL, ARG_COMMENT         },
                { "limit",           required_argument, NULL, ARG_LIMIT           },
                { "format",          required_argument, NULL, ARG_FORMAT          },
                { "push-url",        required_argument, NULL, ARG_PUSH_URL        },
                { "forge",           required_argument, NULL, ARG_FORGE           },
                { "forge-repository", required_argument, NULL, ARG_FORGE_REPOSITORY },
                { "pr-base",         required_argument, NULL, ARG_PR_BASE         },
                { "submodules",      no_argument,       NULL, ARG_SUBMODULES      },
                { "environment",     required_argument, NULL, ARG_ENVIRONMENT     },
                { "ref",             required_argument, NULL, ARG_REF             },
                { "verify",          no_argument,       NULL, ARG_VERIFY          },
                { "allow-host",      required_argument, NULL, ARG_ALLOW_HOST      },
                { "coverage-report", required_argument, NULL, ARG_COVERAGE_REPORT },
                { "all",             no_argument,       NULL, 'a'                 },
                { "state",           required_argument, NULL, ARG_STATE           },
                { "since",           required_argument, NULL, ARG_SINCE           },
                { "fleet",           no_argument,       NULL, ARG_FLEET           },
                { "directory",       required_argument, NULL, ARG_DIRECTORY       },
                { "file",            required_argument, NULL, ARG_FILE            },
                { "merge",           no_argument,       NULL, ARG_MERGE           },
                EVAL_LONG_OPTIONS(ARG_EVAL_BASE),
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "hfa", options, NULL)) >= 0)
                switch (c) {
                case 'h': help(); return 0;
                case ARG_VERSION: printf("agentfab %s\n", PROJECT_VERSION); return 0;
                case ARG_JSON: arg_json = true; arg_json_file = optarg; break;
                case ARG_NO_ASK_PASSWORD: arg_ask_password = false; break;
                case ARG_SYSTEM: arg_session = false; break;
                case ARG_SESSION: arg_session = true; break;
                case ARG_BUS_ADDRESS: arg_bus_address = optarg; break;
                case ARG_SOCKET: arg_socket = optarg; break;
                case 'f': arg_follow = true; break;
                case 'a': arg_all = true; break;
                case ARG_FLEET: arg_fleet = true; break;
                case ARG_SINCE: arg_since = optarg; break;
                case ARG_USER:
                        if (optarg)
                                arg_user = optarg;
                        else
                                arg_session = true;
                        break;
                case ARG_STATE: {
                        int r = task_list_parse_states(optarg, &arg_states);
                        if (r <= 0)
                                return r;
                        break;
                }
                case ARG_REPO: arg_repo = optarg; break;
                case ARG_GOAL: arg_goal = optarg; break;
                case ARG_ACCEPTANCE: arg_acceptance = optarg; break;
                case ARG_TEST: arg_test = optarg; break;
                case ARG_COVERAGE_REPORT: arg_coverage_report = optarg; break;
                case ARG_BASE: arg_base = optarg; break;
                case ARG_MODEL: arg_model = optarg; break;
                case ARG_COMMENT: arg_comment = optarg; break;
                case ARG_FORMAT: arg_format = optarg; break;
                case ARG_PUSH_URL: arg_push_url = optarg; break;
                case ARG_FORGE: arg_forge = optarg; break;
                case ARG_FORGE_REPOSITORY: arg_forge_repository = optarg; break;
                case ARG_PR_BASE: arg_pr_base = optarg; break;
                case ARG_SUBMODULES: arg_submodules = true; break;
                case ARG_ENVIRONMENT: arg_environment = optarg; break;
                case ARG_REF: arg_ref = optarg; break;
                case ARG_VERIFY: arg_verify = true; break;
                case ARG_DIRECTORY: arg_directory = optarg; break;
                case ARG_FILE:
                        if (strv_extend(&arg_files, optarg) < 0)
                                return -ENOMEM;
                        break;
                case ARG_MERGE: arg_merge = true; break;
                case ARG_LIMIT:
                        if (strv_extend(&arg_limits, optarg) < 0)
                                return -ENOMEM;
                        break;
                case ARG_ALLOW_HOST:
                        if (strv_extend(&arg_allow_hosts, optarg) < 0)
                                return -ENOMEM;
                        break;
                default:
                        if (c >= ARG_EVAL_BASE && c < ARG_EVAL_BASE + _EVAL_OPT_MAX) {
                                int r = eval_parse_option(c - ARG_EVAL_BASE, optarg);
                                if (r < 0)
                                        return r;
                                break;
                        }
                        return -EINVAL;
                }
        return 1;
}

int main(int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const Verb *verb = NULL;
        int r;

        /* Let glibc's getopt permute, so options may follow the verb: "approve ID --comment X". */
        r = parse_argv(argc, argv);
        if (r <= 0) {
                strv_free(arg_limits);
                strv_free(arg_allow_hosts);
                strv_free(arg_states);
                strv_free(arg_files);
                eval_options_free();
                return r < 0 ? EXIT_USAGE : EXIT_OK;
        }

        if (optind >= argc) {
                fprintf(stderr, "No command given. See '%s --help'.\n", program_invocation_short_name);
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, argv[optind]))
                        verb = &verbs[i];
        if (!verb) {
                fprintf(stderr, "Unknown command '%s'. See '%s --help'.\n", argv[optind], program_invocation_short_name);
                return EXIT_USAGE;
        }
        if (verb->args >= 0 && argc - optind - 1 != verb->args && !(verb->args == 0 && streq(verb->name, "submit"))) {
                fprintf(stderr, "'%s' takes %s.\n", verb->name,
                        verb->args == 2 ? "a task id and a commit" : verb->args == 1 ? "one task id" : "no arguments");
                return EXIT_USAGE;
        }

        /* Text from repositories, models and other users never drives the
         * terminal (terminal-escape.h). A diff or an export that goes to a
         * pipe or a file is data, and goes as it is. */
        bool data = streq(verb->name, "diff") || streq(verb->name, "export");
        if ((!data || isatty(STDOUT_FILENO)) && terminal_escape_stream(&stdout, STDOUT_FILENO, false) < 0)
                return log_oom(), EXIT_FAIL;
        if (terminal_escape_stream(&stderr, STDERR_FILENO, true) < 0)
                return log_oom(), EXIT_FAIL;

        if (verb->needs_bus) {
                r = connect_bus(&bus);
                if (r < 0)
                        return EXIT_FAIL;
        }

        r = verb->run(bus, argc - optind, argv + optind);
        polkit_agent_close();
        strv_free(arg_limits);
        strv_free(arg_allow_hosts);
        strv_free(arg_states);
        strv_free(arg_files);
        eval_options_free();
        return r;
}
