/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-fleet.h"
#include "credential.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"

void fleet_config_init(FleetConfig *f) {
        *f = (FleetConfig) {
                .lease_usec = FLEET_LEASE_DEFAULT_USEC,
        };
}

void fleet_config_done(FleetConfig *f) {
        free(f->database);
        free(f->password_credential);
        free(f->ssl_key_credential);
        free(f->name);
        free(f->remote);
        free(f->remote_ssh_key_credential);
        fleet_config_init(f);
}

bool fleet_name_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > FLEET_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* A credential is a file name below $CREDENTIALS_DIRECTORY, nothing else. */
static bool credential_name_ok(const char *s) {
        return fleet_name_is_valid(s) && !streq(s, "..");
}

bool fleet_remote_is_valid(const char *url) {
        const char *rest;

        if (!url || strlen(url) > FLEET_REMOTE_MAX || !string_is_safe(url, false) || strpbrk(url, " \t"))
                return false;
        if (strneq(url, "ssh://", 6))
                rest = url + 6;
        else if (strneq(url, "https://", 8))
                rest = url + 8;
        else if (strneq(url, "file://", 7))
                /* An absolute path, with no host: "file:///srv/fleet.git". */
                return url[7] == '/' && url[8] != '\0' && url[8] != '/';
        else
                return false;
        /* A host, then a path. */
        return rest[0] != '\0' && rest[0] != '/' && strchr(rest, '/') && strchr(rest, '/')[1] != '\0';
}

/* Checks Database= with libpq's own parser, so that what is refused here
 * is what libpq would refuse, with libpq's words. */
static int database_check(const char *value, const char *filename, unsigned line) {
        PQconninfoOption *opts;
        char *err = NULL;
        int r = 0;

        if (strlen(value) > FLEET_DATABASE_MAX || !string_is_safe(value, false)) {
                log_warning("%s:%u: Database= is longer than %u characters or holds control characters, ignoring.",
                            filename, line, FLEET_DATABASE_MAX);
                return -EINVAL;
        }
        opts = PQconninfoParse(value, &err);
        if (!opts) {
                if (!err)
                        return -ENOMEM;
                /* libpq's message ends with a newline. */
                size_t l = strlen(err);
                while (l > 0 && err[l - 1] == '\n')
                        err[--l] = '\0';
                log_warning("%s:%u: Database= is not a libpq connection string (%s), ignoring.", filename, line, err);
                PQfreemem(err);
                return -EINVAL;
        }
        for (PQconninfoOption *o = opts; o->keyword; o++) {
                if (!o->val)
                        continue;
                /* SECURITY: agentfab.conf is readable by everybody on the
                 * host; secrets come from systemd credentials only. */
                if (streq(o->keyword, "password")) {
                        log_warning("%s:%u: Database= holds a password, which agentfab.conf must not: "
                                    "use PasswordCredential=; ignoring Database=.", filename, line);
                        r = -EINVAL;
                } else if (streq(o->keyword, "sslkey") || streq(o->keyword, "passfile") ||
                           streq(o->keyword, "sslpassword")) {
                        log_warning("%s:%u: Database= names '%s', which agentfab takes from systemd credentials: "
                                    "use %s; ignoring Database=.", filename, line, o->keyword,
                                    streq(o->keyword, "sslkey") ? "SSLKeyCredential=" : "PasswordCredential=");
                        r = -EINVAL;
                }
        }
        PQconninfoFree(opts);
        return r;
}

