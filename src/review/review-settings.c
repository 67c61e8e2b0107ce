/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review-settings.h"
#include "string-util.h"

void review_repo_settings_done(ReviewRepoSettings *s) {
        if (!s)
                return;
        strv_free(s->secret_scan_ignore);
        strv_free(s->checkers);
        strv_free(s->leave_out);
        strv_free(s->syntax_checks);
        free(s->coverage_report);
        strv_free(s->warnings);
        *s = (ReviewRepoSettings) {};
}

bool review_glob_is_valid(const char *glob) {
        size_t n;

        if (isempty(glob) || glob[0] == '/')
                return false;
        n = strlen(glob);
        if (n > REVIEW_GLOB_MAX || !string_is_safe(glob, false))
                return false;
        /* ".." as a component: a glob never names something outside the workspace. */
        for (const char *c = glob; (c = strstr(c, "..")); c += 2)
                if ((c == glob || c[-1] == '/') && (c[2] == '\0' || c[2] == '/'))
                        return false;
        return true;
}

static int warn(ReviewRepoSettings *s, unsigned line, const char *format, ...) _printf_(3, 4);
static int warn(ReviewRepoSettings *s, unsigned line, const char *format, ...) {
        _cleanup_free_ char *m = NULL, *w = NULL;
        va_list ap;
        int r;

        /* Bounded like everything else a repository can make us keep. */
        if (strv_length(s->warnings) >= 32)
                return 0;
        va_start(ap, format);
        r = vasprintf(&m, format, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (asprintf(&w, "line %u: %s", line, m) < 0)
                return -ENOMEM;
        return strv_extend(&s->warnings, w);
}

/* The fence of a code block: 3 or more '`' or '~' after up to 3 spaces. */
static size_t fence_length(const char *s, const char *e, char *ret_char) {
        size_t n = 0;

        for (size_t i = 0; i < 3 && s < e && *s == ' '; i++)
                s++;
        if (s >= e || (*s != '`' && *s != '~'))
                return 0;
        *ret_char = *s;
        while (s + n < e && s[n] == *ret_char)
                n++;
        return n >= 3 ? n : 0;
}

static int settings_line(ReviewRepoSettings *s, unsigned line, const char *b, const char *e) {
        _cleanup_free_ char *value = NULL;
        const char *colon, *key_end, *v;
        int r;

        while (b < e && isspace((unsigned char) *b))
                b++;
        while (e > b && isspace((unsigned char) e[-1]))
                e--;
        if (b == e || *b == '#')
                return 0;
        /* Before anything of the line is kept or quoted in a warning (which
         * goes to the journal): a NUL would cut a value short unseen, other
         * control characters would forge lines there. */
        for (const char *c = b; c < e; c++)
                if ((unsigned char) *c < ' ' || *c == 127)
                        return warn(s, line, "control characters in the line, ignoring.");
        colon = memchr(b, ':', (size_t) (e - b));
        if (!colon)
                return warn(s, line, "not a 'key: value' line, ignoring.");
        key_end = colon;
        while (key_end > b && isspace((unsigned char) key_end[-1]))
                key_end--;
        v = colon + 1;
        while (v < e && isspace((unsigned char) *v))
                v++;
        value = strndup(v, (size_t) (e - v));
        if (!value)
                return -ENOMEM;

#define KEY_IS(k) ((size_t) (key_end - b) == strlen(k) && strneq(b, k, strlen(k)))
        if (KEY_IS("secret-scan-ignore")) {
                for (char *next = value, *w; (w = strsep(&next, " \t"));) {
                        if (w[0] == '\0')
                                continue;
                        if (!review_glob_is_valid(w)) {
                                r = warn(s, line, "invalid glob '%.64s', ignoring.", w);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        if (strv_length(s->secret_scan_ignore) >= REVIEW_IGNORE_GLOBS_MAX)
                                return warn(s, line, "more than %u globs, ignoring the rest.", REVIEW_IGNORE_GLOBS_MAX);
                        r = strv_extend(&s->secret_scan_ignore, w);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        if (KEY_IS("leave-out")) {
                for (char *next = value, *w; (w = strsep(&next, " \t"));) {
                        if (w[0] == '\0')
                                continue;
                        if (!leave_out_pattern_is_valid(w)) {
                                r = warn(s, line, "invalid name of build output '%.64s', ignoring.", w);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        if (strv_length(s->leave_out) >= REVIEW_LEAVE_OUT_MAX)
                                return warn(s, line, "more than %u names, ignoring the rest.", REVIEW_LEAVE_OUT_MAX);
                        r = strv_extend(&s->leave_out, w);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        if (KEY_IS("checker")) {
                if (isempty(value) || strlen(value) > REVIEW_CHECKER_COMMAND_MAX)
                        return warn(s, line, "a checker command must be 1 to %u bytes, ignoring.", REVIEW_CHECKER_COMMAND_MAX);
                if (strv_length(s->checkers) >= REVIEW_CHECKERS_MAX)
                        return warn(s, line, "more than %u checkers, ignoring.", REVIEW_CHECKERS_MAX);
                return strv_extend(&s->checkers, value);
        }
        if (KEY_IS("syntax-check")) {
                size_t g = strcspn(value, " \t");
                const char *command = value + g + strspn(value + g, " \t");

                if (value[g] == '\0' || isempty(command))
                        return warn(s, line, "a syntax check is a glob, then a command, ignoring.");
                value[g] = '\0';
                if (!review_glob_is_valid(value))
                        return warn(s, line, "invalid glob '%.64s', ignoring.", value);
                if (strlen(command) > REVIEW_CHECKER_COMMAND_MAX)
                        return warn(s, line, "a syntax check's command must be at most %u bytes, ignoring.",
                                    REVIEW_CHECKER_COMMAND_MAX);
                if (strv_length(s->syntax_checks) >= 2 * REVIEW_SYNTAX_CHECKS_MAX)
                        return warn(s, line, "more than %u syntax checks, ignoring.", REVIEW_SYNTAX_CHECKS_MAX);
                r = strv_extend(&s->syntax_checks, value);
                if (r < 0)
                        return r;
                return strv_extend(&s->syntax_checks, command);
        }
        if (KEY_IS("coverage-report")) {
                if (!review_glob_is_valid(value) || strpbrk(value, "*?[ \t"))
                        return warn(s, line, "invalid report path, ignoring.");
                return free_and_strdup(&s->coverage_report, value);
        }
#undef KEY_IS
        return warn(s, line, "unknown key '%.*s', ignoring.", (int) MIN((size_t) (key_end - b), (size_t) 64), b);
}

int review_repo_settings_parse(const char *text, size_t size, ReviewRepoSettings *ret) {
        const char *end;
        size_t fence = 0;
        char fence_char = 0;
        bool ours = false;
        unsigned line = 0;
        int r;

        assert(text || size == 0);
        assert(ret);

        if (size > REVIEW_SETTINGS_SIZE_MAX)
                return -EFBIG;
        end = text + size;
        for (const char *s = text; s < end;) {
                const char *nl = memchr(s, '\n', (size_t) (end - s)), *e = nl ?: end;
                char c = 0;
                size_t n;

                line++;
                if (e > s && e[-1] == '\r')
                        e--;
                n = fence_length(s, e, &c);
                if (fence == 0 && n > 0) {
                        /* An opening fence: ours when its info string is exactly "agentfab". */
                        const char *info = memchr(s, c, (size_t) (e - s)) + n, *ie = e;
                        while (info < ie && isspace((unsigned char) *info))
                                info++;
                        while (ie > info && isspace((unsigned char) ie[-1]))
                                ie--;
                        fence = n;
                        fence_char = c;
                        ours = ie - info == 8 && strneq(info, "agentfab", 8);
                } else if (fence > 0 && n >= fence && c == fence_char) {
                        const char *rest = memchr(s, c, (size_t) (e - s)) + n;
                        while (rest < e && isspace((unsigned char) *rest))
                                rest++;
                        if (rest == e) {
                                fence = 0;
                                ours = false;
                        }
                } else if (ours) {
                        r = settings_line(ret, line, s, e);
                        if (r < 0)
                                return r;
                }
                s = nl ? nl + 1 : end;
        }
        return 0;
}

bool leave_out_pattern_is_valid(const char *p) {
        size_t n = p ? strlen(p) : 0;

        if (n == 0 || n > REVIEW_GLOB_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) p[i] < 0x20 || p[i] == 0x7f || (p[i] == '/' && i != n - 1))
                        return false;
        /* A name, maybe a directory's: never the top, its parent, or nothing. */
        return !streq(p, "/") && !streq(p, "./") && !streq(p, "../") && !streq(p, ".") && !streq(p, "..");
}
