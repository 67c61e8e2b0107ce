/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "proxy-policy.h"
#include "string-table.h"

static const char *const proxy_mode_table[_PROXY_MODE_MAX] = {
        [PROXY_MODE_ALLOWLIST] = "allowlist",
        [PROXY_MODE_AUDITED]   = "audited",
};

DEFINE_STRING_TABLE_LOOKUP(proxy_mode, ProxyMode);

static const char *const address_class_table[_ADDRESS_CLASS_MAX] = {
        [ADDRESS_PUBLIC]       = "public address",
        [ADDRESS_UNSPECIFIED]  = "unspecified address",
        [ADDRESS_LOOPBACK]     = "loopback address",
        [ADDRESS_LINK_LOCAL]   = "link-local address",
        [ADDRESS_PRIVATE]      = "private address",
        [ADDRESS_SHARED]       = "shared (carrier-grade NAT) address",
        [ADDRESS_UNIQUE_LOCAL] = "unique-local address",
        [ADDRESS_MULTICAST]    = "multicast address",
        [ADDRESS_BROADCAST]    = "broadcast address",
        [ADDRESS_RESERVED]     = "reserved address",
        [ADDRESS_HOST]         = "address of the proxy's own host",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(address_class, AddressClass);

/* Whether the first len bits of a and b agree. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned len) {
        unsigned bytes = len / 8, bits = len % 8;

        if (memcmp(a, b, bytes) != 0)
                return false;
        if (bits == 0)
                return true;
        uint8_t mask = (uint8_t) (0xff << (8 - bits));
        return (a[bytes] & mask) == (b[bytes] & mask);
}

static AddressClass classify4(uint32_t a /* host order */) {
        static const struct {
                uint32_t net;
                unsigned len;
                AddressClass class;
        } table[] = {
                { 0x00000000, 8,  ADDRESS_UNSPECIFIED },  /* 0/8: "this network" */
                { 0x0a000000, 8,  ADDRESS_PRIVATE },
                { 0x64400000, 10, ADDRESS_SHARED },
                { 0x7f000000, 8,  ADDRESS_LOOPBACK },
                { 0xa9fe0000, 16, ADDRESS_LINK_LOCAL },
                { 0xac100000, 12, ADDRESS_PRIVATE },
                { 0xc0000000, 24, ADDRESS_RESERVED },     /* IETF protocol assignments */
                { 0xc0000200, 24, ADDRESS_RESERVED },     /* documentation */
                { 0xc0586300, 24, ADDRESS_RESERVED },     /* 6to4 relay anycast */
                { 0xc0a80000, 16, ADDRESS_PRIVATE },
                { 0xc6120000, 15, ADDRESS_RESERVED },     /* benchmarking */
                { 0xc6336400, 24, ADDRESS_RESERVED },     /* documentation */
                { 0xcb007100, 24, ADDRESS_RESERVED },     /* documentation */
                { 0xe0000000, 4,  ADDRESS_MULTICAST },
                { 0xffffffff, 32, ADDRESS_BROADCAST },
                { 0xf0000000, 4,  ADDRESS_RESERVED },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                uint32_t mask = table[i].len == 0 ? 0 : 0xffffffffu << (32 - table[i].len);
                if ((a & mask) == table[i].net)
                        return table[i].class;
        }
        return ADDRESS_PUBLIC;
}

/* The IPv4 address a connection to this IPv6 address reaches, if any. */
static bool embedded_ipv4(const struct in6_addr *a, struct in_addr *ret) {
        static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };

        if (memcmp(a->s6_addr, mapped, 12) == 0 || memcmp(a->s6_addr, nat64, 12) == 0) {
                memcpy(&ret->s_addr, a->s6_addr + 12, 4);
                return true;
        }
        if (a->s6_addr[0] == 0x20 && a->s6_addr[1] == 0x02) { /* 6to4 */
                memcpy(&ret->s_addr, a->s6_addr + 2, 4);
                return true;
        }
        return false;
}

