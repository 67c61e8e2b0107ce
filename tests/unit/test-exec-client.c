/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "exec-client.h"
#include "tap.h"

int main(void) {
        HeadTail h;
        char *s;

        /* Small output is kept whole. */
        head_tail_init(&h, 16);
        head_tail_add(&h, "hello\n", 6);
        s = head_tail_render(&h);
        CHECK_STR_EQ(s, "hello\n", "short output kept whole: '%s'", s);
        free(s);
        head_tail_done(&h);

        /* Exactly the bound: still whole, no marker. */
        head_tail_init(&h, 10);
        head_tail_add(&h, "0123456789", 10);
        s = head_tail_render(&h);
        CHECK_STR_EQ(s, "0123456789", "output of exactly the bound kept whole: '%s'", s);
        free(s);
        head_tail_done(&h);

        /* Long output: the head (where the command started) and the tail
         * (where the errors are) survive, with a note of what was cut. */
        head_tail_init(&h, 10);
        for (int i = 0; i < 100; i++)
                head_tail_add(&h, "abcdefghij", 10);
        head_tail_add(&h, "THE ERROR", 9);
        s = head_tail_render(&h);
        CHECK(s && strneq(s, "abcde", 5), "head kept: '%s'", strempty(s));
        CHECK(s && strstr(s, "999 bytes of output cut"), "marker says how much was cut: '%s'", strempty(s));
        CHECK(s && strlen(s) > 5 && streq(s + strlen(s) - 5, "ERROR"), "tail kept: '%s'", s);
        CHECK_INT_EQ(h.total, 1009, "total counted");
        free(s);
        head_tail_done(&h);

        /* Bounded memory whatever arrives, in pieces of any size. */
        head_tail_init(&h, 8);
        char big[100000];
        memset(big, 'x', sizeof(big));
        big[sizeof(big) - 1] = 'Z';
        head_tail_add(&h, big, sizeof(big));
        head_tail_add(&h, "", 0);
        s = head_tail_render(&h);
        CHECK(s && strlen(s) < 8 + 64 && s[strlen(s) - 1] == 'Z', "huge output bounded, last byte kept");
        free(s);
        head_tail_done(&h);

        /* Output for the model, a journal or a terminal: control
         * characters and bytes that are not UTF-8 become visible text, so
         * a command cannot retitle a window or hide lines; newlines, tabs
         * and valid UTF-8 pass. */
        s = exec_output_escape("a" "\x1b[31m" "b" "\x07" "\x00" "c\r\n\td" "\xc3\xa9" "\xff" "\x7f", 18);
        CHECK_STR_EQ(s, "a\\x1b[31mb\\x07\\x00c\\x0d\n\td\xc3\xa9\\xff\\x7f", "escaped: '%s'", s);
        free(s);
        s = exec_output_escape("\xe2\x82", 2);
        CHECK_STR_EQ(s, "\\xe2\\x82", "a cut UTF-8 sequence is escaped: '%s'", s);
        free(s);
        memset(big, 0, sizeof(big));
        s = exec_output_escape(big, sizeof(big));
        CHECK(s && strlen(s) == 4 * sizeof(big), "at most four bytes for one");
        free(s);

        return tap_done();
}
