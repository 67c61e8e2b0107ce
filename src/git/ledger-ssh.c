/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "known-hosts.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* ssh:// sources: the URL's parts, the host key checked against the known
 * hosts given, the one key given offered once. */

bool ledger_ssh_url(const char *url) {
        return url && strneq(url, "ssh://", 6);
}

/* ssh://[user@]host[:port]/path, host possibly "[v6 address]"; what libgit2
 * connects to, parsed here too so the host key is checked for the port we
 * know (libgit2's certificate callback is told the host only). */
int ledger_ssh_parse(const char *url, SshAuth *a) {
        const char *p = url + 6, *end, *at, *h, *he;
        size_t n;

        end = p + strcspn(p, "/");
        at = memchr(p, '@', (size_t) (end - p));
        strcpy(a->user, "git");
        if (at) {
                n = (size_t) (at - p);
                /* SECURITY: a password in the URL is refused here as well as in the spec. */
                if (n == 0 || n > SSH_USER_MAX || memchr(p, ':', n))
                        return -EINVAL;
                memcpy(a->user, p, n);
                a->user[n] = '\0';
                p = at + 1;
        }
        if (*p == '[') {
                h = p + 1;
                he = memchr(h, ']', (size_t) (end - h));
                if (!he)
                        return -EINVAL;
                p = he + 1;
        } else {
                h = p;
                he = p + strcspn(p, ":/");
                if (he > end)
                        he = end;
                p = he;
        }
        n = (size_t) (he - h);
        if (n == 0 || n > SSH_HOST_MAX)
                return -EINVAL;
        memcpy(a->host, h, n);
        a->host[n] = '\0';
        /* A name or an address as it is, nothing libgit2 would decode first:
         * the host key is checked for the host we connect to. */
        for (const char *c = a->host; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr(".-_:", *c))
                        return -EINVAL;
        a->port = 22;
        if (*p == ':') {
                unsigned long v = 0;

                for (p++; p < end; p++) {
                        if (!isdigit((unsigned char) *p) || v > 65535)
                                return -EINVAL;
                        v = v * 10 + (unsigned long) (*p - '0');
                }
                if (v == 0 || v > 65535)
                        return -EINVAL;
                a->port = (unsigned) v;
        }
        return p == end && *end == '/' ? 0 : -EINVAL;
}

int ledger_ssh_prepare(SshAuth *a, const char *url, const LedgerOptions *o, char **ret_error) {
        assert(a);
        assert(url);

        *a = (SshAuth) {};
        if (!ledger_ssh_url(url))
                return 0;
        /* SECURITY: never an ssh connection whose host key cannot be checked. */
        if (!o || !o->ssh_known_hosts)
                return error_set(ret_error, -EPERM,
                                 "ssh:// repositories need known hosts ([Git] SSHKnownHostsCredential=): "
                                 "not connecting to an unverifiable host.");
        if (ledger_ssh_parse(url, a) < 0)
                return error_set(ret_error, -EINVAL, "Invalid ssh repository URL '%s'.", url);
        a->key = o->ssh_key;
        a->known_hosts = o->ssh_known_hosts;
        a->key_setting = o->ssh_key_setting ?: "[Git] SSHKeyCredential=";
        return 1;
}

static int certificate_cb(git_cert *cert, int valid, const char *host, void *payload) {
        return ledger_ssh_certificate_check(payload, cert, valid, host);
}

static int credentials_cb(git_credential **out, const char *url, const char *username_from_url, unsigned allowed,
                          void *payload) {
        return ledger_ssh_credentials(payload, out, url, username_from_url, allowed);
}

void ledger_ssh_set_callbacks(git_remote_callbacks *cbs, SshAuth *a) {
        cbs->certificate_check = certificate_cb;
        cbs->credentials = credentials_cb;
        cbs->payload = a;
}

const char *ledger_ssh_message(const SshAuth *a) {
        return a && a->reason[0] ? a->reason : ledger_git_message();
}

