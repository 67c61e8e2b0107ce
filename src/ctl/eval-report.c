/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bus-client.h"
#include "eval-report.h"
#include "eval-stats.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

#define Z_95 1.959963984540054

void eval_summary_done(EvalSummary *s) {
        free(s->profile);
        free(s->model);
        for (unsigned i = 0; i < s->n_breakers; i++)
                free(s->breakers[i].name);
        *s = (EvalSummary) {};
}

static void count_breaker(EvalSummary *s, const char *name) {
        for (unsigned i = 0; i < s->n_breakers; i++)
                if (streq(s->breakers[i].name, name)) {
                        s->breakers[i].count++;
                        return;
                }
        if (s->n_breakers < EVAL_MAX_BREAKERS && (s->breakers[s->n_breakers].name = strdup(name)))
                s->breakers[s->n_breakers++].count = 1;
}

int eval_summarize(const EvalResult *results, size_t n, const char *profile, EvalSummary *ret) {
        _cleanup_free_ double *steps = calloc(n ?: 1, sizeof(double)), *tokens = calloc(n ?: 1, sizeof(double)),
                              *commands = calloc(n ?: 1, sizeof(double)), *seconds = calloc(n ?: 1, sizeof(double));
        EvalSummary s = { .profile = strdup(profile) };
        size_t k = 0;

        if (!steps || !tokens || !commands || !seconds || !s.profile) {
                eval_summary_done(&s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                const EvalResult *r = &results[i];
                if (!streq(r->profile, profile) || !eval_result_ended(r))
                        continue;
                if (!s.model && r->model)
                        s.model = strdup(r->model);
                s.tokens += r->tokens;
                if (r->outcome >= 0 && r->outcome < _EVAL_OUTCOME_MAX)
                        s.outcomes[r->outcome]++;
                /* A breaker counts once it stopped the task for a person. */
                if (r->breaker && streq_ptr(r->state, "awaiting-approval"))
                        count_breaker(&s, r->breaker);
                if (!r->solvable) {
                        s.unsolvable++;
                        s.unsolvable_right += r->passed;
                }
                s.tasks++;
                if (!r->passed)
                        continue;
                s.passed++;
                s.passed_alone += !r->person;
                steps[k] = r->steps;
                tokens[k] = (double) r->tokens;
                commands[k] = (double) r->commands;
                seconds[k] = r->seconds;
                k++;
        }
        s.pass_rate = s.tasks ? (double) s.passed / s.tasks : 0;
        eval_wilson_interval(s.passed, s.tasks, Z_95, &s.low, &s.high);
        s.median_steps = eval_median(steps, k);
        s.median_tokens = eval_median(tokens, k);
        s.median_commands = eval_median(commands, k);
        s.median_seconds = eval_median(seconds, k);
        s.tokens_per_pass = s.passed ? (double) s.tokens / s.passed : 0;
        *ret = s;
        return 0;
}

void eval_print_stamp(FILE *f, const EvalStamp *st) {
        fprintf(f, "Corpus %s version %s (%s), %u tasks; agentfabctl %s, agentfabd %s; %u run%s of each task.\n",
                st->corpus_name, st->corpus_version, st->corpus_path, st->n_tasks, st->version,
                isempty(st->daemon_version) ? "(unknown)" : st->daemon_version, st->runs, st->runs == 1 ? "" : "s");
        fprintf(f, "Repository map: %u of %u tasks (%.0f %%) have a reference fix that touches only files named in "
                "the first prompt.\n", st->n_named, st->n_tasks, st->repository_map * 100);
}

/* "Settings: Endpoint=..., ToolCalls=auto, ...": what the daemon said of the
 * profile, in agentfab.conf(5)'s own names. */
static void print_settings(FILE *f, const EvalStamp *st, const char *profile) {
        json_object *settings = NULL;
        const char *sep = "";

        if (!st->profiles || !json_object_object_get_ex(st->profiles, profile, &settings))
                return;
        fputs("Settings: ", f);
        json_object_object_foreach(settings, key, value) {
                fprintf(f, "%s%s=%s", sep, key, json_object_get_string(value));
                sep = ", ";
        }
        fputc('\n', f);
}

void eval_print_profile(FILE *f, const EvalResult *results, size_t n, const EvalSummary *s, const EvalStamp *st) {
        fprintf(f, "\nProfile %s%s%s%s\n", s->profile, s->model ? " (model " : "", strempty(s->model), s->model ? ")" : "");
        print_settings(f, st, s->profile);
        fprintf(f, "%-28s %-10s %-18s %-7s %5s %8s %5s %7s  %s\n", "TASK", "LANGUAGE", "KIND", "PASSED", "STEPS",
                "TOKENS", "CMDS", "SECONDS", "RESULT");
        for (size_t i = 0; i < n; i++) {
                const EvalResult *r = &results[i];
                unsigned runs = 0, passed = 0;
                const EvalResult *shown = NULL;
                bool first = true;

                if (!streq(r->profile, s->profile) || !eval_result_ended(r))
                        continue;
                /* One line a task: its runs counted together, the first
                 * failure's reason (or the first run's) shown. */
                for (size_t j = 0; j < i && first; j++)
                        if (streq(results[j].profile, s->profile) && streq(results[j].task_name, r->task_name))
                                first = false;
                if (!first)
                        continue;
                for (size_t j = i; j < n; j++) {
                        const EvalResult *x = &results[j];
                        if (!streq(x->profile, s->profile) || !streq(x->task_name, r->task_name) ||
                            !eval_result_ended(x))
                                continue;
                        runs++;
                        passed += x->passed;
                        if (!shown || (shown->passed && !x->passed))
                                shown = x;
                }
                char p[32];
                snprintf(p, sizeof(p), "%u/%u", passed, runs);
                fprintf(f, "%-28s %-10s %-18s %-7s %5" PRIu32 " %8" PRIu64 " %5" PRIu64 " %7.1f  %s%s%s\n", r->task_name,
                        r->task ? r->task->language : "", r->task ? r->task->kind : "", p, shown->steps, shown->tokens,
                        shown->commands, shown->seconds, eval_outcome_to_string(shown->outcome),
                        shown->passed && shown->outcome == EVAL_PASSED ? "" : ": ",
                        shown->passed && shown->outcome == EVAL_PASSED ? "" : strempty(shown->detail));
        }

        fprintf(f, "%s: %u of %u passed, %.1f %% (95 %% interval %.1f-%.1f %%); %u passed without a person\n",
                s->profile, s->passed, s->tasks, s->pass_rate * 100, s->low * 100, s->high * 100, s->passed_alone);
        fprintf(f, "  passed tasks' medians: %.0f steps, %.0f tokens, %.0f commands, %.1f s; %.0f tokens per passed task\n",
                s->median_steps, s->median_tokens, s->median_commands, s->median_seconds, s->tokens_per_pass);
        fprintf(f, "  failed: tests %u, budget %u, breaker %u, malformed replies %u, gave up %u, error %u\n",
                s->outcomes[EVAL_TESTS], s->outcomes[EVAL_BUDGET],
                s->outcomes[EVAL_BREAKER], s->outcomes[EVAL_MALFORMED], s->outcomes[EVAL_GAVE_UP], s->outcomes[EVAL_ERROR]);
        fprintf(f, "  breakers tripped:");
        if (s->n_breakers == 0)
                fprintf(f, " none");
        for (unsigned i = 0; i < s->n_breakers; i++)
                fprintf(f, "%s %s %u", i ? "," : "", s->breakers[i].name, s->breakers[i].count);
        fprintf(f, "\n");
        if (s->unsolvable > 0)
                fprintf(f, "  of the tasks that cannot be done: %u of %u runs gave up, the right outcome\n",
                        s->unsolvable_right, s->unsolvable);
}

static int json_add_double(json_object *o, const char *key, double v) {
        json_object *d = json_object_new_double(v);
        if (!d)
                return -ENOMEM;
        json_object_object_add(o, key, d);
        return 0;
}

int eval_write_result(FILE *f, const EvalResult *r) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o || json_add_string(o, "type", "run") < 0 || json_add_string(o, "task", r->task_name) < 0 ||
            json_add_string(o, "profile", r->profile) < 0 || json_add_uint64(o, "run", r->run) < 0)
                return -ENOMEM;
        json_object_object_add(o, "passed", json_object_new_boolean(r->passed));
        json_object_object_add(o, "solvable", json_object_new_boolean(r->solvable));
        if (json_add_string(o, "reason", eval_outcome_to_string(r->outcome)) < 0 ||
            json_add_string(o, "detail", r->detail) < 0 || json_add_uint64(o, "steps", r->steps) < 0 ||
            json_add_uint64(o, "tokens", r->tokens) < 0 || json_add_uint64(o, "commands", r->commands) < 0 ||
            json_add_double(o, "seconds", r->seconds) < 0 || json_add_string(o, "task_id", r->task_id) < 0 ||
            json_add_string(o, "state", r->state) < 0 || json_add_string(o, "breaker", r->breaker) < 0 ||
            json_add_string(o, "model", r->model) < 0 ||
            (r->task && (json_add_string(o, "language", r->task->language) < 0 ||
                         json_add_string(o, "kind", r->task->kind) < 0)))
                return -ENOMEM;
        fprintf(f, "%s\n", json_to_line(o));
        return 0;
}

