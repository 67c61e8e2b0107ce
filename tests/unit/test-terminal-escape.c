/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agentfabctl's output filter (src/ctl/terminal-escape.c): control and
 * bidirectional characters escaped, everything else as it came, also when
 * a sequence is cut between two writes. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "terminal-escape.h"

static const char input[] = "a\x1b" "b\xc2\x9b" "c\xe2\x80\xae" "d\xe2\x81\xa6" "e\xe2\x80\x94" "f\xc2\xa0" "g\xe2\x82\xac"
                            "h\xc2\n\xe2\x80\n\t{\"k\":\"\\u001b\"}\r\x7f\xc2\xc2\x85\xe2\xe2\x80\xab\xe2\x80\xa9";
static const char expected[] = "a\\x1b" "b\\u009b" "c\\u202e" "d\\u2066" "e\xe2\x80\x94" "f\xc2\xa0" "g\xe2\x82\xac"
                               "h\xc2\n\xe2\x80\n\t{\"k\":\"\\u001b\"}\\x0d\\x7f\xc2\\u0085\xe2\\u202b\xe2\x80\xa9";

static char *through_filter(int unbuffered, size_t piece) {
        static char buf[4096];
        int fd = memfd_create("escape", MFD_CLOEXEC);
        FILE *f = NULL;

        if (fd < 0 || !(f = fdopen(dup(fd), "w")) || terminal_escape_stream(&f, fd, unbuffered) < 0)
                return NULL;
        for (size_t i = 0; i < sizeof(input) - 1; i += piece) {
                size_t k = sizeof(input) - 1 - i < piece ? sizeof(input) - 1 - i : piece;
                if (fwrite(input + i, 1, k, f) != k || fflush(f) != 0)
                        return NULL;
        }
        if (fclose(f) != 0)
                return NULL;
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return buf;
}

int main(void) {
        char *s;

        s = through_filter(0, sizeof(input));
        CHECK(s && streq(s, expected), "one write: controls, C1 and bidi escaped, the rest as it came");
        s = through_filter(1, 1);
        CHECK(s && streq(s, expected), "a byte a write: sequences cut between writes are the same");
        CHECK(terminal_escape_stream(&(FILE *) { stdout }, 1, 0) < 0, "no third stream");
        return tap_done();
}
