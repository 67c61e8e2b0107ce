/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "config.h"
#include "fs-util.h"
#include "tap.h"

int main(void) {
        Config c;

        /* Defaults are what the man page promises. */
        config_init(&c);
        CHECK(c.idle_timeout_usec == 60 * USEC_PER_SEC && c.max_tasks_per_user == 16 && c.max_tasks == 4096, "defaults");

        config_parse(&c, "# comment\n[Daemon]\nIdleTimeoutSec=5min\n MaxTasksPerUser = 3 \nMaxTasks=100\n", "test");
        CHECK(c.idle_timeout_usec == 300 * USEC_PER_SEC, "time span with unit parsed");
        CHECK(c.max_tasks_per_user == 3 && c.max_tasks == 100, "numbers parsed, whitespace ignored");

        /* A broken line is skipped, the rest still applies: a typo must not
         * take the service down. */
        config_init(&c);
        config_parse(&c, "[Daemon]\nMaxTasksPerUser=lots\nBogus=1\nno equals sign\n[Daemon\nIdleTimeoutSec=infinity\n", "test");
        CHECK_INT_EQ(c.max_tasks_per_user, 16, "invalid value ignored");
        CHECK_UINT_EQ(c.idle_timeout_usec, UINT64_MAX, "later valid line still applies");

        /* MaxPausedSec=: how long a frozen sandbox is kept; 0 would tear
         * down every pause at once, so it is refused; infinity keeps them. */
        config_init(&c);
        CHECK(c.max_paused_usec == 3600 * USEC_PER_SEC, "MaxPausedSec= defaults to 1h");
        config_parse(&c, "[Sandbox]\nMaxPausedSec=90s\n", "test");
        CHECK(c.max_paused_usec == 90 * USEC_PER_SEC, "MaxPausedSec=90s");
        config_parse(&c, "[Sandbox]\nMaxPausedSec=0\n", "test");
        CHECK(c.max_paused_usec == 90 * USEC_PER_SEC, "MaxPausedSec=0 refused");
        config_parse(&c, "[Sandbox]\nMaxPausedSec=infinity\n", "test");
        CHECK_UINT_EQ(c.max_paused_usec, UINT64_MAX, "MaxPausedSec=infinity");

        config_init(&c);
        config_parse(&c, "[Model:local]\nEndpoint=http://x\n[Daemon]\nMaxTasksPerUser=0\n", "test");
        CHECK_INT_EQ(c.max_tasks_per_user, 16, "out-of-range value ignored");

        /* [Review]: lists add up and an empty assignment resets, as in systemd. */
        config_init(&c);
        CHECK(c.coverage_tolerance == 1.0 && !c.vulnerability_database && !c.checkers, "review defaults");
        config_parse(&c, "[Review]\nVulnerabilityDatabase=/var/lib/osv\nCoverageTolerance=0.5\nCoverageTolerance=-1\n"
                     "SecretScanIgnore=a/** b/*.pem\nSecretScanIgnore=\nSecretScanIgnore=tests/fixtures/**\n"
                     "Checker=shellcheck -f gcc {files}\nChecker=cppcheck --template=gcc {files}\nVulnerabilityDatabase=relative\n", "test");
        CHECK(streq_ptr(c.vulnerability_database, "/var/lib/osv") && c.coverage_tolerance == 0.5, "review database and tolerance");
        CHECK(c.secret_scan_ignore && streq(c.secret_scan_ignore[0], "tests/fixtures/**") && !c.secret_scan_ignore[1] &&
              c.checkers && c.checkers[1] && !c.checkers[2], "review lists");
        config_done(&c);

        /* Drop-ins override the main file, in lexical order. */
        char dir[] = "/tmp/test-config-XXXXXX", path[128], dropins[160];
        if (!mkdtemp(dir))
                return 1;
        snprintf(path, sizeof(path), "%s/agentfab.conf", dir);
        snprintf(dropins, sizeof(dropins), "%s.d", path);
        int fd = open(dir, O_RDONLY | O_DIRECTORY);
        write_file_atomic(fd, "agentfab.conf", "[Daemon]\nMaxTasksPerUser=5\nMaxTasks=50\n", 38, 0644);
        mkdir(dropins, 0755);
        int dfd = open(dropins, O_RDONLY | O_DIRECTORY);
        write_file_atomic(dfd, "20-b.conf", "[Daemon]\nMaxTasksPerUser=7\n", 27, 0644);
        write_file_atomic(dfd, "10-a.conf", "[Daemon]\nMaxTasksPerUser=6\nMaxTasks=60\n", 38, 0644);
        write_file_atomic(dfd, "30-c.conf.disabled", "[Daemon]\nMaxTasksPerUser=9\n", 27, 0644);
        config_init(&c);
        CHECK(config_load(&c, path) >= 0, "config with drop-ins loaded");
        CHECK(c.max_tasks_per_user == 7 && c.max_tasks == 60, "drop-ins applied in order, others ignored");

        config_init(&c);
        CHECK(config_load(&c, "/nonexistent/agentfab.conf") >= 0 && c.max_tasks == 4096, "missing file means defaults");

        /* An unreadable file is a warning, not a daemon that cannot start. */
        config_init(&c);
        CHECK(config_load(&c, dir) >= 0 && c.max_tasks == 4096, "a directory as config file is ignored");

        /* As in systemd, a zero timeout means none. */
        config_init(&c);
        config_parse(&c, "[Daemon]\n\n\nIdleTimeoutSec=0\n", "test");
        CHECK_UINT_EQ(c.idle_timeout_usec, UINT64_MAX, "IdleTimeoutSec=0 disables idle exit");

        /* [Forge] sections: several, Name= anywhere in its section, a later
         * section of the same name changes only what it sets, and a bad
         * value or a section that cannot work is left out with a warning. */
        config_init(&c);
        config_parse(&c,
                     "[Forge]\nKind=github\nAPI=https://api.github.com\nName=hub\nTokenCredential=hub-token\n"
                     "[Forge]\nName=local\nAPI=http://127.0.0.1:3000/api/v1\nAllowFileURLs=yes\nKind=gitlab\n"
                     "[Forge]\nName=nameless/bad\nAPI=https://x.example\n"
                     "[Forge]\nAPI=https://y.example\n"
                     "[Forge]\nName=noapi\nAPI=https://u:p@z.example\n"
                     "[Daemon]\nMaxTasks=77\n", "test");
        const ForgeConfig *hub = config_find_forge(&c, "hub"), *local = config_find_forge(&c, "local");
        CHECK(c.n_forges == 2 && hub && local, "two valid [Forge] sections (%zu)", c.n_forges);
        CHECK(hub && hub->kind == FORGE_KIND_GITHUB && streq(hub->api, "https://api.github.com") &&
              streq(hub->token_credential, "hub-token") && !hub->allow_file_urls, "github forge parsed, Name= last");
        CHECK(local && local->kind == FORGE_KIND_GITEA && local->allow_file_urls && !local->token_credential,
              "gitea is the default kind, an invalid Kind= is ignored, AllowFileURLs=yes");
        CHECK(!config_find_forge(&c, "noapi") && !config_find_forge(&c, NULL), "a forge without a valid API= is left out");
        CHECK_INT_EQ(c.max_tasks, 77, "sections after [Forge] still parse");
        config_parse(&c, "[Forge]\nName=hub\nTokenCredential=\n", "drop-in");
        hub = config_find_forge(&c, "hub");
        CHECK(c.n_forges == 2 && hub && !hub->token_credential && streq(hub->api, "https://api.github.com"),
              "a later section changes only the keys it sets");
        config_parse(&c, "[Forge]\nName=evil\nAPI=https://e.example\nTokenCredential=../../etc/shadow\n", "drop-in");
        CHECK(config_find_forge(&c, "evil") && !config_find_forge(&c, "evil")->token_credential,
              "a credential name with a path is refused");
        config_done(&c);
        CHECK_INT_EQ(c.n_forges, 0, "config_done() frees the forges");

        /* [Git]: the ssh credentials are names below the credentials
         * directory, never paths; an empty assignment resets. */
        config_init(&c);
        config_parse(&c, "[Git]\nSSHKeyCredential=git-key\nSSHKnownHostsCredential=git-known-hosts\nBogus=1\n", "test");
        CHECK(streq_ptr(c.ssh_key_credential, "git-key") && streq_ptr(c.ssh_known_hosts_credential, "git-known-hosts"),
              "[Git] credentials parsed");
        config_parse(&c, "[Git]\nSSHKeyCredential=../key\nSSHKnownHostsCredential=\n", "drop-in");
        CHECK(streq_ptr(c.ssh_key_credential, "git-key") && !c.ssh_known_hosts_credential,
              "a path is refused, an empty value resets");
        config_done(&c);
        CHECK(!c.ssh_key_credential && !c.ssh_known_hosts_credential, "config_done() frees them");

        /* The credential is read whole (a key is many lines), from the
         * credentials directory only. */
        char *text = NULL;
        write_file_atomic(fd, "git-key", "-----BEGIN X-----\nabc\n-----END X-----\n", 38, 0600);
        /* Whatever this test runs under (a service with credentials of its
         * own, say): first none, then ours. */
        const char *outer = getenv("CREDENTIALS_DIRECTORY");
        char *saved = outer ? strdup(outer) : NULL;
        unsetenv("CREDENTIALS_DIRECTORY");
        CHECK_ERRNO(config_read_credential("git-key", CONFIG_SSH_KEY_MAX, &text), -ENXIO, "no credentials directory: -ENXIO");
        CHECK(!text, "nothing read without one");
        setenv("CREDENTIALS_DIRECTORY", dir, 1);
        CHECK(config_read_credential("git-key", CONFIG_SSH_KEY_MAX, &text) >= 0 && text &&
              streq(text, "-----BEGIN X-----\nabc\n-----END X-----\n"), "a key credential is read as it is");
        text = credential_text_free(text);
        CHECK(config_read_credential("git-key", 8, &text) == -EFBIG && !text, "its size is bounded");
        CHECK_ERRNO(config_read_credential("../etc/passwd", CONFIG_SSH_KEY_MAX, &text), -EINVAL, "a path is refused");
        CHECK_ERRNO(config_read_credential("missing", CONFIG_SSH_KEY_MAX, &text), -ENOENT, "a missing one is -ENOENT");
        if (saved)
                setenv("CREDENTIALS_DIRECTORY", saved, 1);
        else
                unsetenv("CREDENTIALS_DIRECTORY");
        free(saved);

        close(dfd);
        close(fd);
        rm_rf_at(AT_FDCWD, dir);
        return tap_done();
}