int ledger_ssh_errno(const SshAuth *a, int fallback) {
        return a && a->reason[0] ? a->reason_errno : fallback;
}

static int ssh_auth_fail(SshAuth *a, int r, int git_error, const char *fmt, ...) {
        va_list ap;

        if (!a) {
                git_error_set_str(GIT_ERROR_SSH, "no ssh settings for this connection");
                return git_error;
        }
        va_start(ap, fmt);
        (void) vsnprintf(a->reason, sizeof(a->reason), fmt, ap);
        va_end(ap);
        a->reason_errno = r;
        git_error_set_str(GIT_ERROR_SSH, a->reason);
        return git_error;
}

/* SECURITY: the host key must be in the known hosts we were given, for this
 * host and port; libgit2's own verdict (from the daemon user's
 * ~/.ssh/known_hosts, if any) counts for nothing. Unknown, changed and
 * revoked keys are all refused, right after the key exchange: before we
 * log in or ask for anything. */
int ledger_ssh_certificate_check(SshAuth *a, git_cert *cert, int valid, const char *host) {
        const git_cert_hostkey *hk = (const git_cert_hostkey *) cert;

        (void) valid;
        (void) host;    /* The host we parsed from the URL is the one we connected to. */

        if (!a || cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2)
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE, "Unexpected kind of certificate for an ssh connection.");
        if (!(hk->type & GIT_CERT_SSH_RAW) || !hk->hostkey || hk->hostkey_len == 0)
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE, "The ssh host key of '%s' port %u cannot be read.", a->host, a->port);

        switch (known_hosts_check(a->known_hosts, a->host, a->port, hk->hostkey, hk->hostkey_len)) {
        case KNOWN_HOSTS_MATCH:
                return 0;
        case KNOWN_HOSTS_UNKNOWN:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE,
                                     "The ssh host key of '%s' port %u is unknown: no entry of the known hosts "
                                     "credential names that host and port. Nothing was sent or fetched.", a->host, a->port);
        case KNOWN_HOSTS_MISMATCH:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE,
                                     "The ssh host key of '%s' port %u is unknown: it is not the key the known hosts "
                                     "list for that host and port (the key changed, or this is another host). "
                                     "Nothing was sent or fetched.", a->host, a->port);
        case KNOWN_HOSTS_REVOKED:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE,
                                     "The ssh host key of '%s' port %u is revoked in the known hosts. Nothing was sent or fetched.",
                                     a->host, a->port);
        default:
                return ssh_auth_fail(a, -EPERM, GIT_ECERTIFICATE, "The ssh host key of '%s' port %u cannot be checked.",
                                     a->host, a->port);
        }
}

/* libgit2 asks again after every refusal: the key is offered once. */
int ledger_ssh_credentials(SshAuth *a, git_credential **out, const char *url, const char *username_from_url,
                           unsigned allowed) {

        (void) url;
        if (!a)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH, "No credentials for this URL.");
        if (allowed & GIT_CREDENTIAL_USERNAME)
                return git_credential_username_new(out, a->user);
        if (!(allowed & GIT_CREDENTIAL_SSH_MEMORY))
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH, "The ssh server '%s' port %u offers no public key authentication.",
                                     a->host, a->port);
        if (!a->key)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH,
                                     "The ssh server '%s' port %u asks for authentication, but no ssh key is configured "
                                     "(%s).", a->host, a->port, a->key_setting ?: "[Git] SSHKeyCredential=");
        if (a->key_tries++ > 0)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH,
                                     "Authentication as '%s' at ssh server '%s' port %u failed: the configured key was refused.",
                                     username_from_url ?: a->user, a->host, a->port);
        if (git_credential_ssh_key_memory_new(out, username_from_url ?: a->user, NULL, a->key, NULL) < 0)
                return ssh_auth_fail(a, -EACCES, GIT_EAUTH, "The configured ssh key cannot be used: %s", ledger_git_message());
        return 0;
}