int eval_write_summary(FILE *f, const EvalSummary *s, const EvalStamp *st) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *interval = json_object_new_array(), *failures = json_object_new_object(),
                    *breakers = json_object_new_object();

        if (!o || !interval || !failures || !breakers) {
                json_object_put(interval);
                json_object_put(failures);
                json_object_put(breakers);
                return -ENOMEM;
        }
        json_object_object_add(o, "interval", interval);
        json_object_object_add(o, "failures", failures);
        json_object_object_add(o, "breakers", breakers);
        json_object_array_add(interval, json_object_new_double(s->low));
        json_object_array_add(interval, json_object_new_double(s->high));
        for (EvalOutcome x = EVAL_TESTS; x < _EVAL_OUTCOME_MAX; x++)
                json_object_object_add(failures, eval_outcome_to_string(x), json_object_new_int64(s->outcomes[x]));
        for (unsigned i = 0; i < s->n_breakers; i++)
                json_object_object_add(breakers, s->breakers[i].name, json_object_new_int64(s->breakers[i].count));
        if (json_add_string(o, "type", "summary") < 0 || json_add_string(o, "profile", s->profile) < 0 ||
            json_add_string(o, "model", s->model) < 0 || json_add_uint64(o, "tasks", s->tasks) < 0 ||
            json_add_uint64(o, "passed", s->passed) < 0 || json_add_double(o, "pass_rate", s->pass_rate) < 0 ||
            json_add_uint64(o, "passed_without_person", s->passed_alone) < 0 ||
            json_add_double(o, "median_steps", s->median_steps) < 0 ||
            json_add_double(o, "median_tokens", s->median_tokens) < 0 ||
            json_add_double(o, "median_commands", s->median_commands) < 0 ||
            json_add_double(o, "median_seconds", s->median_seconds) < 0 ||
            json_add_double(o, "tokens_per_pass", s->tokens_per_pass) < 0 ||
            json_add_uint64(o, "unsolvable", s->unsolvable) < 0 ||
            json_add_uint64(o, "unsolvable_right", s->unsolvable_right) < 0 ||
            json_add_double(o, "repository_map", st->repository_map) < 0 ||
            json_add_string(o, "corpus", st->corpus_name) < 0 ||
            json_add_string(o, "corpus_version", st->corpus_version) < 0 ||
            json_add_string(o, "agentfab_version", st->version) < 0 ||
            json_add_string(o, "daemon_version", st->daemon_version) < 0 || json_add_uint64(o, "runs", st->runs) < 0)
                return -ENOMEM;
        /* The profile's settings as the daemon had them: what was measured. */
        json_object *settings = NULL;
        if (st->profiles && json_object_object_get_ex(st->profiles, s->profile, &settings))
                json_object_object_add(o, "settings", json_object_get(settings));
        fprintf(f, "%s\n", json_to_line(o));
        return 0;
}

