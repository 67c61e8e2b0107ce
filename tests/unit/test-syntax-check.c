/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The syntax check after an edit: which check a file gets (the base's
 * .agentfab.md first, then the defaults), that a file name never becomes
 * shell syntax or an option, that the script it makes says only what is
 * wrong (a missing file or checker is silence), and that what the model is
 * told is bounded. The script is run here with /bin/sh in a directory of
 * our own, as the sandbox would run it in /workspace. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs-util.h"
#include "review-settings.h"
#include "string-util.h"
#include "syntax-check.h"
#include "tap.h"

static char top[] = "/tmp/test-syntax-check-XXXXXX";

static bool contains(const char *s, const char *needle) {
        return s && strstr(s, needle);
}

static void put(const char *name, const char *content) {
        char p[512];
        FILE *f;

        snprintf(p, sizeof(p), "%s/%s", top, name);
        f = fopen(p, "we");
        if (!f)
                exit(2);
        fputs(content, f);
        fclose(f);
}

static bool have(const char *tool) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
        return system(cmd) == 0;
}

/* Runs script with /bin/sh in top: its output and exit status. */
static int run_script(const char *script, char **ret_output) {
        int fds[2], status;
        char buf[65536];
        size_t n = 0;
        pid_t pid;

        if (pipe2(fds, O_CLOEXEC) < 0)
                exit(2);
        pid = fork();
        if (pid < 0)
                exit(2);
        if (pid == 0) {
                dup2(fds[1], 1);
                dup2(fds[1], 2);
                if (chdir(top) < 0)
                        _exit(2);
                execl("/bin/sh", "/bin/sh", "-c", script, "agentfab-syntax-check", (char *) NULL);
                _exit(2);
        }
        close(fds[1]);
        for (ssize_t k; n < sizeof(buf) - 1 && (k = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0;)
                n += (size_t) k;
        buf[n] = '\0';
        close(fds[0]);
        waitpid(pid, &status, 0);
        *ret_output = strdup(buf);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Picks the check of each path and runs one script for all of them. */
static int check_files(char **checks, char **files, char **ret_output) {
        char *paths[16], *labels[16], *snippets[16];
        _cleanup_free_ char *script = NULL;
        size_t n = 0;
        int r;

        for (char **f = files; *f; f++) {
                char *l, *s;
                if (syntax_check_pick(*f, checks, &l, &s) <= 0)
                        continue;
                paths[n] = *f;
                labels[n] = l;
                snippets[n++] = s;
        }
        if (syntax_check_script(paths, labels, snippets, n, &script) < 0)
                exit(2);
        r = run_script(script, ret_output);
        for (size_t i = 0; i < n; i++) {
                free(labels[i]);
                free(snippets[i]);
        }
        return r;
}

static void test_pick(void) {
        static const struct {
                const char *path;
                const char *label;   /* NULL: no default */
        } table[] = {
                { "a.py", "python3 compile" },
                { "src/pkg/mod.py", "python3 compile" },
                { "run.sh", "sh -n" },
                { "lib.bash", "bash -n" },
                { "web/app.js", "node --check" },
                { "x.mjs", "node --check" },
                { "main.c", "cc -fsyntax-only" },
                { "x.cpp", "c++ -fsyntax-only" },
                { "Rakefile.rb", "ruby -c" },
                { "package.json", "python3 -m json.tool" },
                { ".py", NULL },        /* a hidden file, not Python */
                { "notes.txt", NULL },
                { "script.pl", NULL },  /* perl -c runs BEGIN blocks */
                { "Makefile", NULL },
                { "a.py.orig", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const char *label, *snippet;
                int r = syntax_check_default(table[i].path, &label, &snippet);
                CHECK(table[i].label ? r == 1 && streq(label, table[i].label) && snippet : r == 0 && !label && !snippet,
                      "default check of '%s': %s", table[i].path, table[i].label ?: "none");
        }
}

static void test_repository_checks(void) {
        char *checks[] = { (char *) "**/*.py", (char *) "flake8 --select=E9 {file}",
                           (char *) "tools/*.sh", (char *) "shellcheck -S error",
                           (char *) "*.tpl", (char *) "check {file} && again {file}", NULL };
        _cleanup_free_ char *label = NULL, *snippet = NULL;

        CHECK(syntax_check_pick("src/a.py", checks, &label, &snippet) == 1 && streq(label, "flake8") &&
              streq(snippet, "flake8 --select=E9 './src/a.py'"), "the repository's check wins, {file} quoted: %s", snippet);
        label = mfree_ptr(label);
        snippet = mfree_ptr(snippet);
        CHECK(syntax_check_pick("tools/x.sh", checks, &label, &snippet) == 1 &&
              streq(snippet, "shellcheck -S error './tools/x.sh'"), "without {file}, the file is appended: %s", snippet);
        label = mfree_ptr(label);
        snippet = mfree_ptr(snippet);
        CHECK(syntax_check_pick("run.sh", checks, &label, &snippet) == 1 && streq(label, "sh -n"),
              "a glob with '/' does not match at the top: the default");
        label = mfree_ptr(label);
        snippet = mfree_ptr(snippet);
        CHECK(syntax_check_pick("page.tpl", checks, &label, &snippet) == 1 &&
              streq(snippet, "check './page.tpl' && again './page.tpl'"), "every {file} is replaced: %s", snippet);
        label = mfree_ptr(label);
        snippet = mfree_ptr(snippet);
        /* A name a model chose: quotes, $(), ;, a leading dash. */
        CHECK(syntax_check_pick("-rf $(touch pwned); it's.py", checks, &label, &snippet) == 1 &&
              streq(snippet, "flake8 --select=E9 './-rf $(touch pwned); it'\\''s.py'"),
              "a hostile name stays one quoted word, never an option: %s", snippet);
        label = mfree_ptr(label);
        snippet = mfree_ptr(snippet);
        CHECK(syntax_check_pick("README", NULL, &label, &snippet) == 0 && !label && !snippet, "no check: 0");
}

static void test_settings(void) {
        static const char text[] =
                "# Notes\n"
                "```agentfab\n"
                "syntax-check: **/*.py python3 -m pyflakes {file}\n"
                "syntax-check:   *.tpl    tplcheck   --strict\n"
                "syntax-check: onlyaglob\n"
                "syntax-check: ../x.py check {file}\n"
                "syntax-check: /abs.py check {file}\n"
                "```\n";
        _cleanup_(review_repo_settings_done) ReviewRepoSettings s = {};

        CHECK(review_repo_settings_parse(text, strlen(text), &s) == 0, "parses");
        CHECK(strv_length(s.syntax_checks) == 4 && streq(s.syntax_checks[0], "**/*.py") &&
              streq(s.syntax_checks[1], "python3 -m pyflakes {file}") && streq(s.syntax_checks[2], "*.tpl") &&
              streq(s.syntax_checks[3], "tplcheck   --strict"), "syntax-check: lines kept as glob and command pairs");
        CHECK(strv_length(s.warnings) == 3, "a glob alone, '..' and an absolute glob are warned of: %zu",
              strv_length(s.warnings));
}

static void test_script(void) {
        _cleanup_free_ char *out = NULL;
        int r;

        put("ok.py", "def f(x):\n    return x + 1\n");
        put("bad.py", "def f(x:\n    return x\n");
        put("bad.sh", "if true; then\n  echo x\n");
        put("ok.sh", "#!/bin/bash\n[[ -n x ]] && echo ok\n");
        put("traceback.py", "import sys\nopen('ran', 'w').write('x')\n");

        if (have("python3")) {
                char *files[] = { (char *) "ok.py", NULL };
                r = check_files(NULL, files, &out);
                CHECK(r == 0 && streq(out, ""), "a good Python file: silence, status 0 (%d, '%s')", r, out);
                out = mfree_ptr(out);

                char *bad[] = { (char *) "bad.py", (char *) "ok.py", NULL };
                r = check_files(NULL, bad, &out);
                CHECK(r == 1 && contains(out, "./bad.py (python3 compile):") && contains(out, "SyntaxError") &&
                      contains(out, "line 1") && !contains(out, "ok.py"), "a broken Python file: its error, by name: %s", out);
                out = mfree_ptr(out);
                char p[512];
                snprintf(p, sizeof(p), "%s/ran", top);
                CHECK(access(p, F_OK) < 0, "the workspace's traceback.py is not imported by the check");
                snprintf(p, sizeof(p), "%s/__pycache__", top);
                CHECK(access(p, F_OK) < 0, "nothing is written beside the file (no __pycache__)");
        } else
                SKIP("python3 is not installed");

        char *sh[] = { (char *) "bad.sh", (char *) "ok.sh", NULL };
        r = check_files(NULL, sh, &out);
        CHECK(r == 1 && contains(out, "./bad.sh (sh -n):") && !contains(out, "ok.sh"),
              "sh -n: the broken script is told, a bash script is read by bash -n: %s", out);
        out = mfree_ptr(out);

        char *gone[] = { (char *) "deleted.py", NULL };
        r = check_files(NULL, gone, &out);
        CHECK(r == 0 && streq(out, ""), "a file a patch deleted is skipped");
        out = mfree_ptr(out);

        char *missing[] = { (char *) "*.py", (char *) "no-such-checker-anywhere {file}", NULL };
        char *py[] = { (char *) "bad.py", NULL };
        r = check_files(missing, py, &out);
        CHECK(r == 0 && streq(out, ""), "a checker not installed (127) is silence: %d '%s'", r, out);
        out = mfree_ptr(out);

        /* A name that would run a command if it were interpolated. */
        put("$(touch pwned).sh", "echo fine\n");
        char *hostile[] = { (char *) "$(touch pwned).sh", NULL };
        r = check_files(NULL, hostile, &out);
        char p[512];
        snprintf(p, sizeof(p), "%s/pwned", top);
        CHECK(r == 0 && access(p, F_OK) < 0, "a file name is never run as shell syntax");
}

static void test_report(void) {
        _cleanup_free_ char *r = NULL, *big = NULL;

        CHECK(syntax_check_report("", 0, false, &r) == 0 && !r, "passed: nothing to say");
        CHECK(syntax_check_report("x.py (python3 compile):\nSyntaxError: bad\n", 1, false, &r) == 0 &&
              contains(r, "found errors") && contains(r, "SyntaxError: bad") && !contains(r, "more bytes"),
              "failed: the output follows the note");
        r = mfree_ptr(r);
        CHECK(syntax_check_report(NULL, -1, true, &r) == 0 && contains(r, "did not end within 10 s"), "timed out: said so");
        r = mfree_ptr(r);

        big = malloc(100 * 40 + 1);
        for (int i = 0; i < 100; i++)
                snprintf(big + i * 40, 41, "%-39d", i);
        big[100 * 40] = '\0';
        for (int i = 0; i < 100; i++)
                big[i * 40 + 39] = '\n';
        CHECK(syntax_check_report(big, 1, false, &r) == 0 && contains(r, "19 ") && !contains(r, "\n20 ") &&
              contains(r, "more bytes of the check's output not shown"), "at most %u lines are told", SYNTAX_CHECK_LINES_MAX);
        r = mfree_ptr(r);

        free(big);
        big = malloc(10000 + 1);
        memset(big, 'x', 10000);
        big[10000] = '\0';
        CHECK(syntax_check_report(big, 1, false, &r) == 0 && strlen(r) < SYNTAX_CHECK_BYTES_MAX + 300 &&
              contains(r, "7952 more bytes"), "at most %u bytes are told: %zu", SYNTAX_CHECK_BYTES_MAX, strlen(r));
}

int main(void) {
        if (!mkdtemp(top))
                return 2;
        test_pick();
        test_repository_checks();
        test_settings();
        test_script();
        test_report();
        rm_rf_at(AT_FDCWD, top);
        return tap_done();
}
