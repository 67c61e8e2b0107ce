/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <syslog.h>

#include "macro.h"

/* Diagnostics go to stderr. Under systemd stderr is connected to the journal
 * (JOURNAL_STREAM is set), and then each line carries a "<N>" priority prefix
 * that journald understands. Audit events are not log lines: see audit.h. */

void log_set_max_level(int level);
int log_get_max_level(void);

/* Logs and returns -abs(error), so that callers can "return log_error_errno(r, ...)". */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) \
        log_internal((level), (error), __FILE__, __LINE__, __VA_ARGS__)

#define log_debug(...)   (void) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)    (void) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)  (void) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) (void) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)   (void) log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...)   log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_info_errno(e, ...)    log_full_errno(LOG_INFO, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...)   log_full_errno(LOG_ERR, (e), __VA_ARGS__)

#define log_oom() log_error_errno(-ENOMEM, "Out of memory.")
