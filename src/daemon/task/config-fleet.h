/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

/* [Fleet] in agentfab.conf: this host as one of several sharing a
 * PostgreSQL database (agentfab.conf(5)). Without Database= the daemon is
 * one host on its own, exactly as without the section. */

#define FLEET_NAME_MAX 64U
#define FLEET_DATABASE_MAX 4096U
#define FLEET_REMOTE_MAX 4096U
#define FLEET_LEASE_MIN_USEC (3ULL * 1000000ULL)
#define FLEET_LEASE_MAX_USEC (3600ULL * 1000000ULL)
#define FLEET_LEASE_DEFAULT_USEC (30ULL * 1000000ULL)
#define FLEET_CREDENTIAL_MAX (64U * 1024U)

typedef struct FleetConfig {
        char *database;                 /* Database= : a libpq connection string, with no password in it */
        char *password_credential;      /* PasswordCredential= : credential NAME of the role's password */
        char *ssl_key_credential;       /* SSLKeyCredential= : credential NAME of the TLS client key */
        char *name;                     /* Name= : this host's name; NULL: the hostname */
        char *remote;                   /* Remote= : the shared bare repository's URL */
        char *remote_ssh_key_credential; /* RemoteSSHKeyCredential= : credential NAME of this host's key for an ssh:// Remote= */
        uint64_t lease_usec;            /* LeaseSec= */
        unsigned slots;                 /* Slots= : tasks worked on at once, when slots_set */
        bool slots_set;

        /* Not settings: what the parse saw, for fleet_config_verify(). */
        bool database_reset;            /* an empty Database= left the fleet on purpose */
        unsigned n_assigned;            /* valid assignments of any key */
        unsigned n_invalid;             /* invalid or unknown keys */
} FleetConfig;

void fleet_config_init(FleetConfig *f);
void fleet_config_done(FleetConfig *f);

/* One KEY=VALUE line of a [Fleet] section. Warns itself (naming
 * filename:line and the reason) and counts what it refused; returns
 * -ENOMEM only, so that the parse goes on and every mistake is shown. */
int fleet_config_assign(FleetConfig *f, const char *key, const char *value, const char *filename, unsigned line);

/* Whether this daemon is a host of a fleet. */
static inline bool fleet_config_enabled(const FleetConfig *f) {
        return f && f->database;
}

/* Once every file is read: 0 when the section is absent or usable;
 * -EINVAL (logged) when one of its lines was refused, when it has
 * settings but no Database=, or when an ssh:// Remote= lacks
 * RemoteSSHKeyCredential= or known hosts (ssh_known_hosts_credential, [Git]
 * SSHKnownHostsCredential=). A host must then not start at all: working
 * alone, it would take tasks that another host of its fleet works on, and
 * one that cannot publish fails every task it works on. */
int fleet_config_verify(const FleetConfig *f, const char *ssh_known_hosts_credential);

/* How many tasks this host claims at once: Slots=, or max_active_tasks. */
unsigned fleet_config_slots(const FleetConfig *f, unsigned max_active_tasks);

/* This host's name: Name=, or the hostname (up to its first "."), as a
 * fleet name (FLEET_NAME_MAX characters of [A-Za-z0-9_.-]). */
int fleet_config_host_name(const FleetConfig *f, char **ret);

/* Database= with the secrets of PasswordCredential= and SSLKeyCredential=
 * added, as libpq's KEYWORD='VALUE' pairs (any of libpq's forms parses
 * into them). The result holds a password: free it with credential_free(),
 * never log it. */
int fleet_config_conninfo(const FleetConfig *f, char **ret);

/* One value quoted for a KEYWORD='VALUE' connection string. */
int fleet_conninfo_append(Buf *b, const char *keyword, const char *value);

bool fleet_name_is_valid(const char *s);
bool fleet_remote_is_valid(const char *url);
