/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <netdb.h>

#include "proxy-env.h"
#include "proxy-policy.h"
#include "string-util.h"
#include "tap.h"

static ProxyAddress addr(const char *s) {
        ProxyAddress a = {};
        if (inet_pton(AF_INET, s, &a.addr.in) == 1)
                a.family = AF_INET;
        else if (inet_pton(AF_INET6, s, &a.addr.in6) == 1)
                a.family = AF_INET6;
        return a;
}

static bool class_is(const char *s, AddressClass c) {
        ProxyAddress a = addr(s);
        return a.family != 0 && address_classify(&a) == c;
}

/* Every range that must never be reached by accident: what the cloud
 * metadata service, the host's own services and the LAN live on. */
static void test_classify(void) {
        static const struct {
                const char *a;
                AddressClass c;
        } t[] = {
                { "8.8.8.8", ADDRESS_PUBLIC },                   { "151.101.0.223", ADDRESS_PUBLIC },
                { "127.0.0.1", ADDRESS_LOOPBACK },               { "127.255.0.9", ADDRESS_LOOPBACK },
                { "169.254.169.254", ADDRESS_LINK_LOCAL },       { "10.1.2.3", ADDRESS_PRIVATE },
                { "172.16.0.1", ADDRESS_PRIVATE },               { "172.31.255.255", ADDRESS_PRIVATE },
                { "172.32.0.1", ADDRESS_PUBLIC },                { "192.168.1.1", ADDRESS_PRIVATE },
                { "100.64.0.1", ADDRESS_SHARED },                { "100.127.255.255", ADDRESS_SHARED },
                { "100.128.0.1", ADDRESS_PUBLIC },               { "0.0.0.0", ADDRESS_UNSPECIFIED },
                { "0.1.2.3", ADDRESS_UNSPECIFIED },              { "255.255.255.255", ADDRESS_BROADCAST },
                { "224.0.0.1", ADDRESS_MULTICAST },              { "239.1.1.1", ADDRESS_MULTICAST },
                { "240.0.0.1", ADDRESS_RESERVED },               { "192.0.2.1", ADDRESS_RESERVED },
                { "198.18.0.1", ADDRESS_RESERVED },
                { "::", ADDRESS_UNSPECIFIED },                   { "::1", ADDRESS_LOOPBACK },
                { "fc00::1", ADDRESS_UNIQUE_LOCAL },             { "fd12:3456::1", ADDRESS_UNIQUE_LOCAL },
                { "fe80::1", ADDRESS_LINK_LOCAL },               { "fec0::1", ADDRESS_PRIVATE },
                { "ff02::1", ADDRESS_MULTICAST },                { "2606:4700::1111", ADDRESS_PUBLIC },
                { "::ffff:127.0.0.1", ADDRESS_LOOPBACK },        { "::ffff:169.254.169.254", ADDRESS_LINK_LOCAL },
                { "::ffff:10.0.0.1", ADDRESS_PRIVATE },          { "::ffff:8.8.8.8", ADDRESS_PUBLIC },
                { "64:ff9b::7f00:1", ADDRESS_LOOPBACK },         { "2002:7f00:1::1", ADDRESS_LOOPBACK },
                { "2002:a9fe:a9fe::", ADDRESS_LINK_LOCAL },      { "::7f00:1", ADDRESS_RESERVED },
                { "2001:db8::1", ADDRESS_RESERVED },             { "2001::1", ADDRESS_RESERVED },
                { "100::1", ADDRESS_RESERVED },                  { "4000::1", ADDRESS_RESERVED },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                CHECK(class_is(t[i].a, t[i].c), "%s is a %s", t[i].a, address_class_to_string(t[i].c));

        ProxyAddress own[] = { addr("203.0.113.5"), addr("2606:4700::5") };
        ProxyAddress a = addr("::ffff:203.0.113.5"), b = addr("2606:4700::5"), c = addr("2606:4700::6");
        own[0] = addr("151.101.0.5");
        a = addr("::ffff:151.101.0.5");
        CHECK_INT_EQ(address_classify_host(&a, own, 2), ADDRESS_HOST, "the host's own address, even IPv4-mapped");
        CHECK_INT_EQ(address_classify_host(&b, own, 2), ADDRESS_HOST, "the host's own IPv6 address");
        CHECK_INT_EQ(address_classify_host(&c, own, 2), ADDRESS_PUBLIC, "a neighbour of it is public");
}

static bool host_is(const char *s, bool bracketed, const char *want) {
        ProxyHost h;
        char buf[INET6_ADDRSTRLEN];
        if (proxy_host_parse(s, bracketed, &h) < 0 || !h.is_address)
                return false;
        return streq(proxy_address_to_string(&h.address, buf, sizeof(buf)), want);
}

/* Every way of writing 127.0.0.1 that a resolver understands is read as
 * 127.0.0.1, so that it is judged (and connected to) as that. */
static void test_host_forms(void) {
        ProxyHost h;

        CHECK(host_is("2130706433", false, "127.0.0.1"), "decimal 2130706433");
        CHECK(host_is("0177.0.0.1", false, "127.0.0.1"), "octal 0177.0.0.1");
        CHECK(host_is("017700000001", false, "127.0.0.1"), "octal 017700000001");
        CHECK(host_is("0x7f.0.0.1", false, "127.0.0.1"), "hex 0x7f.0.0.1");
        CHECK(host_is("0x7f000001", false, "127.0.0.1"), "hex 0x7f000001");
        CHECK(host_is("127.1", false, "127.0.0.1"), "short 127.1");
        CHECK(host_is("169.254.43518", false, "169.254.169.254"), "short 169.254.43518");
        CHECK(host_is("::ffff:127.0.0.1", true, "::ffff:127.0.0.1") &&
              proxy_host_parse("::ffff:127.0.0.1", true, &h) == 0 && address_classify(&h.address) == ADDRESS_LOOPBACK,
              "[::ffff:127.0.0.1] is loopback");
        CHECK(proxy_host_parse("1.2.3.4.5", false, &h) < 0, "five parts: neither address nor name");
        CHECK(proxy_host_parse("0x1g", false, &h) < 0, "bad hex");
        CHECK(proxy_host_parse("example.123", false, &h) < 0, "numeric top-level label");
        CHECK(proxy_host_parse("fe80::1%eth0", true, &h) < 0, "zone index");
        CHECK(proxy_host_parse("-", false, &h) == 0 && !h.is_address, "a name");
        CHECK(proxy_host_parse("files.pythonhosted.org", false, &h) == 0 && !h.is_address &&
              streq(h.name, "files.pythonhosted.org"), "a name stays a name");
        CHECK_ERRNO(proxy_host_parse("a_b.example", false, &h), 0, "underscore in a label");
        CHECK(proxy_host_parse("a*b", false, &h) < 0, "glob characters");
}

static bool entry_ok(const char *s) {
        AllowEntry e;
        if (allow_entry_parse(s, &e) < 0)
                return false;
        allow_entry_done(&e);
        return true;
}

/* The administrator's entries: only canonical addresses, valid ports. */
static void test_entries(void) {
        const char *good[] = { "example.org", "Example.ORG.", "*.example.org:443", "*", "*:443", "127.0.0.1:8080",
                               "10.0.0.0/8", "10.0.0.0/8:443", "::1", "fc00::/7", "[::1]:8080", "[fd00::/8]:443" };
        const char *bad[] = { "", ":80", "example.org:0", "example.org:99999", "example.org:http", "1.2.3.4/33",
                              "[::1]", "[::1]x", "0177.0.0.1", "2130706433", "127.1", "exa mple.org", "*.*.org",
                              "ex*ample.org", "1.2.3.4/", "1.2.3.4/a", "::1/129", "[1.2.3.4]:80" };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                CHECK(entry_ok(good[i]), "'%s' is a valid entry", good[i]);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                CHECK(!entry_ok(bad[i]), "'%s' is refused", bad[i]);
}

static ProxyRefusal check(const ProxyPolicy *p, const char *a, uint16_t port, bool name_allowed) {
        ProxyAddress x = addr(a);
        return proxy_policy_check_address(p, &x, port, name_allowed, NULL, 0, NULL);
}

/* The verdicts the issue asks for, in both modes. */
static void test_policy(void) {
        ProxyPolicy p = { .mode = PROXY_MODE_ALLOWLIST };
        const char *bad = NULL;

        CHECK_ERRNO(proxy_policy_add(&p, STRV_MAKE("127.0.0.2:8080", "pypi.org", "*.example.org:443", "fd00::/8"), &bad), 0,
                    "entries added");
        CHECK(proxy_policy_add(&p, STRV_MAKE("ok.org", "bad:0"), &bad) < 0 && streq_ptr(bad, "bad:0") && p.n_entries == 4,
              "a bad entry adds none of its list and is named");

        CHECK(proxy_policy_allows_name(&p, "pypi.org", 443), "listed name");
        CHECK(!proxy_policy_allows_name(&p, "files.pypi.org", 443), "a name below a listed one is not listed");
        CHECK(proxy_policy_allows_name(&p, "a.b.example.org", 443), "glob below example.org");
        CHECK(!proxy_policy_allows_name(&p, "a.example.org", 80), "glob with its port only");
        CHECK(!proxy_policy_allows_name(&p, "example.org", 443), "the glob's own domain is not below it");

        CHECK_INT_EQ(check(&p, "127.0.0.2", 8080, false), PROXY_ALLOWED, "the allowed loopback address and port");
        CHECK_INT_EQ(check(&p, "::ffff:127.0.0.2", 8080, false), PROXY_ALLOWED, "the same, IPv4-mapped");
        CHECK_INT_EQ(check(&p, "127.0.0.2", 8081, false), PROXY_REFUSED_ADDRESS, "another port of it");
        CHECK_INT_EQ(check(&p, "127.0.0.1", 8080, true), PROXY_REFUSED_ADDRESS, "another loopback address, even by an allowed name");
        CHECK_INT_EQ(check(&p, "169.254.169.254", 80, true), PROXY_REFUSED_ADDRESS, "the metadata service");
        CHECK_INT_EQ(check(&p, "fd00::5", 443, false), PROXY_ALLOWED, "an allowed unique-local network");
        CHECK_INT_EQ(check(&p, "151.101.0.223", 443, true), PROXY_ALLOWED, "a public address of an allowed name");
        CHECK_INT_EQ(check(&p, "151.101.0.223", 443, false), PROXY_REFUSED_NOT_ALLOWED, "a public address literal, not listed");

        ProxyAddress own = addr("151.101.0.223"), x = addr("151.101.0.223");
        CHECK_INT_EQ(proxy_policy_check_address(&p, &x, 443, true, &own, 1, NULL), PROXY_REFUSED_ADDRESS,
                     "the host's own public address, even by an allowed name");
        proxy_policy_done(&p);

        ProxyPolicy a = { .mode = PROXY_MODE_AUDITED };
        CHECK_INT_EQ(check(&a, "151.101.0.223", 443, false), PROXY_ALLOWED, "audited: any public address");
        CHECK_INT_EQ(check(&a, "127.0.0.1", 22, true), PROXY_REFUSED_ADDRESS, "audited: loopback refused");
        CHECK_INT_EQ(check(&a, "::ffff:127.0.0.1", 22, true), PROXY_REFUSED_ADDRESS, "audited: mapped loopback refused");
        CHECK_INT_EQ(check(&a, "10.0.0.1", 80, true), PROXY_REFUSED_ADDRESS, "audited: private refused");
        CHECK_INT_EQ(check(&a, "169.254.169.254", 80, true), PROXY_REFUSED_ADDRESS, "audited: metadata service refused");
        CHECK(proxy_policy_add(&a, STRV_MAKE("10.0.0.0/8"), NULL) == 0 && check(&a, "10.9.8.7", 80, false) == PROXY_ALLOWED,
              "audited: an administrator's network");
        proxy_policy_done(&a);
}

/* A name that resolves to loopback is refused on what it resolves to:
 * "localhost" through the system's own resolver. */
static void test_resolved_name(void) {
        ProxyPolicy p = { .mode = PROXY_MODE_AUDITED };
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
        bool all_refused = true;
        unsigned n = 0;

        if (getaddrinfo("localhost", NULL, &hints, &res) != 0) {
                SKIP("localhost does not resolve here");
                return;
        }
        for (struct addrinfo *i = res; i; i = i->ai_next) {
                ProxyAddress a = { .family = i->ai_family };
                if (i->ai_family == AF_INET)
                        a.addr.in = ((struct sockaddr_in *) i->ai_addr)->sin_addr;
                else if (i->ai_family == AF_INET6)
                        a.addr.in6 = ((struct sockaddr_in6 *) i->ai_addr)->sin6_addr;
                else
                        continue;
                n++;
                all_refused = all_refused && proxy_policy_check_address(&p, &a, 80, true, NULL, 0, NULL) == PROXY_REFUSED_ADDRESS;
        }
        freeaddrinfo(res);
        CHECK(n > 0 && all_refused, "every address of 'localhost' refused (%u)", n);
}

static void test_environment(void) {
        _cleanup_strv_free_ char **e = proxy_environment(3128);
        _cleanup_free_ char *j = e ? strv_join(e, " ") : NULL;
        CHECK_STR_EQ(j, "HTTP_PROXY=http://127.0.0.1:3128 HTTPS_PROXY=http://127.0.0.1:3128 "
                                   "http_proxy=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128 "
                                   "NO_PROXY=localhost,127.0.0.1 no_proxy=localhost,127.0.0.1",
                     "the commands' proxy variables: %s", strempty(j));
}

int main(void) {
        test_classify();
        test_host_forms();
        test_entries();
        test_policy();
        test_resolved_name();
        test_environment();
        return tap_done();
}
