/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "path-glob.h"
#include "string-util.h"
#include "syntax-check.h"

/* Each default prints only what is wrong and exits 0 when the checker is
 * missing, so that a sandbox without Node never tells the model "node: not
 * found" after every edit of a .js file. */

/* -I: the workspace (the current directory) is not on sys.path, so a
 * repository's "traceback.py" is not imported; -S: no site hooks.
 * compile() parses in memory: nothing is written beside the file. */
#define PYTHON_SNIPPET                                                                          \
        "command -v python3 >/dev/null 2>&1 || exit 0\n"                                        \
        "exec python3 -I -S -c 'import sys, traceback\n"                                        \
        "try:\n"                                                                                \
        "    compile(open(sys.argv[1], \"rb\").read(), sys.argv[1], \"exec\", dont_inherit=True)\n" \
        "except (SyntaxError, ValueError) as e:\n"                                              \
        "    sys.stdout.write(\"\".join(traceback.format_exception_only(type(e), e)))\n"        \
        "    sys.exit(1)' \"$1\""

#define JSON_SNIPPET                                                                            \
        "command -v python3 >/dev/null 2>&1 || exit 0\n"                                        \
        "exec python3 -I -S -m json.tool \"$1\" >/dev/null"

/* A "#!...bash" script is read by bash, whose syntax sh's -n would refuse. */
#define SH_SNIPPET                                                                              \
        "case $(head -n 1 \"$1\") in\n"                                                         \
        "'#!'*bash*) command -v bash >/dev/null 2>&1 || exit 0; exec bash -n \"$1\" ;;\n"       \
        "'#!'*zsh*|'#!'*ksh*|'#!'*fish*|'#!'*csh*) exit 0 ;;\n"                                 \
        "esac\n"                                                                                \
        "exec sh -n \"$1\""

#define BASH_SNIPPET                                                                            \
        "command -v bash >/dev/null 2>&1 || exit 0\n"                                           \
        "exec bash -n \"$1\""

#define NODE_SNIPPET                                                                            \
        "command -v node >/dev/null 2>&1 || exit 0\n"                                           \
        "exec node --check \"$1\""

#define RUBY_SNIPPET                                                                            \
        "command -v ruby >/dev/null 2>&1 || exit 0\n"                                           \
        "o=$(ruby -c \"$1\" 2>&1) && exit 0\n"                                                  \
        "printf '%s\\n' \"$o\"; exit 1"

/* Errors only (-w), with the include directories a project most often has;
 * a header the sandbox lacks says nothing about the file's syntax, so such
 * a failure is not told. */
#define CC_SNIPPET(cc)                                                                          \
        "command -v " cc " >/dev/null 2>&1 || exit 0\n"                                         \
        "o=$(" cc " -fsyntax-only -w -I\"$(dirname \"$1\")\" -I. -Iinclude -Isrc \"$1\" 2>&1) && exit 0\n" \
        "case $o in *'No such file or directory'*|*'file not found'*) exit 0 ;; esac\n"         \
        "printf '%s\\n' \"$o\"; exit 1"

static const struct {
        const char *suffix;
        const char *label;
        const char *snippet;
} defaults[] = {
        { ".py",   "python3 compile",  PYTHON_SNIPPET },
        { ".json", "python3 -m json.tool", JSON_SNIPPET },
        { ".sh",   "sh -n",            SH_SNIPPET },
        { ".bash", "bash -n",          BASH_SNIPPET },
        { ".js",   "node --check",     NODE_SNIPPET },
        { ".mjs",  "node --check",     NODE_SNIPPET },
        { ".cjs",  "node --check",     NODE_SNIPPET },
        { ".rb",   "ruby -c",          RUBY_SNIPPET },
        { ".c",    "cc -fsyntax-only", CC_SNIPPET("cc") },
        { ".cc",   "c++ -fsyntax-only", CC_SNIPPET("c++") },
        { ".cpp",  "c++ -fsyntax-only", CC_SNIPPET("c++") },
        { ".cxx",  "c++ -fsyntax-only", CC_SNIPPET("c++") },
};

int syntax_check_default(const char *path, const char **ret_label, const char **ret_snippet) {
        const char *name;
        size_t n;

        assert(path);
        assert(ret_label);
        assert(ret_snippet);

        *ret_label = *ret_snippet = NULL;
        name = strrchr(path, '/');
        name = name ? name + 1 : path;
        n = strlen(name);
        for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
                size_t k = strlen(defaults[i].suffix);
                /* ".py" alone is a hidden file's name, not a Python file. */
                if (n > k && streq(name + n - k, defaults[i].suffix)) {
                        *ret_label = defaults[i].label;
                        *ret_snippet = defaults[i].snippet;
                        return 1;
                }
        }
        return 0;
}

char *shell_quote(const char *s) {
        size_t n = 2;
        char *q, *p;

        for (const char *c = s; *c; c++)
                n += *c == '\'' ? 4 : 1;
        q = malloc(n + 1);
        if (!q)
                return NULL;
        p = q;
        *p++ = '\'';
        for (const char *c = s; *c; c++) {
                if (*c == '\'') {
                        memcpy(p, "'\\''", 4);
                        p += 4;
                } else
                        *p++ = *c;
        }
        *p++ = '\'';
        *p = '\0';
        return q;
}

