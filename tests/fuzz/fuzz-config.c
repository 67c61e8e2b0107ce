/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agentfab.conf and its drop-ins, as config_parse() and
 * model_profiles_parse() read one file's text.
 *
 * Invariants: what is kept is within the documented bounds ([Forge]
 * sections at most CONFIG_FORGES_MAX with valid, distinct names; at most 256
 * protected paths; every model profile with a valid name and endpoint and
 * its numbers in range, "default" always there, at most
 * MODEL_PROFILES_MAX); and reading the same file twice changes nothing the
 * first reading set (later settings win, so a second reading of the same
 * settings is a no-op), protected paths aside, which add up by design, and
 * [Forge] settings, whose sections apply in order. [Environment] sections
 * (environments_load(), from a file): at most ENVIRONMENTS_MAX with valid,
 * distinct names and "default" always there, bounded lists, and the same
 * result from the same file. */
#include <math.h>

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "fuzz.h"
#include "config.h"
#include "environments.h"
#include "model-profile.h"
#include "string-util.h"

/* environments_load() reads a file by name: the input goes to one on tmpfs. */
static char env_path[PATH_MAX];

static void cleanup(void) {
        (void) unlink(env_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        snprintf(env_path, sizeof(env_path), "%s/fuzz-config-XXXXXX",
                 getenv("TMPDIR") ?: access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        int fd = mkostemp(env_path, O_CLOEXEC);
        if (fd < 0)
                abort();
        close(fd);
        atexit(cleanup);
        return 0;
}

static void environments_check(const Environments *e) {
        FUZZ_CHECK(e->n >= 1 && e->n <= ENVIRONMENTS_MAX, "%zu environments", e->n);
        FUZZ_CHECK(environments_find(e, ENVIRONMENT_DEFAULT), "a default environment");
        for (size_t i = 0; i < e->n; i++) {
                const Environment *v = &e->list[i];
                FUZZ_CHECK(v->name && environment_name_is_valid(v->name), "environment name");
                for (size_t j = 0; j < i; j++)
                        FUZZ_CHECK(!streq(v->name, e->list[j].name), "environment names distinct");
                FUZZ_CHECK(!v->image || (v->image[0] == '/' && strlen(v->image) <= ENVIRONMENT_IMAGE_MAX), "image '%s'", v->image);
                FUZZ_CHECK(v->network >= 0 && v->network < _NETWORK_MODE_MAX, "network mode");
                FUZZ_CHECK(strv_length(v->allow) <= ENVIRONMENT_ALLOW_MAX, "%zu Allow= entries", strv_length(v->allow));
                FUZZ_CHECK(strv_length(v->vars) <= ENVIRONMENT_VARS_MAX, "%zu variables", strv_length(v->vars));
                for (char **x = v->vars; x && *x; x++)
                        FUZZ_CHECK(strchr(*x, '=') && *x[0] != '=', "variable '%s'", *x);
                FUZZ_CHECK(v->caches < (1U << _CACHE_KIND_MAX), "cache mask");
        }
}

static void config_check(const Config *c) {
        FUZZ_CHECK(c->n_forges <= CONFIG_FORGES_MAX, "%zu forges", c->n_forges);
        for (size_t i = 0; i < c->n_forges; i++) {
                FUZZ_CHECK(c->forges[i].name && forge_name_is_valid(c->forges[i].name), "forge name");
                for (size_t j = 0; j < i; j++)
                        FUZZ_CHECK(!streq(c->forges[i].name, c->forges[j].name), "forge names distinct");
        }
        FUZZ_CHECK(strv_length(c->protected_paths) <= 256, "%zu protected paths", strv_length(c->protected_paths));
        FUZZ_CHECK(c->budget_action >= 0 && c->budget_action < _BUDGET_ACTION_MAX, "budget action");
        FUZZ_CHECK(!c->ssh_key_credential || model_name_is_valid(c->ssh_key_credential), "ssh key credential name");
        FUZZ_CHECK(!c->ssh_known_hosts_credential || model_name_is_valid(c->ssh_known_hosts_credential), "known hosts credential name");
}

static void config_compare(const Config *a, const Config *b) {
        /* Everything but the protected paths, field by field. */
        FUZZ_CHECK(a->idle_timeout_usec == b->idle_timeout_usec && a->max_tasks == b->max_tasks &&
                   a->max_tasks_per_user == b->max_tasks_per_user && a->max_stream_clients == b->max_stream_clients &&
                   a->max_active_tasks == b->max_active_tasks && fuzz_streq_ptr(a->launcher_socket, b->launcher_socket),
                   "[Daemon] the same after a second reading");
        FUZZ_CHECK(a->max_steps == b->max_steps && a->max_wall_clock_usec == b->max_wall_clock_usec &&
                   a->max_tokens == b->max_tokens && a->max_commands == b->max_commands &&
                   a->command_timeout_usec == b->command_timeout_usec && a->budget_action == b->budget_action &&
                   a->max_rejections == b->max_rejections && a->output_keep_bytes == b->output_keep_bytes &&
                   a->max_repository_size == b->max_repository_size, "[Agent] the same after a second reading");
        FUZZ_CHECK(a->memory_max == b->memory_max && a->tasks_max == b->tasks_max && a->cpu_quota_percent == b->cpu_quota_percent,
                   "[Sandbox] the same after a second reading");
        FUZZ_CHECK(a->max_test_failures == b->max_test_failures && a->max_files_changed == b->max_files_changed &&
                   a->max_lines_changed == b->max_lines_changed && a->max_malformed == b->max_malformed,
                   "[Breakers] the same after a second reading");
        FUZZ_CHECK(fuzz_streq_ptr(a->ssh_key_credential, b->ssh_key_credential) &&
                   fuzz_streq_ptr(a->ssh_known_hosts_credential, b->ssh_known_hosts_credential), "[Git] the same");
        FUZZ_CHECK(a->n_forges == b->n_forges, "[Forge] count the same after a second reading");
        /* Only the names: a [Forge] section without API= for a forge not
         * defined yet is ignored, one for a defined forge changes it, so a
         * second reading may apply what the first skipped. */
        for (size_t i = 0; i < a->n_forges; i++)
                FUZZ_CHECK(streq(a->forges[i].name, b->forges[i].name), "[Forge] %zu the same after a second reading", i);
}

static void profiles_check(const ModelProfiles *p) {
        FUZZ_CHECK(p->n_profiles >= 1 && p->n_profiles <= MODEL_PROFILES_MAX, "%zu profiles", p->n_profiles);
        FUZZ_CHECK(model_profiles_find(p, NULL), "a default profile");
        for (size_t i = 0; i < p->n_profiles; i++) {
                const ModelProfile *m = p->profiles[i];
                FUZZ_CHECK(model_name_is_valid(m->name), "profile name");
                for (size_t j = 0; j < i; j++)
                        FUZZ_CHECK(!streq(m->name, p->profiles[j]->name), "profile names distinct");
                FUZZ_CHECK(m->kind >= 0 && m->kind < _MODEL_KIND_MAX, "kind");
                FUZZ_CHECK(m->endpoint && model_endpoint_is_valid(m->endpoint), "endpoint '%s'", strempty(m->endpoint));
                FUZZ_CHECK(m->model && *m->model && strlen(m->model) <= 256 && string_is_safe(m->model, false), "model");
                FUZZ_CHECK(!m->api_key_credential || model_name_is_valid(m->api_key_credential), "credential name");
                FUZZ_CHECK(!m->replay_path || (m->replay_path[0] == '/' && string_is_safe(m->replay_path, false)), "replay path");
                FUZZ_CHECK(m->max_tokens <= 1000000 && m->max_retries <= 100 && m->context_budget <= UINT32_MAX, "numbers");
                FUZZ_CHECK(m->max_reply_bytes >= 1024 && m->max_reply_bytes <= 1024ULL * 1024 * 1024, "reply size");
                FUZZ_CHECK(m->temperature < 0 || (isfinite(m->temperature) && m->temperature <= 2), "temperature");
        }
}

static bool profile_same(const ModelProfile *a, const ModelProfile *b) {
        return streq(a->name, b->name) && a->kind == b->kind && fuzz_streq_ptr(a->endpoint, b->endpoint) &&
               fuzz_streq_ptr(a->model, b->model) && fuzz_streq_ptr(a->api_key_credential, b->api_key_credential) &&
               a->timeout_usec == b->timeout_usec && a->connect_timeout_usec == b->connect_timeout_usec &&
               a->max_tokens == b->max_tokens && a->temperature == b->temperature && a->context_budget == b->context_budget &&
               a->max_retries == b->max_retries && a->retry_base_usec == b->retry_base_usec &&
               a->max_reply_bytes == b->max_reply_bytes && a->stream == b->stream && fuzz_streq_ptr(a->replay_path, b->replay_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Config once, twice;
        ModelProfiles p1, p2;

        if (size > 256 * 1024)
                return -1;
        fuzz_quiet();
        char *text = fuzz_text(data, size);

        config_init(&once);
        config_init(&twice);
        (void) config_parse(&once, text, "fuzz.conf");
        config_check(&once);
        (void) config_parse(&twice, text, "fuzz.conf");
        (void) config_parse(&twice, text, "fuzz.conf");
        config_check(&twice);
        config_compare(&once, &twice);
        config_done(&once);
        config_done(&twice);

        /* [Environment]: read twice, the same. */
        int fd = open(env_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        FUZZ_CHECK(fd >= 0 && write(fd, data, size) == (ssize_t) size, "environment file written");
        close(fd);
        Environments *e1 = calloc(1, sizeof(Environments)), *e2 = calloc(1, sizeof(Environments));
        if (!e1 || !e2)
                abort();
        (void) environments_load(e1, env_path, false);
        environments_check(e1);
        (void) environments_load(e2, env_path, false);
        FUZZ_CHECK(e1->n == e2->n, "the same environments from the same file");
        for (size_t i = 0; i < e1->n; i++)
                FUZZ_CHECK(streq(e1->list[i].name, e2->list[i].name) && fuzz_streq_ptr(e1->list[i].image, e2->list[i].image) &&
                           e1->list[i].network == e2->list[i].network && e1->list[i].caches == e2->list[i].caches &&
                           strv_length(e1->list[i].allow) == strv_length(e2->list[i].allow), "environment %zu the same", i);
        environments_done(e1);
        environments_done(e2);
        free(e1);
        free(e2);

        FUZZ_CHECK(model_profiles_init(&p1) == 0 && model_profiles_init(&p2) == 0, "profiles init");
        (void) model_profiles_parse(&p1, text, "fuzz.conf");
        profiles_check(&p1);
        (void) model_profiles_parse(&p2, text, "fuzz.conf");
        (void) model_profiles_parse(&p2, text, "fuzz.conf");
        profiles_check(&p2);
        FUZZ_CHECK(p1.n_profiles == p2.n_profiles, "%zu vs %zu profiles after a second reading", p1.n_profiles, p2.n_profiles);
        for (size_t i = 0; i < p1.n_profiles; i++)
                FUZZ_CHECK(profile_same(p1.profiles[i], p2.profiles[i]), "profile '%s' the same after a second reading",
                           p1.profiles[i]->name);
        model_profiles_done(&p1);
        model_profiles_done(&p2);
        free(text);
        return 0;
}
