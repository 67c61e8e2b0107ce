/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The egress proxy's decisions: which destinations a task may reach. Pure
 * functions over names and addresses (no I/O), so that every trick can be
 * tested without a network. */

typedef union InAddrUnion {
        struct in_addr in;
        struct in6_addr in6;
} InAddrUnion;

typedef struct ProxyAddress {
        int family;                     /* AF_INET or AF_INET6 */
        InAddrUnion addr;
} ProxyAddress;

typedef enum ProxyMode {
        PROXY_MODE_ALLOWLIST,           /* only the listed names and addresses */
        PROXY_MODE_AUDITED,             /* every public destination, and the listed addresses */
        _PROXY_MODE_MAX,
        _PROXY_MODE_INVALID = -EINVAL,
} ProxyMode;

const char *proxy_mode_to_string(ProxyMode m);
ProxyMode proxy_mode_from_string(const char *s);

typedef enum AddressClass {
        ADDRESS_PUBLIC,
        ADDRESS_UNSPECIFIED,
        ADDRESS_LOOPBACK,
        ADDRESS_LINK_LOCAL,             /* 169.254/16 (cloud metadata services), fe80::/10 */
        ADDRESS_PRIVATE,                /* 10/8, 172.16/12, 192.168/16, fec0::/10 */
        ADDRESS_SHARED,                 /* 100.64/10, carrier-grade NAT */
        ADDRESS_UNIQUE_LOCAL,           /* fc00::/7 */
        ADDRESS_MULTICAST,
        ADDRESS_BROADCAST,
        ADDRESS_RESERVED,               /* documentation, benchmarking, 240/4, IPv6 outside 2000::/3, ... */
        ADDRESS_HOST,                   /* one of this host's own addresses */
        _ADDRESS_CLASS_MAX,
        _ADDRESS_CLASS_INVALID = -EINVAL,
} AddressClass;

/* "loopback address", "link-local address", ...: for a refusal's reason. */
const char *address_class_to_string(AddressClass c);

/* Classifies by the address that a connection to it reaches: an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d), a NAT64 one (64:ff9b::/96)
 * and a 6to4 one (2002::/16) are judged by the IPv4 address inside.
 * ADDRESS_HOST is never returned here (see proxy_address_classify_host). */
AddressClass address_classify(const ProxyAddress *a);

/* The same, and ADDRESS_HOST if a (or the IPv4 address inside it) is one
 * of own[0..n_own). */
AddressClass address_classify_host(const ProxyAddress *a, const ProxyAddress *own, size_t n_own);

bool proxy_address_equal(const ProxyAddress *a, const ProxyAddress *b);

/* Text of an address, IPv6 without brackets; buf of INET6_ADDRSTRLEN. */
const char *proxy_address_to_string(const ProxyAddress *a, char *buf, size_t size);

/* A destination as a request names it. When the host is an address
 * literal, in any form a resolver would accept (2130706433, 0177.0.0.1,
 * 0x7f.1, 127.1, [::ffff:127.0.0.1]), is_address is set and address holds
 * the one address it means: that address is what is judged and what is
 * connected to, never the text again. Otherwise name is a host name of
 * letters, digits, '-' and '_' labels, to be resolved by us. */
typedef struct ProxyHost {
        bool is_address;
        ProxyAddress address;
        char name[256];
} ProxyHost;

/* host as http_request_parse() returns it (lower case, no brackets), and
 * whether it was bracketed. -EINVAL for what is neither a name nor an
 * address (a zone index, a numeric last label that is no IPv4 form). */
int proxy_host_parse(const char *host, bool bracketed, ProxyHost *ret);

/* One allowed destination, from the environment's or the task's Allow=. */
typedef struct AllowEntry {
        bool is_address;
        char *pattern;                  /* names: "example.org" or a glob "*.example.org", lower case */
        ProxyAddress address;           /* addresses: a network and its prefix length */
        unsigned prefixlen;
        uint16_t port;                  /* 0: every port */
} AllowEntry;

/* Parses "name", "name:port", "*.name[:port]", "*", "a.b.c.d[/len][:port]",
 * "IPv6[/len]", "[IPv6[/len]]:port". Addresses in canonical notation only
 * (inet_pton): an administrator's entry is never guessed at. */
int allow_entry_parse(const char *s, AllowEntry *ret);
void allow_entry_done(AllowEntry *e);

typedef struct ProxyPolicy {
        ProxyMode mode;
        AllowEntry *entries;
        size_t n_entries;
} ProxyPolicy;

void proxy_policy_done(ProxyPolicy *p);
/* Parses and appends entries; nothing is appended if one is invalid
 * (*ret_bad names it). */
int proxy_policy_add(ProxyPolicy *p, char **entries, const char **ret_bad);

/* Whether a name entry allows host name at port. */
bool proxy_policy_allows_name(const ProxyPolicy *p, const char *name, uint16_t port);
/* Whether an address entry allows exactly this address at port. */
bool proxy_policy_allows_address(const ProxyPolicy *p, const ProxyAddress *a, uint16_t port);

typedef enum ProxyRefusal {
        PROXY_ALLOWED = 0,
        PROXY_REFUSED_NOT_ALLOWED,      /* allowlist mode: no entry for it */
        PROXY_REFUSED_ADDRESS,          /* a non-public address no entry names */
        _PROXY_REFUSAL_MAX,
} ProxyRefusal;

/* The verdict on connecting to address a at port, for a request that named
 * it by a name (name_allowed: whether a name entry, or audited mode,
 * allows that name) or by an address literal (name_allowed false). An
 * address entry covering a allows it whatever its class; otherwise a must
 * be public and not the host's own, and in allowlist mode its name must be
 * allowed. *ret_class says what a is. */
ProxyRefusal proxy_policy_check_address(const ProxyPolicy *p, const ProxyAddress *a, uint16_t port, bool name_allowed,
                                        const ProxyAddress *own, size_t n_own, AddressClass *ret_class);
