/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger-internal.h"
#include "ledger-stage.h"

/* What a checkpoint leaves out besides what .gitignore ignores: the
 * workshop's sweepings (ledger.h, LedgerLeaveOut). Asked only of paths that
 * would change the tree: a clean file costs nothing here. */

static int strv_sorted_copy(char **from, char ***ret) {
        _cleanup_strv_free_ char **copy = NULL;
        size_t n = 0;

        for (char **p = from; p && *p; p++)
                if (strv_extend(&copy, *p) < 0)
                        return -ENOMEM;
                else
                        n++;
        if (n > 1)
                qsort(copy, n, sizeof(char *), stage_path_cmp);
        *ret = TAKE_PTR(copy);
        return 0;
}

void ledger_leave_out_done(LedgerLeaveOut *o) {
        strv_free(o->patterns);
        strv_free(o->written);
        strv_free(o->kept);
        free(o->windows);
        *o = (LedgerLeaveOut) {};
}

int ledger_set_leave_out(Ledger *l, const LedgerLeaveOut *o) {
        LedgerLeaveOut c = { .binaries = o->binaries };
        int r;

        r = strv_sorted_copy(o->patterns, &c.patterns);
        if (r >= 0)
                r = strv_sorted_copy(o->written, &c.written);
        if (r >= 0)
                r = strv_sorted_copy(o->kept, &c.kept);
        if (r >= 0 && o->n_windows > 0) {
                c.windows = malloc(o->n_windows * 2 * sizeof(uint64_t));
                if (c.windows) {
                        memcpy(c.windows, o->windows, o->n_windows * 2 * sizeof(uint64_t));
                        c.n_windows = o->n_windows;
                } else
                        r = -ENOMEM;
        }
        if (r < 0) {
                ledger_leave_out_done(&c);
                return r;
        }
        ledger_leave_out_done(&l->leave_out);
        l->leave_out = c;
        return 0;
}

static bool sorted_has(char **list, const char *s) {
        size_t n = strv_length(list);
        return n > 0 && bsearch(&s, list, n, sizeof(char *), stage_path_cmp);
}

/* Whether name is build output by a pattern of the set: directory patterns
 * ("name/") when dir, the others when not. */
static bool name_matches(char **patterns, const char *name, bool dir) {
        for (char **p = patterns; p && *p; p++) {
                size_t n = strlen(*p);
                bool is_dir = n > 0 && (*p)[n - 1] == '/';

                if (is_dir != dir)
                        continue;
                if (is_dir) {
                        char pat[256];
                        if (n >= sizeof(pat))
                                continue;
                        memcpy(pat, *p, n - 1);
                        pat[n - 1] = 0;
                        if (fnmatch(pat, name, FNM_PERIOD) == 0)
                                return true;
                } else if (fnmatch(*p, name, FNM_PERIOD) == 0)
                        return true;
        }
        return false;
}

bool stage_build_output_dir(Stage *s, const char *path) {
        const char *base = strrchr(path, '/');
        LedgerLeaveOut *o = &s->ledger->leave_out;

        if (!o->patterns)
                return false;
        /* A file kept on purpose inside is looked for. */
        size_t n = strlen(path);
        for (char **k = o->kept; k && *k; k++)
                if (strneq(*k, path, n) && (*k)[n] == '/')
                        return false;
        return name_matches(o->patterns, base ? base + 1 : path, true);
}

/* Executables and libraries of the common formats, object archives, and
 * compiled Python, Java and WebAssembly: what a build makes, never what a
 * person writes. Text files never start like this. */
static bool magic_is_binary(const uint8_t *b, size_t n) {
        static const struct {
                const char *magic;
                size_t len;
        } magics[] = {
                { "\x7f" "ELF", 4 },
                { "\xfe\xed\xfa\xce", 4 }, { "\xce\xfa\xed\xfe", 4 },   /* Mach-O 32 */
                { "\xfe\xed\xfa\xcf", 4 }, { "\xcf\xfa\xed\xfe", 4 },   /* Mach-O 64 */
                { "\xca\xfe\xba\xbe", 4 },                              /* Mach-O fat, Java class */
                { "!<arch>\n", 8 },                                     /* ar: .a, .deb */
                { "\0asm", 4 },                                         /* WebAssembly */
        };

        for (size_t i = 0; i < ELEMENTSOF(magics); i++)
                if (n >= magics[i].len && memcmp(b, magics[i].magic, magics[i].len) == 0)
                        return true;
        /* Python 3 bytecode: a 2-byte version magic (0x0bxx-0x0exx,
         * little-endian), then "\r\n". */
        if (n >= 16 && b[1] >= 0x0b && b[1] <= 0x0e && b[2] == '\r' && b[3] == '\n')
                return true;
        return false;
}

