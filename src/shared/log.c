/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static int max_level = LOG_INFO;
static int use_prefix = -1;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char buf[2048];
        va_list ap;

        (void) file;
        (void) line;

        if (error < 0)
                error = -error;

        if (level > max_level)
                return -error;

        if (use_prefix < 0)
                use_prefix = !!getenv("JOURNAL_STREAM");

        /* %m in the format refers to the error we were given, not to whatever
         * errno happens to be. */
        errno = error;
        va_start(ap, fmt);
        (void) vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (use_prefix)
                fprintf(stderr, "<%i>%s\n", level, buf);
        else
                fprintf(stderr, "%s\n", buf);

        return -error;
}