/* "{file}" in a repository's command becomes the quoted path, every time
 * it appears; with none, the path is appended. */
static char *repository_snippet(const char *command, const char *quoted) {
        _cleanup_free_ char *s = NULL;
        size_t size = 0;
        FILE *f;
        bool used = false;

        f = open_memstream(&s, &size);
        if (!f)
                return NULL;
        for (const char *c = command, *hit; *c; c = hit + strlen("{file}")) {
                hit = strstr(c, "{file}");
                if (!hit) {
                        fputs(c, f);
                        break;
                }
                fprintf(f, "%.*s%s", (int) (hit - c), c, quoted);
                used = true;
        }
        if (!used)
                fprintf(f, " %s", quoted);
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(s);
}

int syntax_check_pick(const char *path, char **checks, char **ret_label, char **ret_snippet) {
        _cleanup_free_ char *label = NULL, *snippet = NULL;
        const char *l, *s;

        assert(path);
        assert(ret_label);
        assert(ret_snippet);

        *ret_label = *ret_snippet = NULL;
        for (char **c = checks; c && c[0] && c[1]; c += 2) {
                _cleanup_free_ char *dotted = NULL, *quoted = NULL;

                if (!path_glob_match(c[0], path))
                        continue;
                if (asprintf(&dotted, "./%s", path) < 0)
                        return -ENOMEM;
                quoted = shell_quote(dotted);
                if (!quoted)
                        return -ENOMEM;
                /* The label is the command's first word: enough for the
                 * model to know what spoke, short for its context. */
                label = strndup(c[1], strcspn(c[1], " \t"));
                snippet = repository_snippet(c[1], quoted);
                if (!label || !snippet)
                        return -ENOMEM;
                *ret_label = TAKE_PTR(label);
                *ret_snippet = TAKE_PTR(snippet);
                return 1;
        }
        if (syntax_check_default(path, &l, &s) == 0)
                return 0;
        label = strdup(l);
        snippet = strdup(s);
        if (!label || !snippet)
                return -ENOMEM;
        *ret_label = TAKE_PTR(label);
        *ret_snippet = TAKE_PTR(snippet);
        return 1;
}

int syntax_check_script(char **paths, char **labels, char **snippets, size_t n, char **ret) {
        _cleanup_free_ char *s = NULL;
        size_t size = 0;
        FILE *f;

        assert(ret);

        f = open_memstream(&s, &size);
        if (!f)
                return -ENOMEM;
        fputs("f=0\n", f);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *dotted = NULL, *quoted = NULL, *label = NULL;

                if (asprintf(&dotted, "./%s", paths[i]) < 0) {
                        fclose(f);
                        return -ENOMEM;
                }
                quoted = shell_quote(dotted);
                label = shell_quote(labels[i]);
                if (!quoted || !label) {
                        fclose(f);
                        return -ENOMEM;
                }
                /* The snippet runs in a subshell of its own: its exit ends
                 * only itself. 127 is a command not found. */
                fprintf(f,
                        "set -- %s\n"
                        "if [ -f \"$1\" ]; then\n"
                        "o=$( {\n%s\n} 2>&1 </dev/null ); s=$?\n"
                        "if [ $s -ne 0 ] && [ $s -ne 127 ]; then f=1; printf '%%s (%%s):\\n%%s\\n' \"$1\" %s \"$o\"; fi\n"
                        "fi\n",
                        quoted, snippets[i], label);
        }
        fputs("exit $f\n", f);
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(s);
        return 0;
}

int syntax_check_report(const char *output, int status, bool timed_out, char **ret) {
        _cleanup_free_ char *s = NULL;
        const char *o = strempty(output), *end = o;
        unsigned lines = 0;
        size_t size = 0;
        FILE *f;

        assert(ret);

        *ret = NULL;
        if (!timed_out && status == 0)
                return 0;
        if (timed_out)
                return asprintf(ret, "\n\n[The syntax check did not end within %llu s and was stopped.]",
                                (unsigned long long) (SYNTAX_CHECK_TIMEOUT_USEC / 1000000ULL)) < 0 ? -ENOMEM : 0;

        /* The first lines: where a parser stops, its first error is the
         * one that matters. Cut on a UTF-8 boundary. */
        while (*end && lines < SYNTAX_CHECK_LINES_MAX && (size_t) (end - o) < SYNTAX_CHECK_BYTES_MAX) {
                if (*end == '\n')
                        lines++;
                end++;
        }
        while (end > o && *end && ((unsigned char) *end & 0xC0) == 0x80)
                end--;
        f = open_memstream(&s, &size);
        if (!f)
                return -ENOMEM;
        fputs("\n\nThe syntax check (run in the sandbox after this edit) found errors; mend them in your next step:\n", f);
        fwrite(o, 1, (size_t) (end - o), f);
        if (end > o && end[-1] != '\n')
                fputc('\n', f);
        if (*end)
                fprintf(f, "[... %zu more bytes of the check's output not shown]\n", strlen(end));
        if (fclose(f) != 0)
                return -ENOMEM;
        /* The exec service escaped the output already; cutting may not
         * have made it invalid, but this text goes into JSON as it is. */
        utf8_sanitize(s, size);
        *ret = TAKE_PTR(s);
        return 0;
}