static int assign(FleetConfig *f, const char *key, const char *value, const char *filename, unsigned line) {
        int r;

        if (streq(key, "Database")) {
                /* Empty: this host is in no fleet, whatever else the section says. */
                if (isempty(value)) {
                        f->database_reset = true;
                        return free_and_strdup(&f->database, NULL);
                }
                r = database_check(value, filename, line);
                if (r < 0)
                        return r == -ENOMEM ? r : -EBADMSG;     /* -EBADMSG: warned already */
                f->database_reset = false;
                return free_and_strdup(&f->database, value);
        }
        if (streq(key, "PasswordCredential") || streq(key, "SSLKeyCredential") || streq(key, "RemoteSSHKeyCredential")) {
                char **field = streq(key, "PasswordCredential") ? &f->password_credential :
                        streq(key, "SSLKeyCredential") ? &f->ssl_key_credential : &f->remote_ssh_key_credential;

                if (!isempty(value) && !credential_name_ok(value))
                        return -EINVAL;
                return free_and_strdup(field, isempty(value) ? NULL : value);
        }
        if (streq(key, "Name")) {
                if (isempty(value))
                        return free_and_strdup(&f->name, NULL);
                if (!fleet_name_is_valid(value))
                        return -EINVAL;
                return free_and_strdup(&f->name, value);
        }
        if (streq(key, "Remote")) {
                if (isempty(value))
                        return free_and_strdup(&f->remote, NULL);
                if (!fleet_remote_is_valid(value))
                        return -EINVAL;
                return free_and_strdup(&f->remote, value);
        }
        if (streq(key, "LeaseSec")) {
                uint64_t u;

                r = parse_sec(value, &u);
                if (r < 0)
                        return r;
                if (u < FLEET_LEASE_MIN_USEC || u > FLEET_LEASE_MAX_USEC)
                        return -ERANGE;
                f->lease_usec = u;
                return 0;
        }
        if (streq(key, "Slots")) {
                uint64_t u;

                /* Empty: as many as MaxActiveTasks=. */
                if (isempty(value)) {
                        f->slots_set = false;
                        return 0;
                }
                r = safe_atou64(value, &u);
                if (r < 0)
                        return r;
                if (u > 1024)
                        return -ERANGE;
                f->slots = (unsigned) u;
                f->slots_set = true;
                return 0;
        }
        return -ENOENT;
}

int fleet_config_assign(FleetConfig *f, const char *key, const char *value, const char *filename, unsigned line) {
        int r;

        assert(f);
        assert(key);
        assert(value);

        r = assign(f, key, value, filename, line);
        if (r == -ENOMEM)
                return r;
        if (r >= 0) {
                f->n_assigned++;
                return 0;
        }
        f->n_invalid++;
        if (r == -ENOENT)
                log_warning("%s:%u: Unknown key '%s' in section [Fleet].", filename, line, key);
        else if (r == -ERANGE && streq(key, "LeaseSec"))
                log_warning("%s:%u: LeaseSec='%s' is outside 3s...1h.", filename, line, value);
        else if (r == -ERANGE && streq(key, "Slots"))
                log_warning("%s:%u: Slots='%s' is outside 0...1024.", filename, line, value);
        else if (r == -EINVAL && streq(key, "Remote"))
                log_warning("%s:%u: Remote='%s' is not an ssh://, https:// or file:/// URL.", filename, line, value);
        else if (r == -EINVAL && streq(key, "Name"))
                log_warning("%s:%u: Name='%s' is not 1 to %u characters of A-Z, a-z, 0-9, '_', '.' and '-'.",
                            filename, line, value, FLEET_NAME_MAX);
        else if (r != -EBADMSG)
                log_warning("%s:%u: Invalid value '%s' for %s=.", filename, line, value, key);
        return 0;
}

int fleet_config_verify(const FleetConfig *f, const char *ssh_known_hosts_credential) {
        assert(f);

        if (f->n_invalid > 0)
                return log_error_errno(-EINVAL,
                                       "The [Fleet] section of agentfab.conf has %u invalid line%s (see above); "
                                       "refusing to start rather than work as a host on its own.",
                                       f->n_invalid, f->n_invalid == 1 ? "" : "s");
        if (!f->database && !f->database_reset && f->n_assigned > 0)
                return log_error_errno(-EINVAL,
                                       "The [Fleet] section of agentfab.conf has settings but no Database=; "
                                       "refusing to start rather than work as a host on its own "
                                       "(an empty Database= leaves the fleet).");
        /* SECURITY: an ssh:// Remote= is reached only with this host's own
         * key and a host key checked against the known hosts given, never
         * with the daemon user's ssh setup; without either, every publish
         * would fail, and every task this host works on with it. */
        if (fleet_config_enabled(f) && f->remote && strneq(f->remote, "ssh://", 6)) {
                if (!ssh_known_hosts_credential)
                        return log_error_errno(-EINVAL,
                                               "[Fleet] Remote='%s' is an ssh:// URL, but [Git] SSHKnownHostsCredential= "
                                               "is not set: refusing to start rather than connect to an unverified host.",
                                               f->remote);
                if (!f->remote_ssh_key_credential)
                        return log_error_errno(-EINVAL,
                                               "[Fleet] Remote='%s' is an ssh:// URL, but [Fleet] RemoteSSHKeyCredential= "
                                               "is not set: refusing to start, this host could publish nothing.",
                                               f->remote);
        }
        return 0;
}

