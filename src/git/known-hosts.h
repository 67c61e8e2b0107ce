/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Checking an ssh server's host key against known_hosts text, as ssh(1)
 * writes it: "[@revoked ]PATTERNS KEYTYPE BASE64KEY [COMMENT]", one entry a
 * line, '#' comments and blank lines ignored. PATTERNS is a comma-separated
 * list of host names, "[host]:port" for a port other than 22, '*' and '?'
 * wildcards and '!' negations. Hashed entries ("|1|...") and
 * @cert-authority lines are not supported: they never match, so a host
 * listed only that way is unknown. Pure: no I/O, no allocation. */

#include <errno.h>
#include <stddef.h>

typedef enum KnownHostsResult {
        KNOWN_HOSTS_MATCH,       /* an entry for this host and port has this key */
        KNOWN_HOSTS_UNKNOWN,     /* no entry names the host and port */
        KNOWN_HOSTS_MISMATCH,    /* entries name it, none with this key: it changed */
        KNOWN_HOSTS_REVOKED,     /* an @revoked entry for it has this key */
        _KNOWN_HOSTS_RESULT_MAX,
        _KNOWN_HOSTS_RESULT_INVALID = -EINVAL,
} KnownHostsResult;

/* key is the raw host key blob the server presented (SSH wire format, what
 * the base64 field of a known_hosts line encodes); port 22 is the default. */
KnownHostsResult known_hosts_check(const char *text, const char *host, unsigned port, const void *key, size_t key_len);
