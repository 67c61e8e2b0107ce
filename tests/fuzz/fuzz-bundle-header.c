/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The start of a git bundle as ledger_import_bundle() checks it before
 * libgit2's indexer sees anything: the header up to the blank line, then the
 * pack's 12-byte header with its object count. The input is a bundle file.
 *
 * Invariants: an accepted header has a branch tip and at most
 * BUNDLE_PREREQS_MAX prerequisites, and written out again it parses to the
 * same; an accepted pack header claims no more objects than the limit can
 * hold (PACK_OBJECT_MIN bytes each) nor more than 2^26. */
#include "fuzz.h"
#include "ledger-internal.h"

#define HEADER_MAX (64U * 1024U)

static void header_check(char *text) {
        BundleHeader *h = calloc(1, sizeof(BundleHeader)), *again = calloc(1, sizeof(BundleHeader));
        char *error = NULL;

        if (!h || !again)
                abort();
        int r = ledger_bundle_header_parse(text, h, &error);
        if (r < 0) {
                FUZZ_CHECK(error, "a refusal says why");
                goto out;
        }
        FUZZ_CHECK(h->have_tip && h->n_prereqs <= BUNDLE_PREREQS_MAX, "tip %d, %zu prerequisites", h->have_tip, h->n_prereqs);

        /* Round trip: what we would write for it. */
        size_t cap = 32 + (h->n_prereqs + 1) * (GIT_OID_HEXSZ + 32), len;
        char *out = malloc(cap), hex[GIT_OID_HEXSZ + 1];
        if (!out)
                abort();
        len = (size_t) sprintf(out, "# v2 git bundle\n");
        for (size_t i = 0; i < h->n_prereqs; i++)
                len += (size_t) sprintf(out + len, "-%s comment\n", git_oid_tostr(hex, sizeof(hex), &h->prereqs[i]));
        sprintf(out + len, "%s refs/heads/agentfab/x\n", git_oid_tostr(hex, sizeof(hex), &h->tip));
        r = ledger_bundle_header_parse(out, again, &error);
        FUZZ_CHECK(r == 0, "the header written out again parses");
        FUZZ_CHECK(again->n_prereqs == h->n_prereqs && git_oid_equal(&again->tip, &h->tip) &&
                   memcmp(again->prereqs, h->prereqs, h->n_prereqs * sizeof(git_oid)) == 0, "the same header");
        free(out);
out:
        free(error);
        free(h);
        free(again);
}

static void pack_check(const uint8_t p[12]) {
        static const uint64_t limits[] = { UINT64_MAX, 1024, 9, 0x7fffffffULL * 9 };
        uint32_t objects = (uint32_t) p[8] << 24 | (uint32_t) p[9] << 16 | (uint32_t) p[10] << 8 | p[11];

        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                char *error = NULL;
                int r = ledger_pack_header_check(p, limits[i], &error);
                if (r < 0)
                        FUZZ_CHECK(error, "a refusal says why");
                else {
                        FUZZ_CHECK(memcmp(p, "PACK", 4) == 0, "signature");
                        FUZZ_CHECK(objects <= (UINT32_C(1) << 26), "%u objects accepted", objects);
                        FUZZ_CHECK(limits[i] == UINT64_MAX || (uint64_t) objects * 9 <= limits[i], "%u objects within %llu bytes",
                                   objects, (unsigned long long) limits[i]);
                }
                free(error);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* As ledger_import_bundle() reads it: the header ends at the first
         * blank line within HEADER_MAX bytes, and holds no NUL. */
        size_t n = size < HEADER_MAX ? size : HEADER_MAX;
        const uint8_t *end = memmem(data, n, "\n\n", 2);

        if (!end || memchr(data, '\0', (size_t) (end - data)))
                return 0;
        char *text = fuzz_text(data, (size_t) (end - data) + 1);
        header_check(text);
        free(text);

        const uint8_t *pack = end + 2;
        if ((size_t) (data + size - pack) >= 12)
                pack_check(pack);
        return 0;
}
