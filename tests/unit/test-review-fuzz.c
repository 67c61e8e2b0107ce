/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdio.h>

#include "review-fuzz.h"
#include "tap.h"

/* Not a fuzzer: a smoke run of every fuzz entry point over a few seeds and
 * deterministic mutations of them (flips, cuts, duplications), so that CI's
 * sanitizer build exercises the same entries a fuzzer will, in a second. The
 * entries abort() on a broken invariant, which fails this test. */

static const char *const seeds[] = {
        "{\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"t\",\"rules\":[{\"id\":\"r\",\"defaultConfiguration\":{\"level\":\"error\"}}]}},"
        "\"results\":[{\"ruleId\":\"r\",\"message\":{\"text\":\"m\\n\"},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":"
        "{\"uri\":\"file:///workspace/a.c\"},\"region\":{\"startLine\":2}}}]}]}]}",
        "a.c:1:2: error: x [r]\nsrc/b.sh:3: warning: y [SC1]\n./a.c:10:1: note: z\n",
        "TOKEN = 'ghp_aB3dE5fG7hJ9kLmN1pQrS2tUvW4xYz0cK8aB'\npassword: Zx8qL2vR9tY4wP7mK3nB6cD1\nhttps://u:p4ssw0rd1@h/\n-----BEGIN RSA PRIVATE KEY-----\n",
        "\x00{\"dependencies\":{\"a\":\"^1.2.3\"},\"devDependencies\":{\"b\":\"file:x\"}}",
        "\x01{\"packages\":{\"node_modules/a/node_modules/@s/b\":{\"version\":\"1.0.0\"}},\"dependencies\":{}}",
        "\x02" "Django==3.2 ; python_version>'3'\nx[y] >=1,<2 --hash=sha256:0\n-r a.txt\n",
        "\x03[project]\ndependencies = [\"a>=1\", 'b==2']\n[tool.poetry.dependencies]\nc = {version = \"^1\"}\n",
        "\x04require (\n\ta v1.2.3 // indirect\n)\nrequire b v0.0.0-2020-abc\n",
        "\x05[dependencies]\na = \"1\"\nb = { version = \"2\", path = \"x\" }\n[dev-dependencies.c]\nversion = '3'\n",
        "\x06[[package]]\nname = \"a\"\nversion = \"1.0.0\"\n",
        "a = \"\"\"x\\\n  y\"\"\"\n[t.'q'.\"r\"]\nc = [1, [2], {d = 'e'}] # x\n[[u]]\nd = 1979-05-27 07:32:00Z\n",
        "{\"id\":\"X\",\"affected\":[{\"package\":{\"ecosystem\":\"PyPI\",\"name\":\"PyYAML\"},\"ranges\":[{\"type\":\"ECOSYSTEM\","
        "\"events\":[{\"introduced\":\"0\"},{\"fixed\":\"5.4\"}]}],\"versions\":[\"5.3.1\"]}],\"severity\":[{\"type\":\"CVSS_V3\","
        "\"score\":\"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H\"}]}",
        "1.0.0-alpha.1+b\nv1.0.0-rc.1",
        "1!2.0rc1.post2.dev3+l.1\n2.0a1",
        "CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H",
        "TN:\nSF:a\nDA:1,1\nDA:2,0\nLF:2\nLH:1\nend_of_record\n",
        "<?xml version='1.0'?><!DOCTYPE c [<!ENTITY x 'y'>]><coverage line-rate='0.5'><packages><package><classes><class>"
        "<lines><line number='1' hits='2'/></lines></class></classes></package></packages></coverage>",
        "# x\n```agentfab\nsecret-scan-ignore: a/** ../b\nchecker: x {files}\ncoverage-report: c.info\n```\n",
        "[{\"kind\":\"secret\",\"severity\":\"error\",\"file\":\"a\\u0001b\",\"line\":3,\"rule\":\"r\",\"message\":\"m\"}]",
        "file:///workspace/./a/%2E%2E/b",
};

static uint64_t state = 0x9E3779B97F4A7C15ULL;

static uint64_t next(void) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
}

int main(void) {
        static uint8_t buf[8192];
        unsigned runs = 0;

        for (const ReviewFuzzTarget *t = review_fuzz_targets; t->name; t++) {
                for (size_t s = 0; s < ELEMENTSOF(seeds); s++) {
                        size_t n = strlen(seeds[s] + 1) + 1;   /* seeds may start with a NUL-free kind byte */

                        if (n > sizeof(buf))
                                continue;
                        memcpy(buf, seeds[s], n);
                        t->run(buf, n);
                        runs++;
                        for (unsigned i = 0; i < 150; i++) {
                                size_t m = n;
                                uint8_t mut[8192];

                                memcpy(mut, buf, n);
                                for (unsigned k = 0, edits = 1 + next() % 4; k < edits; k++) {
                                        uint64_t x = next();
                                        size_t at = m ? x % m : 0;
                                        switch ((x >> 32) % 4) {
                                        case 0: if (m) mut[at] ^= (uint8_t) (1u << ((x >> 40) % 8)); break;
                                        case 1: if (m) mut[at] = (uint8_t) (x >> 48); break;
                                        case 2: m = at; break;
                                        case 3: if (2 * m <= sizeof(mut)) { memcpy(mut + m, mut, m); m *= 2; } break;
                                        }
                                }
                                t->run(mut, m);
                                runs++;
                        }
                }
                CHECK(true, "%s: survived", t->name);
        }
        CHECK(runs > 0, "%u runs", runs);
        return tap_done();
}