/* PE (Windows executables and DLLs): "MZ", and at the offset its header
 * gives, "PE\0\0". */
static bool file_is_pe(int fd, const uint8_t *b, size_t n) {
        uint32_t off;
        char pe[4];

        if (n < 64 || b[0] != 'M' || b[1] != 'Z')
                return false;
        off = (uint32_t) b[60] | (uint32_t) b[61] << 8 | (uint32_t) b[62] << 16 | (uint32_t) b[63] << 24;
        return off < 65536 && pread(fd, pe, sizeof(pe), off) == (ssize_t) sizeof(pe) && memcmp(pe, "PE\0\0", 4) == 0;
}

bool ledger_file_is_binary(int dir_fd, const char *name, uint64_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        uint8_t b[64];
        struct stat st;
        ssize_t n;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return false;
        n = pread(fd, b, sizeof(b), 0);
        *ret_size = (uint64_t) st.st_size;
        return n > 0 && (magic_is_binary(b, (size_t) n) || file_is_pe(fd, b, (size_t) n));
}

static bool in_window(const LedgerLeaveOut *o, const struct statx_timestamp *ts) {
        uint64_t usec = (uint64_t) ts->tv_sec * 1000000ULL + ts->tv_nsec / 1000U;

        for (size_t i = 0; i < o->n_windows; i++)
                if (usec >= o->windows[2 * i] && usec <= o->windows[2 * i + 1])
                        return true;
        return false;
}

/* Whether a directory above path is build output nobody tracks. */
static int under_build_output(Stage *s, const char *path) {
        const LedgerLeaveOut *o = &s->ledger->leave_out;
        char prefix[LEDGER_PATH_MAX + 1];

        if (!o->patterns)
                return 0;
        for (const char *c = strchr(path, '/'); c; c = strchr(c + 1, '/')) {
                size_t n = (size_t) (c - path);
                const char *name;

                if (n >= sizeof(prefix))
                        return 0;
                memcpy(prefix, path, n);
                prefix[n] = 0;
                name = strrchr(prefix, '/');
                if (!name_matches(o->patterns, name ? name + 1 : prefix, true))
                        continue;
                int r = ledger_index_has_dir(s->index, prefix);
                if (r < 0)
                        return r;
                if (r == 0)
                        return 1;
        }
        return 0;
}

int stage_leave_out(Stage *s, int dir_fd, const char *name, const char *path, const git_index_entry *old,
                    const struct statx *x) {
        const LedgerLeaveOut *o = &s->ledger->leave_out;
        char why[96];
        int r;

        if (sorted_has(o->kept, path))
                return 0;

        /* What the test command wrote, and the agent did not. */
        if (o->n_windows > 0 && in_window(o, &x->stx_ctime) && !sorted_has(o->written, path))
                goto leave;

        if (old)
                return 0;       /* the rest is about files nobody tracks */

        r = under_build_output(s, path);
        if (r < 0)
                return r;
        if (r > 0 || (o->patterns && name_matches(o->patterns, name, false))) {
                snprintf(why, sizeof(why), "build output");
                goto report;
        }
        uint64_t size = 0;
        if (o->binaries && S_ISREG(x->stx_mode) && ledger_file_is_binary(dir_fd, name, &size)) {
                snprintf(why, sizeof(why), "binary, %" PRIu64 " bytes", size);
                goto report;
        }
        return 0;

leave:
        snprintf(why, sizeof(why), "made by the tests");
report:
        /* A tracked file the tests changed keeps what the tree has. */
        r = stage_left_out_why(s, path, NULL, why);
        return r < 0 ? r : 1;
}