unsigned fleet_config_slots(const FleetConfig *f, unsigned max_active_tasks) {
        return f->slots_set ? f->slots : max_active_tasks;
}

int fleet_config_host_name(const FleetConfig *f, char **ret) {
        char buf[256] = {};
        char *dot, *s;

        assert(f);
        assert(ret);

        if (f->name)
                s = strdup(f->name);
        else {
                if (gethostname(buf, sizeof(buf) - 1) < 0)
                        return -errno;
                dot = strchr(buf, '.');
                if (dot)
                        *dot = '\0';
                if (!fleet_name_is_valid(buf))
                        return log_error_errno(-EINVAL,
                                               "The hostname '%s' is not a fleet host name: set Name= in [Fleet].", buf);
                s = strdup(buf);
        }
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int fleet_conninfo_append(Buf *b, const char *keyword, const char *value) {
        int r;

        r = buf_printf(b, "%s%s='", b->n > 0 ? " " : "", keyword);
        for (const char *p = value; r >= 0 && *p; p++) {
                /* libpq: a quote or a backslash in a quoted value is escaped
                 * with a backslash. */
                if (*p == '\'' || *p == '\\')
                        r = buf_append(b, "\\", 1);
                if (r >= 0)
                        r = buf_append(b, p, 1);
        }
        if (r >= 0)
                r = buf_puts(b, "'");
        return r;
}

int fleet_config_conninfo(const FleetConfig *f, char **ret) {
        _cleanup_free_ char *key_path = NULL;
        char *password = NULL;
        PQconninfoOption *opts;
        Buf b = {};
        int r = 0;

        assert(f);
        assert(ret);

        if (!f->database)
                return -EINVAL;
        opts = PQconninfoParse(f->database, NULL);
        if (!opts)
                return -EINVAL;
        for (PQconninfoOption *o = opts; r >= 0 && o->keyword; o++)
                if (o->val)
                        r = fleet_conninfo_append(&b, o->keyword, o->val);
        PQconninfoFree(opts);

        if (r >= 0 && f->password_credential) {
                r = credential_read_line(f->password_credential, FLEET_CREDENTIAL_MAX, true, &password);
                if (r < 0)
                        log_error_errno(r, "Cannot read the fleet database's password from credential '%s': %m",
                                        f->password_credential);
                else
                        r = fleet_conninfo_append(&b, "password", password);
                password = credential_free(password);
        }
        if (r >= 0 && f->ssl_key_credential) {
                /* libpq reads the key itself, from the service's credentials
                 * directory, which only the service can read. */
                const char *dir = getenv("CREDENTIALS_DIRECTORY");
                if (!dir || dir[0] != '/')
                        r = log_error_errno(-ENXIO, "SSLKeyCredential= is set, but the service has no credentials directory.");
                else if (asprintf(&key_path, "%s/%s", dir, f->ssl_key_credential) < 0)
                        r = -ENOMEM;
                else
                        r = fleet_conninfo_append(&b, "sslkey", key_path);
        }
        if (r >= 0 && !b.s)
                r = buf_puts(&b, "");
        if (r < 0) {
                if (b.s)
                        explicit_bzero(b.s, b.n);
                buf_done(&b);
                return r;
        }
        *ret = TAKE_PTR(b.s);
        return 0;
}