/* ---- --compare ---- */

typedef struct Pair {
        char *task;
        unsigned run;
        int a, b;       /* passed: 1, not: 0, no run: -1 */
} Pair;

static int read_runs(const char *path, int side, Pair **pairs, size_t *n, char **ret_profile) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        FILE *f = fopen(path, "re");
        unsigned lineno = 0;

        if (!f)
                return fprintf(stderr, "Cannot open '%s': %m\n", path), -errno;
        for (ssize_t l; (l = getline(&line, &size, f)) > 0;) {
                _cleanup_json_ json_object *o = NULL;
                const char *type = NULL, *task = NULL, *profile = NULL;
                json_object *passed;
                uint64_t run = 1;

                lineno++;
                if (json_parse_strict(line, (size_t) l, &o) < 0 || !json_object_is_type(o, json_type_object)) {
                        fprintf(stderr, "%s:%u: not a JSON object.\n", path, lineno);
                        fclose(f);
                        return -EINVAL;
                }
                if (json_get_string(o, "type", &type) < 0 || !streq(type, "run"))
                        continue;
                if (json_get_string(o, "task", &task) < 0 || json_get_string(o, "profile", &profile) < 0 ||
                    !json_object_object_get_ex(o, "passed", &passed)) {
                        fprintf(stderr, "%s:%u: a run without task, profile or passed.\n", path, lineno);
                        fclose(f);
                        return -EINVAL;
                }
                (void) json_get_uint64(o, "run", &run);
                if (!*ret_profile && !(*ret_profile = strdup(profile))) {
                        fclose(f);
                        return -ENOMEM;
                }
                if (!streq(*ret_profile, profile))
                        continue;   /* the first profile of each report is compared */

                Pair *p = NULL;
                for (size_t i = 0; i < *n && !p; i++)
                        if (streq((*pairs)[i].task, task) && (*pairs)[i].run == run)
                                p = &(*pairs)[i];
                if (!p) {
                        Pair *x = reallocarray(*pairs, *n + 1, sizeof(Pair));
                        if (!x) {
                                fclose(f);
                                return -ENOMEM;
                        }
                        *pairs = x;
                        p = &x[(*n)++];
                        *p = (Pair) { .task = strdup(task), .run = (unsigned) run, .a = -1, .b = -1 };
                        if (!p->task) {
                                fclose(f);
                                return -ENOMEM;
                        }
                }
                *(side == 0 ? &p->a : &p->b) = json_object_get_boolean(passed);
        }
        fclose(f);
        return 0;
}

