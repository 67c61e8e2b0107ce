/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The exec service's reply lines, as the daemon reads them from inside a
 * sandbox (exec_collector_feed(), the parser behind both exec clients):
 * "started", "output", "exit", "error" objects, one a line, untrusted.
 *
 * Input: a first byte choosing how many bytes of output are kept, then the
 * lines.
 *
 * Invariants: feeding stops at "exit" (1) or an error; every output byte
 * counted reaches the handler and the log exactly once; the kept output is
 * exactly the head and the tail of what was received, with a marker saying
 * how much was cut, and never more than the bytes kept plus that marker. */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "exec-client.h"

typedef struct Seen {
        char *s;
        size_t n, a;
} Seen;

static void on_output(const char *stream, const char *data, size_t n, void *userdata) {
        Seen *seen = userdata;

        FUZZ_CHECK(streq(stream, "stdout") || streq(stream, "stderr"), "stream '%s'", stream);
        if (seen->n + n + 1 > seen->a) {
                seen->a = (seen->n + n + 1) * 2;
                seen->s = realloc(seen->s, seen->a);
                if (!seen->s)
                        abort();
        }
        memcpy(seen->s + seen->n, data, n);
        seen->n += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const size_t keeps[] = { 0, 1, 2, 3, 64, 4096, 16 * 1024 };
        static int log_fd = -EBADF;
        ExecCollector c;
        ExecResult res = {};
        Seen seen = {};
        int r = 0;

        if (size < 1 || size > 1024 * 1024)
                return -1;
        if (log_fd < 0 && (log_fd = memfd_create("log", MFD_CLOEXEC)) < 0)
                abort();
        FUZZ_CHECK(ftruncate(log_fd, 0) == 0 && lseek(log_fd, 0, SEEK_SET) == 0, "log reset");

        size_t keep = keeps[data[0] % ELEMENTSOF(keeps)];
        FUZZ_CHECK(exec_collector_begin(&c, 7, log_fd, keep, NULL, on_output, &seen) == 0, "begin");

        char *text = fuzz_text(data + 1, size - 1);
        for (char *line = text, *end = text + size - 1; line < end && r == 0;) {
                char *nl = memchr(line, '\n', (size_t) (end - line));
                size_t n = nl ? (size_t) (nl - line) : (size_t) (end - line);
                char *copy = fuzz_text((const uint8_t *) line, n);
                r = exec_collector_feed(&c, copy, n);
                free(copy);
                FUZZ_CHECK(r == 0 || r == 1 || r == -EINVAL || r == -EBADMSG, "feed returned %d", r);
                line += n + 1;
        }

        uint64_t total = c.result.output_bytes;
        FUZZ_CHECK(exec_collector_end(&c, &res) == 0, "end");
        FUZZ_CHECK(total == seen.n && res.output_bytes == seen.n, "%llu bytes counted, %zu passed on",
                   (unsigned long long) total, seen.n);
        FUZZ_CHECK(lseek(log_fd, 0, SEEK_CUR) == (off_t) seen.n, "all of it logged");

        /* head + marker + tail, exactly */
        size_t head = keep / 2, tail = keep - head;
        if (seen.n <= keep)
                FUZZ_CHECK(memcmp(res.output, seen.s ?: "", seen.n) == 0 && res.output[seen.n] == '\0', "all output kept");
        else {
                char marker[96];
                snprintf(marker, sizeof(marker), "\n[... %zu bytes of output cut ...]\n", seen.n - head - tail);
                size_t ml = strlen(marker);
                FUZZ_CHECK(memcmp(res.output, seen.s, head) == 0, "head kept");
                FUZZ_CHECK(memcmp(res.output + head, marker, ml) == 0, "marker says what was cut");
                FUZZ_CHECK(memcmp(res.output + head + ml, seen.s + seen.n - tail, tail) == 0 && res.output[head + ml + tail] == '\0',
                           "tail kept");
        }
        exec_result_done(&res);
        exec_collector_done(&c);
        free(seen.s);
        free(text);
        return 0;
}
