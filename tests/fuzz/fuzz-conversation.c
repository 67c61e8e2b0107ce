/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A task's conversation file as a restarted daemon reads it back
 * (conversation_parse(), conversation.c): the first N lines the state file
 * acknowledges, JSON objects, a torn last line left alone.
 *
 * Input: two bytes N (the acknowledged count, at most 1023), then the
 * file's text.
 *
 * Invariants: on success exactly N messages, all objects, and the part read
 * ends after the Nth newline (what follows is cut off by the caller); the
 * messages written out again as lines read back to the same lines. */
#include <json-c/json.h>

#include "fuzz.h"
#include "conversation.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        unsigned want = ((unsigned) data[0] << 8 | data[1]) & 1023;
        const char *text = (const char *) data + 2;
        size_t n = size - 2, good = SIZE_MAX;

        json_object *m = json_object_new_array();
        if (!m)
                abort();
        int r = conversation_parse(text, n, want, m, &good);
        if (r < 0) {
                FUZZ_CHECK(r == -EBADMSG, "error %d", r);
                json_object_put(m);
                return 0;
        }
        FUZZ_CHECK(json_object_array_length(m) == want, "%zu messages for %u", json_object_array_length(m), want);
        FUZZ_CHECK(good <= n && (good == 0 ? want == 0 : text[good - 1] == '\n'), "read up to a line end");
        unsigned lines = 0;
        for (size_t i = 0; i < good; i++)
                lines += text[i] == '\n';
        FUZZ_CHECK(lines == want, "%u lines read for %u messages", lines, want);

        /* Written out as the daemon appends them, and read again. */
        size_t cap = 1, len = 0;
        for (size_t i = 0; i < want; i++) {
                json_object *o = json_object_array_get_idx(m, i);
                FUZZ_CHECK(json_object_is_type(o, json_type_object), "message %zu is an object", i);
                cap += strlen(json_to_line(o)) + 1;
        }
        char *out = malloc(cap);
        if (!out)
                abort();
        out[0] = '\0';
        for (size_t i = 0; i < want; i++) {
                const char *l = json_to_line(json_object_array_get_idx(m, i));
                FUZZ_CHECK(!strchr(l, '\n'), "one line");
                memcpy(out + len, l, strlen(l));
                len += strlen(l);
                out[len++] = '\n';
        }
        json_object *again = json_object_new_array();
        size_t good2 = 0;
        FUZZ_CHECK(conversation_parse(out, len, want, again, &good2) == 0 && good2 == len, "written lines read back");
        for (size_t i = 0; i < want; i++)
                FUZZ_CHECK(streq(json_to_line(json_object_array_get_idx(m, i)), json_to_line(json_object_array_get_idx(again, i))),
                           "message %zu the same after a round trip", i);
        json_object_put(again);
        json_object_put(m);
        free(out);
        return 0;
}