int eval_compare(const char *a, const char *b) {
        _cleanup_free_ char *profile_a = NULL, *profile_b = NULL;
        Pair *pairs = NULL;
        size_t n = 0;
        unsigned only_a = 0, only_b = 0, both = 0, neither = 0, unpaired = 0;
        int r;

        r = read_runs(a, 0, &pairs, &n, &profile_a);
        if (r >= 0)
                r = read_runs(b, 1, &pairs, &n, &profile_b);
        if (r < 0 || !profile_a || !profile_b) {
                if (r >= 0)
                        fprintf(stderr, "'%s' holds no run.\n", profile_a ? b : a);
                for (size_t i = 0; i < n; i++)
                        free(pairs[i].task);
                free(pairs);
                return r == -ENOMEM ? EXIT_FAIL : EXIT_USAGE;
        }

        printf("A: %s (%s)\nB: %s (%s)\n\n%-28s %-5s %-5s %s\n", profile_a, a, profile_b, b, "TASK", "A", "B", "");
        for (size_t i = 0; i < n; i++) {
                Pair *p = &pairs[i];
                const char *note = "";

                if (p->a < 0 || p->b < 0) {
                        unpaired++;
                        note = "not in both: left out of the test";
                } else if (p->a && !p->b) {
                        only_a++;
                        note = "A only";
                } else if (!p->a && p->b) {
                        only_b++;
                        note = "B only";
                } else if (p->a)
                        both++;
                else
                        neither++;
                char ta[16], tb[16];
                snprintf(ta, sizeof(ta), "%s", p->a < 0 ? "-" : p->a ? "pass" : "fail");
                snprintf(tb, sizeof(tb), "%s", p->b < 0 ? "-" : p->b ? "pass" : "fail");
                if (p->run > 1)
                        printf("%-24s #%-3u %-5s %-5s %s\n", p->task, p->run, ta, tb, note);
                else
                        printf("%-28s %-5s %-5s %s\n", p->task, ta, tb, note);
                free(p->task);
        }
        free(pairs);

        unsigned paired = only_a + only_b + both + neither;
        printf("\n%u paired runs: both passed %u, neither %u, A only %u, B only %u", paired, both, neither, only_a, only_b);
        if (unpaired)
                printf("; %u not paired", unpaired);
        printf(".\nPass rate A %.1f %%, B %.1f %%: difference (B - A) %+.1f points; McNemar's exact test p = %.4f%s\n",
               paired ? 100.0 * (both + only_a) / paired : 0, paired ? 100.0 * (both + only_b) / paired : 0,
               paired ? 100.0 * ((double) only_b - only_a) / paired : 0, eval_mcnemar_p(only_a, only_b),
               only_a + only_b == 0 ? " (no discordant pair)" : "");
        return EXIT_OK;
}