static AddressClass classify6(const struct in6_addr *a) {
        static const struct {
                uint8_t net[16];
                unsigned len;
                AddressClass class;
        } table[] = {
                { { 0x01, 0x00 }, 64, ADDRESS_RESERVED },             /* discard */
                { { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, ADDRESS_RESERVED }, /* local-use NAT64 */
                { { 0x20, 0x01, 0x00, 0x00 }, 32, ADDRESS_RESERVED }, /* Teredo: tunnels to an obfuscated IPv4 */
                { { 0x20, 0x01, 0x00, 0x02, 0x00, 0x00 }, 48, ADDRESS_RESERVED }, /* benchmarking */
                { { 0x20, 0x01, 0x0d, 0xb8 }, 32, ADDRESS_RESERVED }, /* documentation */
                { { 0x3f, 0xff }, 20, ADDRESS_RESERVED },             /* documentation */
                { { 0xfc }, 7, ADDRESS_UNIQUE_LOCAL },
                { { 0xfe, 0x80 }, 10, ADDRESS_LINK_LOCAL },
                { { 0xfe, 0xc0 }, 10, ADDRESS_PRIVATE },              /* site-local, deprecated */
                { { 0xff }, 8, ADDRESS_MULTICAST },
        };
        struct in_addr v4;

        if (IN6_IS_ADDR_UNSPECIFIED(a))
                return ADDRESS_UNSPECIFIED;
        if (IN6_IS_ADDR_LOOPBACK(a))
                return ADDRESS_LOOPBACK;
        if (embedded_ipv4(a, &v4))
                return classify4(ntohl(v4.s_addr));
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (prefix_equal(a->s6_addr, table[i].net, table[i].len))
                        return table[i].class;
        /* Only global unicast (2000::/3) is public; the rest (the IPv4-
         * compatible ::/96 included) is unassigned or reserved. */
        if ((a->s6_addr[0] & 0xe0) != 0x20)
                return ADDRESS_RESERVED;
        return ADDRESS_PUBLIC;
}

AddressClass address_classify(const ProxyAddress *a) {
        if (a->family == AF_INET)
                return classify4(ntohl(a->addr.in.s_addr));
        if (a->family == AF_INET6)
                return classify6(&a->addr.in6);
        return _ADDRESS_CLASS_INVALID;
}

/* The address itself, or the IPv4 address inside an IPv6 one. */
static ProxyAddress address_reached(const ProxyAddress *a) {
        ProxyAddress r = *a;
        struct in_addr v4;

        if (a->family == AF_INET6 && embedded_ipv4(&a->addr.in6, &v4))
                r = (ProxyAddress) { .family = AF_INET, .addr.in = v4 };
        return r;
}

bool proxy_address_equal(const ProxyAddress *a, const ProxyAddress *b) {
        if (a->family != b->family)
                return false;
        if (a->family == AF_INET)
                return a->addr.in.s_addr == b->addr.in.s_addr;
        return memcmp(&a->addr.in6, &b->addr.in6, sizeof(struct in6_addr)) == 0;
}

AddressClass address_classify_host(const ProxyAddress *a, const ProxyAddress *own, size_t n_own) {
        AddressClass c = address_classify(a);
        if (c != ADDRESS_PUBLIC)
                return c;

        ProxyAddress reached = address_reached(a);
        for (size_t i = 0; i < n_own; i++) {
                ProxyAddress o = address_reached(&own[i]);
                if (proxy_address_equal(&reached, &o))
                        return ADDRESS_HOST;
        }
        return ADDRESS_PUBLIC;
}

const char *proxy_address_to_string(const ProxyAddress *a, char *buf, size_t size) {
        if (!inet_ntop(a->family, &a->addr, buf, (socklen_t) size))
                snprintf(buf, size, "?");
        return buf;
}

/* Whether s has the shape of an IPv4 literal in some form: digits, dots
 * and hex prefixes only. Such a host is never resolved as a name. */
static bool looks_numeric(const char *s) {
        const char *last = strrchr(s, '.');
        last = last ? last + 1 : s;
        if (*last == '\0')
                return false;
        /* A name's last label (its top-level domain) is never all digits
         * nor 0x...: such a host is an address or nothing. */
        if (strncmp(last, "0x", 2) == 0)
                return true;
        return strspn(last, "0123456789") == strlen(last);
}

int proxy_host_parse(const char *host, bool bracketed, ProxyHost *ret) {
        ProxyHost h = {};

        if (isempty(host) || strlen(host) >= sizeof(h.name))
                return -EINVAL;

        if (bracketed || strchr(host, ':')) {
                /* No zone index (the parser lets no '%' through anyway):
                 * a link-local scope is nothing a task may name. */
                if (inet_pton(AF_INET6, host, &h.address.addr.in6) != 1)
                        return -EINVAL;
                h.is_address = true;
                h.address.family = AF_INET6;
                *ret = h;
                return 0;
        }

        if (looks_numeric(host)) {
                /* SECURITY: read with inet_aton()'s leniency (decimal,
                 * octal, hex, one to four parts), exactly as a resolver
                 * would, only to know which address is meant; from here on
                 * that address is judged and connected to. */
                if (inet_aton(host, &h.address.addr.in) == 0)
                        return -EINVAL;
                h.is_address = true;
                h.address.family = AF_INET;
                *ret = h;
                return 0;
        }

        /* A name: labels of letters, digits, '-' and '_', 1..63 each. */
        size_t label = 0;
        for (const char *c = host; *c; c++) {
                if (*c == '.') {
                        if (label == 0)
                                return -EINVAL;
                        label = 0;
                        continue;
                }
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
                        return -EINVAL;
                if (++label > 63)
                        return -EINVAL;
        }
        if (label == 0)
                return -EINVAL;
        strcpy(h.name, host);
        *ret = h;
        return 0;
}

void allow_entry_done(AllowEntry *e) {
        e->pattern = mfree_ptr(e->pattern);
}

static int parse_prefixed_address(const char *s, AllowEntry *e) {
        char buf[INET6_ADDRSTRLEN + 8];
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t) (slash - s) : strlen(s);
        unsigned max;

        if (n >= INET6_ADDRSTRLEN)
                return -EINVAL;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (inet_pton(AF_INET, buf, &e->address.addr.in) == 1) {
                e->address.family = AF_INET;
                max = 32;
        } else if (inet_pton(AF_INET6, buf, &e->address.addr.in6) == 1) {
                e->address.family = AF_INET6;
                max = 128;
        } else
                return -EINVAL;

        e->prefixlen = max;
        if (slash) {
                char *end;
                errno = 0;
                unsigned long l = strtoul(slash + 1, &end, 10);
                if (errno != 0 || *end != '\0' || end == slash + 1 || slash[1] < '0' || slash[1] > '9' || l > max)
                        return -EINVAL;
                e->prefixlen = (unsigned) l;
        }
        e->is_address = true;
        return 0;
}

