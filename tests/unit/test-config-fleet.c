/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "credential.h"
#include "tap.h"

static void parse(Config *c, const char *text) {
        config_done(c);
        config_init(c);
        CHECK(config_parse(c, text, "test") >= 0, "parsed");
}

int main(void) {
        Config c;
        char *name = NULL;

        /* Without [Fleet], the host is on its own exactly as before: nothing
         * set, nothing to verify. */
        config_init(&c);
        CHECK(!fleet_config_enabled(&c.fleet) && fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == 0, "no [Fleet]: not in a fleet");
        CHECK_UINT_EQ(c.fleet.lease_usec, 30 * USEC_PER_SEC, "LeaseSec= defaults to 30s");
        CHECK_UINT_EQ(fleet_config_slots(&c.fleet, c.max_active_tasks), c.max_active_tasks, "Slots= defaults to MaxActiveTasks=");

        /* A whole section, in both of libpq's forms of connection string. */
        parse(&c, "[Daemon]\nMaxActiveTasks=7\n[Fleet]\nDatabase=host=127.0.0.1 port=5433 dbname=fleet user=host_a sslmode=require\n"
                  "PasswordCredential=fleet-password\nSSLKeyCredential=fleet-key\nName=host-a\n"
                  "Remote=ssh://git@git.example.com/srv/fleet.git\nRemoteSSHKeyCredential=fleet-git-key\nLeaseSec=12s\nSlots=3\n"
                  "[Git]\nSSHKnownHostsCredential=known-hosts\n");
        CHECK(fleet_config_enabled(&c.fleet) && fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == 0, "a full section is usable");
        CHECK(streq_ptr(c.fleet.database, "host=127.0.0.1 port=5433 dbname=fleet user=host_a sslmode=require") &&
              streq_ptr(c.fleet.password_credential, "fleet-password") && streq_ptr(c.fleet.ssl_key_credential, "fleet-key") &&
              streq_ptr(c.fleet.name, "host-a") && streq_ptr(c.fleet.remote, "ssh://git@git.example.com/srv/fleet.git") &&
              streq_ptr(c.fleet.remote_ssh_key_credential, "fleet-git-key"),
              "its strings are kept");
        CHECK_UINT_EQ(c.fleet.lease_usec, 12 * USEC_PER_SEC, "LeaseSec=12s");
        CHECK_UINT_EQ(fleet_config_slots(&c.fleet, c.max_active_tasks), 3, "Slots=3 wins over MaxActiveTasks=");
        CHECK(fleet_config_host_name(&c.fleet, &name) == 0 && streq_ptr(name, "host-a"), "Name= is the host's name");
        free(name);
        name = NULL;

        parse(&c, "[Fleet]\nDatabase=postgresql://host_b@db.example.com:5432/fleet?sslmode=verify-full\nSlots=0\n"
                  "Remote=file:///srv/fleet.git\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == 0 && c.fleet.slots_set && c.fleet.slots == 0,
              "a URI, and Slots=0 (a host that only takes submissions)");
        CHECK(fleet_config_host_name(&c.fleet, &name) == 0 && name && fleet_name_is_valid(name), "the hostname is the default name");
        free(name);

        /* SECURITY: agentfab.conf is readable by all; a password or a key
         * file in it is refused, and the daemon does not start. */
        parse(&c, "[Fleet]\nDatabase=host=db user=a password=hunter2\n");
        CHECK(!fleet_config_enabled(&c.fleet) && fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL, "a password in Database= stops the daemon");
        parse(&c, "[Fleet]\nDatabase=postgresql://a:hunter2@db/fleet\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL, "a password in a URI too");
        parse(&c, "[Fleet]\nDatabase=host=db sslkey=/etc/agentfab/key.pem\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL, "sslkey= is refused: SSLKeyCredential= is the way");
        parse(&c, "[Fleet]\nDatabase=host=db bogus=1\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL, "what libpq does not parse is refused");
        parse(&c, "[Fleet]\nDatabase=host=db\nPasswordCredential=../etc/shadow\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL && !c.fleet.password_credential, "a credential is a file name, not a path");

        /* SECURITY: an ssh:// Remote= is reached with this host's own key
         * and checked known hosts only; without them the host could only
         * fail its tasks, or would have to trust a host key it cannot
         * check: it does not start. */
        parse(&c, "[Fleet]\nDatabase=host=db\nRemote=ssh://git@git.example.com/srv/fleet.git\n"
                  "RemoteSSHKeyCredential=fleet-git-key\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL,
              "an ssh:// Remote= without [Git] SSHKnownHostsCredential= stops the daemon");
        parse(&c, "[Fleet]\nDatabase=host=db\nRemote=ssh://git@git.example.com/srv/fleet.git\n"
                  "[Git]\nSSHKnownHostsCredential=known-hosts\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL,
              "an ssh:// Remote= without RemoteSSHKeyCredential= stops the daemon");
        parse(&c, "[Fleet]\nDatabase=host=db\nRemote=file:///srv/fleet.git\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == 0, "a file:/// Remote= needs neither");
        parse(&c, "[Fleet]\nDatabase=host=db\nRemoteSSHKeyCredential=../id_ed25519\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL && !c.fleet.remote_ssh_key_credential,
              "RemoteSSHKeyCredential= is a file name, not a path");

        /* A mistake anywhere in the section stops the daemon: working
         * alone, a host would take what its fleet works on. */
        static const char *const bad[] = {
                "LeaseSec=2s", "LeaseSec=2h", "LeaseSec=soon", "Slots=1025", "Slots=-1", "Name=a b", "Name=.hidden",
                "Name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "Remote=http://git/x.git",
                "Remote=file://host/srv/x.git", "Remote=ssh://git", "Remote=/srv/fleet.git", "Remote=https:// x",
                "Bogus=1",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[256];
                snprintf(text, sizeof(text), "[Fleet]\nDatabase=host=db\n%s\n", bad[i]);
                parse(&c, text);
                CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL, "refused: %s", bad[i]);
        }

        /* Settings without Database= are a mistake too; an empty Database=
         * (in a drop-in, say) leaves the fleet on purpose. */
        parse(&c, "[Fleet]\nName=host-a\nSlots=2\n");
        CHECK(fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == -EINVAL, "settings without Database= stop the daemon");
        parse(&c, "[Fleet]\nDatabase=host=db\nName=host-a\n[Fleet]\nDatabase=\n");
        CHECK(!fleet_config_enabled(&c.fleet) && fleet_config_verify(&c.fleet, c.ssh_known_hosts_credential) == 0, "an empty Database= leaves the fleet");
        parse(&c, "[Fleet]\nDatabase=host=db\nSlots=2\nSlots=\n[Daemon]\nMaxActiveTasks=9\n");
        CHECK_UINT_EQ(fleet_config_slots(&c.fleet, c.max_active_tasks), 9, "an empty Slots= is MaxActiveTasks= again");

        /* The connection string the daemon uses: libpq's parse of
         * Database=, quoted again, with the credentials' secrets added;
         * quotes and backslashes in a value cannot end it. */
        char dir[] = "/tmp/test-config-fleet-XXXXXX", path[128];
        char *conninfo = NULL;
        FILE *fp;
        CHECK(mkdtemp(dir) != NULL, "credentials directory");
        snprintf(path, sizeof(path), "%s/pw", dir);
        fp = fopen(path, "we");
        fputs("it's a \\secret\n", fp);
        fclose(fp);
        setenv("CREDENTIALS_DIRECTORY", dir, 1);
        parse(&c, "[Fleet]\nDatabase=postgresql://host_a@127.0.0.1:5433/fleet\nPasswordCredential=pw\nSSLKeyCredential=key\n");
        CHECK(fleet_config_conninfo(&c.fleet, &conninfo) == 0, "conninfo built");
        char expected[512];
        snprintf(expected, sizeof(expected), "user='host_a' password='it\\'s a \\\\secret' dbname='fleet' host='127.0.0.1' "
                 "port='5433' sslkey='%s/key'", dir);
        /* libpq's order of keywords is its own: compare what it parses. */
        PQconninfoOption *got = PQconninfoParse(conninfo, NULL), *want = PQconninfoParse(expected, NULL);
        bool same = got && want;
        for (size_t i = 0; same && got[i].keyword; i++)
                same = streq(got[i].keyword, want[i].keyword) && streq_ptr(got[i].val, want[i].val);
        CHECK(same, "the password is quoted whole and the key is the credential's path");
        PQconninfoFree(got);
        PQconninfoFree(want);
        conninfo = credential_free(conninfo);
        parse(&c, "[Fleet]\nDatabase=host=db\nPasswordCredential=missing\n");
        CHECK(fleet_config_conninfo(&c.fleet, &conninfo) == -ENOENT && !conninfo, "a missing credential is an error");
        unlink(path);
        rmdir(dir);

        config_done(&c);
        return tap_done();
}