static int parse_entry_port(const char *s, uint16_t *ret) {
        char *end;
        errno = 0;
        if (*s < '0' || *s > '9')
                return -EINVAL;
        unsigned long p = strtoul(s, &end, 10);
        if (errno != 0 || *end != '\0' || p == 0 || p > 65535)
                return -EINVAL;
        *ret = (uint16_t) p;
        return 0;
}

int allow_entry_parse(const char *s, AllowEntry *ret) {
        AllowEntry e = {};
        char buf[300];
        int r;

        if (isempty(s) || strlen(s) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, s);

        if (buf[0] == '[') {
                char *close = strchr(buf, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                *close = '\0';
                r = parse_entry_port(close + 2, &e.port);
                if (r < 0)
                        return r;
                r = parse_prefixed_address(buf + 1, &e);
                if (r < 0 || e.address.family != AF_INET6)
                        return -EINVAL;
                *ret = e;
                return 0;
        }

        /* Two or more colons: a bare IPv6 address (no port). */
        char *colon = strchr(buf, ':');
        if (colon && strchr(colon + 1, ':')) {
                r = parse_prefixed_address(buf, &e);
                if (r < 0 || e.address.family != AF_INET6)
                        return -EINVAL;
                *ret = e;
                return 0;
        }
        if (colon) {
                *colon = '\0';
                r = parse_entry_port(colon + 1, &e.port);
                if (r < 0)
                        return r;
        }
        if (parse_prefixed_address(buf, &e) == 0) {
                if (e.address.family != AF_INET)
                        return -EINVAL;
                *ret = e;
                return 0;
        }
        if (strchr(buf, '/'))
                return -EINVAL;

        /* A name or a glob: "*" alone, or "*." before a name. */
        const char *name = buf;
        if (streq(buf, "*"))
                name = NULL;
        else if (strneq(buf, "*.", 2))
                name = buf + 2;
        if (name) {
                ProxyHost h;
                for (char *c = buf; *c; c++)
                        if (*c >= 'A' && *c <= 'Z')
                                *c = (char) (*c - 'A' + 'a');
                size_t l = strlen(buf);
                if (l > 1 && buf[l - 1] == '.')
                        buf[l - 1] = '\0';
                if (proxy_host_parse(name, false, &h) < 0 || h.is_address)
                        return -EINVAL;
        }
        e.pattern = strdup(buf);
        if (!e.pattern)
                return -ENOMEM;
        *ret = e;
        return 0;
}

void proxy_policy_done(ProxyPolicy *p) {
        for (size_t i = 0; i < p->n_entries; i++)
                allow_entry_done(&p->entries[i]);
        p->entries = mfree_ptr(p->entries);
        p->n_entries = 0;
}

int proxy_policy_add(ProxyPolicy *p, char **entries, const char **ret_bad) {
        size_t n = 0;

        for (char **s = entries; s && *s; s++)
                n++;
        if (n == 0)
                return 0;
        if (p->n_entries + n > 4096)
                return -E2BIG;

        AllowEntry *a = reallocarray(p->entries, p->n_entries + n, sizeof(AllowEntry));
        if (!a)
                return -ENOMEM;
        p->entries = a;

        for (size_t i = 0; i < n; i++) {
                int r = allow_entry_parse(entries[i], &a[p->n_entries + i]);
                if (r < 0) {
                        for (size_t j = 0; j < i; j++)
                                allow_entry_done(&a[p->n_entries + j]);
                        if (ret_bad)
                                *ret_bad = entries[i];
                        return r;
                }
        }
        p->n_entries += n;
        return 0;
}

bool proxy_policy_allows_name(const ProxyPolicy *p, const char *name, uint16_t port) {
        for (size_t i = 0; i < p->n_entries; i++) {
                const AllowEntry *e = &p->entries[i];
                if (e->is_address || (e->port != 0 && e->port != port))
                        continue;
                /* "*.example.org" matches names below example.org (any depth),
                 * not example.org itself; "*" matches every name. */
                if (streq(e->pattern, name) || fnmatch(e->pattern, name, 0) == 0)
                        return true;
        }
        return false;
}

bool proxy_policy_allows_address(const ProxyPolicy *p, const ProxyAddress *a, uint16_t port) {
        /* An entry for 127.0.0.1 also covers ::ffff:127.0.0.1: it is the
         * same destination. */
        ProxyAddress reached = address_reached(a);

        for (size_t i = 0; i < p->n_entries; i++) {
                const AllowEntry *e = &p->entries[i];
                if (!e->is_address || (e->port != 0 && e->port != port))
                        continue;
                if (e->address.family != reached.family)
                        continue;
                if (prefix_equal((const uint8_t *) &reached.addr, (const uint8_t *) &e->address.addr, e->prefixlen))
                        return true;
        }
        return false;
}

ProxyRefusal proxy_policy_check_address(const ProxyPolicy *p, const ProxyAddress *a, uint16_t port, bool name_allowed,
                                        const ProxyAddress *own, size_t n_own, AddressClass *ret_class) {
        AddressClass c = address_classify_host(a, own, n_own);

        if (ret_class)
                *ret_class = c;
        if (proxy_policy_allows_address(p, a, port))
                return PROXY_ALLOWED;
        if (c != ADDRESS_PUBLIC)
                return PROXY_REFUSED_ADDRESS;
        if (p->mode == PROXY_MODE_AUDITED || name_allowed)
                return PROXY_ALLOWED;
        return PROXY_REFUSED_NOT_ALLOWED;
}
