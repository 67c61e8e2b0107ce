/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "tap.h"
#include "tools.h"
#include "workspace-path.h"

static char top[] = "/tmp/test-tools-XXXXXX";
static int ws_fd = -EBADF;

static void put(const char *path, const char *content) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/ws/%s", top, path);
        FILE *f = fopen(p, "we");
        if (!f) {
                perror(p);
                exit(2);
        }
        fputs(content, f);
        fclose(f);
}

static char *get(const char *path) {
        char *s = NULL;
        if (read_file_at(ws_fd, path, 64 * 1024 * 1024, &s, NULL) < 0)
                return NULL;
        return s;
}

/* Messages of checks stay on one TAP line. */
static const char *L(const char *s) {
        static char bufs[4][400];
        static unsigned k = 0;
        char *b = bufs[k++ % 4];
        size_t n = 0;

        for (s = s ?: "(null)"; *s && n + 3 < sizeof(bufs[0]); s++)
                if (*s == '\n') {
                        b[n++] = '\\';
                        b[n++] = 'n';
                } else
                        b[n++] = *s;
        b[n] = '\0';
        return b;
}

static bool contains(const char *s, const char *needle) {
        return s && strstr(s, needle);
}

/* Parses a call the test means to be valid; exits if it is not. */
static ToolCallArgs args(const char *name, const char *json) {
        ToolCallArgs a;
        _cleanup_free_ char *e = NULL;
        if (tool_call_parse(name, json, &a, &e) < 0) {
                printf("# unexpected parse failure of %s %s: %s\n", name, json, L(e));
                exit(2);
        }
        return a;
}

/* Runs a parse expected to fail and returns the message. */
static char *parse_fails(const char *name, const char *json) {
        ToolCallArgs a;
        char *e = NULL;
        int r = tool_call_parse(name, json, &a, &e);
        if (r >= 0) {
                tool_call_args_done(&a);
                free(e);
                return NULL;
        }
        return e ?: strdup("(no message)");
}

typedef int (*tool_fn)(int ws, const ToolCallArgs *a, size_t max, char **ret);

static int run(tool_fn f, const char *name, const char *json, size_t max, char **ret) {
        ToolCallArgs a = args(name, json);
        *ret = NULL;
        int r = f(ws_fd, &a, max, ret);
        tool_call_args_done(&a);
        return r;
}

static int list(const char *json, unsigned max_entries, char **ret) {
        ToolCallArgs a = args("list_files", json);
        int r = tool_list_files(ws_fd, &a, max_entries, 64 * 1024, ret);
        tool_call_args_done(&a);
        return r;
}

static int search(const char *json, unsigned max_matches, char **ret) {
        ToolCallArgs a = args("search", json);
        int r = tool_search(ws_fd, &a, max_matches, 64 * 1024, ret);
        tool_call_args_done(&a);
        return r;
}

static void setup(void) {
        char p[PATH_MAX];

        if (!mkdtemp(top))
                exit(2);
        snprintf(p, sizeof(p), "%s/ws", top);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/outside", top);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/outside/secret.txt", top);
        FILE *f = fopen(p, "we");
        fputs("SECRET needle outside\n", f);
        fclose(f);

        ws_fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int t = openat(ws_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        close(ws_fd);
        ws_fd = t;

        mkdirat(ws_fd, "src", 0755);
        mkdirat(ws_fd, ".git", 0755);
        mkdirat(ws_fd, "node_modules", 0755);
        mkdirat(ws_fd, "node_modules/left-pad", 0755);
        put("src/main.c", "#include <stdio.h>\nint main(void) {\n        puts(\"hello needle\");\n        return 0;\n}\n");
        put("src/util.c", "int add(int a, int b) {\n        return a + b; /* needle */\n}\n");
        put("README.md", "# Project\n\nSay hello.\n");
        put(".git/config", "[core]\n\tneedle = yes\n");
        put("node_modules/left-pad/index.js", "module.exports = 'needle';\n");
        put("run.sh", "#!/bin/sh\necho hi\n");
        fchmodat(ws_fd, "run.sh", 0755, 0);
        /* A binary file: NUL bytes. */
        int fd = openat(ws_fd, "blob.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        (void) !write(fd, "needle\0\x01\x02\x03", 10);
        close(fd);

        /* Symlinks: an absolute one to /etc, a relative one up and out, one
         * to the sibling outside directory, and one that stays inside. */
        symlinkat("/etc", ws_fd, "etc-link");
        symlinkat("/etc/passwd", ws_fd, "passwd-link");
        symlinkat("../outside", ws_fd, "out-dir");
        symlinkat("src/main.c", ws_fd, "main-alias");
}

static void test_paths(void) {
        _cleanup_free_ char *m = NULL, *n = NULL;
        char longpath[PATH_MAX + 10];
        int fd = -EBADF;

        /* Refused before the file system is touched, each with its reason. */
        CHECK_ERRNO(workspace_path_check("../etc/passwd"), -EXDEV, "'../etc/passwd' refused");
        CHECK_ERRNO(workspace_path_check("/etc/passwd"), -EXDEV, "absolute path refused");
        CHECK_ERRNO(workspace_path_check("a/../../b"), -EXDEV, "'a/../../b' refused");
        CHECK_ERRNO(workspace_path_check("a/../b"), -EXDEV, "'..' refused even when it would stay inside");
        CHECK(workspace_path_check("") == -EINVAL && workspace_path_check(NULL) == -EINVAL, "empty path refused");
        CHECK(workspace_path_check(".git/config") == -EPERM && workspace_path_check(".git") == -EPERM &&
              workspace_path_check("./.git/hooks/pre-commit") == -EPERM && workspace_path_check(".GIT/config") == -EPERM,
              ".git at the top refused, also spelt otherwise");
        CHECK(workspace_path_check("vendor/x/.git/config") == 0 && workspace_path_check(".github/x") == 0,
              ".git deeper down and .github are ordinary");
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[sizeof(longpath) - 1] = '\0';
        CHECK_ERRNO(workspace_path_check(longpath), -ENAMETOOLONG, "path longer than PATH_MAX refused");
        CHECK(workspace_path_normalize("./a//b/./c/", &n) == 0 && streq(n, "a/b/c"), "normalized: '%s'", L(n));
        free(n);
        n = NULL;
        CHECK(workspace_path_normalize("./", &n) == 0 && streq(n, "."), "the top normalizes to '.'");

        /* The model reads these sentences: they must say what went wrong. */
        CHECK(workspace_path_error("../x", -EXDEV, &m) == -EXDEV && contains(m, "escapes the workspace") &&
              contains(m, "'..'"), "'..' message: %s", L(m));
        free(m);
        CHECK(workspace_path_error("/etc/passwd", -EXDEV, &m) == -EXDEV && contains(m, "absolute"), "absolute message: %s", L(m));
        free(m);
        CHECK(workspace_path_error("etc-link/passwd", -EXDEV, &m) == -EXDEV && contains(m, "escapes the workspace") &&
              contains(m, "symlink"), "symlink escape message: %s", L(m));
        free(m);
        CHECK(workspace_path_error("nope.c", -ENOENT, &m) == -ENOENT && streq(m, "no such file 'nope.c'"), "ENOENT: %s", L(m));
        free(m);
        CHECK(workspace_path_error(".git/config", -EPERM, &m) == -EPERM && contains(m, ".git/"), ".git message: %s", L(m));
        free(m);
        m = NULL;

        /* SECURITY: symlinks never lead out, whatever their form. */
        CHECK_ERRNO(workspace_open(ws_fd, "etc-link/passwd", O_RDONLY, 0, &fd), -EXDEV, "absolute symlinked dir not followed");
        CHECK_ERRNO(workspace_open(ws_fd, "passwd-link", O_RDONLY, 0, &fd), -EXDEV, "absolute symlink not followed");
        CHECK_ERRNO(workspace_open(ws_fd, "out-dir/secret.txt", O_RDONLY, 0, &fd), -EXDEV, "relative symlink out not followed");
        CHECK_ERRNO(workspace_open(ws_fd, "main-alias", O_RDONLY, 0, &fd), 0, "symlink inside followed for reading");
        fd = safe_close(fd);
        CHECK_ERRNO(workspace_open(ws_fd, "main-alias", O_WRONLY | O_TRUNC, 0, &fd), -ELOOP, "never written through");
        CHECK_ERRNO(workspace_open(ws_fd, "out-dir/new.txt", O_WRONLY | O_CREAT, 0644, &fd), -EXDEV, "no creation through a symlink out");
        CHECK(faccessat(ws_fd, "../outside/new.txt", F_OK, 0) < 0, "nothing created outside");
        CHECK_ERRNO(workspace_open(ws_fd, "etc-link/x/y/z", O_WRONLY | O_CREAT, 0644, &fd), -EXDEV,
                    "parents are not created through a symlink out");
        CHECK_ERRNO(workspace_open(ws_fd, "/proc/self/root/etc/passwd", O_RDONLY, 0, &fd), -EXDEV, "no way to /proc");
        CHECK_ERRNO(workspace_open(ws_fd, "d1/d2/f", O_WRONLY | O_CREAT | O_EXCL, 0644, &fd), 0, "parents created");
        fd = safe_close(fd);
        struct stat st;
        CHECK(fstatat(ws_fd, "d1/d2", &st, 0) == 0 && S_ISDIR(st.st_mode), "parent is a directory");
        unlinkat(ws_fd, "d1/d2/f", 0);
        unlinkat(ws_fd, "d1/d2", AT_REMOVEDIR);
        unlinkat(ws_fd, "d1", AT_REMOVEDIR);
}

static void test_parse(void) {
        ToolCallArgs a;
        char *e;

        /* The model's output is untrusted: every malformation is a clear
         * answer it can act on, never a crash or a guess. */
        e = parse_fails("rm_rf", "{}");
        CHECK(contains(e, "unknown tool 'rm_rf'") && contains(e, "read_file"), "unknown tool: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": ");
        CHECK(contains(e, "not valid JSON"), "garbage JSON: %s", L(e));
        free(e);
        e = parse_fails("read_file", "[\"x\"]");
        CHECK(contains(e, "must be a JSON object"), "array refused: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": 5}");
        CHECK(contains(e, "'path' must be a string"), "wrong type: %s", L(e));
        free(e);
        e = parse_fails("edit_file", "{\"path\": \"a\", \"new_text\": \"x\"}");
        CHECK_STR_EQ(e, "edit_file: 'old_text' is required", "missing key: %s", L(e));
        free(e);
        e = parse_fails("edit_file", "{\"path\": \"a\", \"old_text\": \"\", \"new_text\": \"x\"}");
        CHECK(contains(e, "must not be empty") && contains(e, "write_file"), "empty old_text: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": \"a\", \"startLine\": 3}");
        CHECK(contains(e, "unknown argument 'startLine'") && contains(e, "start_line"), "unknown key: %s", L(e));
        free(e);
        e = parse_fails("run_tests", "{\"verbose\": true}");
        CHECK(contains(e, "takes no arguments"), "unknown key of a tool without arguments: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": \"a\\u0000b\"}");
        CHECK(contains(e, "NUL"), "NUL in a path: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": \"a\", \"start_line\": -3}");
        CHECK(contains(e, "negative"), "negative line: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": \"a\", \"start_line\": 1.5}");
        CHECK(contains(e, "whole number"), "fraction: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": \"a\", \"start_line\": 0}");
        CHECK(contains(e, "between 1"), "line 0: %s", L(e));
        free(e);
        e = parse_fails("read_file", "{\"path\": \"a\", \"start_line\": 5, \"end_line\": 2}");
        CHECK(contains(e, "before start_line"), "reversed range: %s", L(e));
        free(e);
        e = parse_fails("search", "{\"pattern\": \"x\", \"regex\": 3}");
        CHECK(contains(e, "true or false"), "bad boolean: %s", L(e));
        free(e);
        e = parse_fails("run_command", "{\"command\": \"ls\", \"timeout_sec\": 999999}");
        CHECK(contains(e, "between 1 and 86400"), "timeout bounded: %s", L(e));
        free(e);
        e = parse_fails("finish", "{}");
        CHECK(contains(e, "'summary' is required"), "finish needs a summary: %s", L(e));
        free(e);
        /* Giving up says why: the person reads the summary as the reason. */
        e = parse_fails("finish", "{\"cannot_complete\": true}");
        CHECK(contains(e, "'summary' is required"), "giving up needs a reason: %s", L(e));
        free(e);
        e = parse_fails("finish", "{\"summary\": \"x\", \"cannot_complete\": 3}");
        CHECK(contains(e, "true or false"), "cannot_complete is a boolean: %s", L(e));
        free(e);
        {
                _cleanup_(tool_call_args_done) ToolCallArgs g = {};
                CHECK(tool_call_parse("finish", "{\"summary\": \"blocked\", \"cannot_complete\": true}", &g, NULL) == 0 &&
                      g.kind == TOOL_FINISH && g.cannot_complete && streq(g.summary, "blocked"), "finish gives up");
        }

        /* Oversized strings. */
        size_t big = TOOL_CONTENT_MAX + 64;
        char *json = malloc(big + 64);
        if (!json)
                exit(2);
        int k = sprintf(json, "{\"path\":\"a\",\"content\":\"");
        memset(json + k, 'x', TOOL_CONTENT_MAX + 1);
        strcpy(json + k + TOOL_CONTENT_MAX + 1, "\"}");
        e = parse_fails("write_file", json);
        CHECK(contains(e, "too long"), "oversized content: %s", L(e));
        free(e);
        free(json);

        /* What models really send, accepted. */
        CHECK(tool_call_parse("run_tests", "", &a, &e) == 0 && a.kind == TOOL_RUN_TESTS && !e, "empty arguments are {}");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("read_file", "\"{\\\"path\\\": \\\"x.c\\\"}\"", &a, NULL) == 0 && streq(a.path, "x.c"),
              "double-encoded object accepted");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("read_file", "{\"path\": \"x.c\", \"start_line\": \"10\", \"end_line\": 20.0}", &a, NULL) == 0 &&
              a.start_line == 10 && a.end_line == 20, "quoted and 20.0 numbers accepted");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("search", "{\"pattern\": \"x\", \"path\": null, \"regex\": true}", &a, NULL) == 0 &&
              !a.path && a.regex, "null is absent");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("list_files", "{\"path\": \"\"}", &a, NULL) == 0 && !a.path, "empty list path is the top");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("run_command", "{\"command\": \"make -j2\", \"timeout_sec\": 60}", &a, NULL) == 0 &&
              streq(a.command, "make -j2") && a.timeout_sec == 60, "run_command parsed");
        tool_call_args_done(&a);
        CHECK(tool_call_parse("edit_file", "{\"path\": \"a\", \"old_text\": \"x\", \"new_text\": \"\"}", &a, NULL) == 0 &&
              streq(a.new_text, ""), "empty new_text deletes");
        tool_call_args_done(&a);

        CHECK(tool_kind_from_string("search") == TOOL_SEARCH && streq(tool_kind_to_string(TOOL_FINISH), "finish") &&
              tool_kind_from_string("nope") == _TOOL_KIND_INVALID && !tool_kind_to_string(_TOOL_KIND_MAX),
              "kind names both ways");
}

static void test_schema(void) {
        _cleanup_json_ json_object *s = tools_schema();
        json_object *f, *p, *req, *v;
        bool all = true;

        /* The API accepts the schema only if every function is well formed. */
        CHECK(s && json_object_is_type(s, json_type_array) && json_object_array_length(s) == _TOOL_KIND_MAX,
              "one schema entry per tool");
        for (size_t i = 0; s && i < json_object_array_length(s); i++) {
                json_object *t = json_object_array_get_idx(s, i);
                const char *type = NULL, *name = NULL, *desc = NULL;
                if (json_get_string(t, "type", &type) < 0 || !streq(type, "function") ||
                    !json_object_object_get_ex(t, "function", &f) || json_get_string(f, "name", &name) < 0 ||
                    json_get_string(f, "description", &desc) < 0 || tool_kind_from_string(name) < 0 ||
                    !json_object_object_get_ex(f, "parameters", &p) || !json_object_object_get_ex(p, "required", &req))
                        all = false;
        }
        CHECK(all, "type, name, description, parameters and required everywhere");

        f = NULL;
        for (size_t i = 0; s && i < json_object_array_length(s); i++) {
                json_object *t = json_object_array_get_idx(s, i), *ff;
                const char *name;
                json_object_object_get_ex(t, "function", &ff);
                json_get_string(ff, "name", &name);
                if (streq(name, "edit_file"))
                        f = ff;
        }
        json_object_object_get_ex(f, "parameters", &p);
        json_object_object_get_ex(p, "required", &req);
        CHECK(req && json_object_array_length(req) == 3 &&
              streq(json_object_get_string(json_object_array_get_idx(req, 1)), "old_text"),
              "edit_file requires path, old_text, new_text");
        CHECK(json_object_object_get_ex(p, "additionalProperties", &v) && !json_object_get_boolean(v),
              "no additional properties");
}

static void test_read(void) {
        char *o = NULL;
        int r;

        r = run(tool_read_file, "read_file", "{\"path\": \"src/main.c\"}", 4096, &o);
        CHECK(r == 0 && contains(o, "   1| #include <stdio.h>\n") && contains(o, "   5| }\n") && !contains(o, "[lines"),
              "whole file, numbered");
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"./src//main.c\", \"start_line\": 2, \"end_line\": 3}", 4096, &o);
        CHECK(r == 0 && !contains(o, "#include") && contains(o, "   2| int main") && contains(o, "   3| ") &&
              !contains(o, "   4| ") && contains(o, "[lines 2-3 of 5]"), "line range inclusive: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"src/main.c\", \"start_line\": 4, \"end_line\": 400}", 4096, &o);
        CHECK(r == 0 && contains(o, "   5| }") && contains(o, "[lines 4-5 of 5]"), "end past the end is clamped");
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"src/main.c\", \"start_line\": 9}", 4096, &o);
        CHECK(r == -ERANGE && contains(o, "start_line 9") && contains(o, "5 lines"), "start past the end: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"blob.bin\"}", 4096, &o);
        CHECK(r == -EMEDIUMTYPE && contains(o, "binary"), "binary refused: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"src\"}", 4096, &o);
        CHECK(r == -EISDIR && contains(o, "list_files"), "directory refused: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"../etc/passwd\"}", 4096, &o);
        CHECK(r == -EXDEV && contains(o, "read_file: path '../etc/passwd'") && contains(o, "escapes"), "../etc/passwd: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"/etc/passwd\"}", 4096, &o);
        CHECK(r == -EXDEV && contains(o, "absolute"), "/etc/passwd: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"a/../../b\"}", 4096, &o);
        CHECK_ERRNO(r, -EXDEV, "a/../../b: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"etc-link/passwd\"}", 4096, &o);
        CHECK(r == -EXDEV && contains(o, "symlink"), "read through symlink to /etc refused: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \".git/config\"}", 4096, &o);
        CHECK(r == -EPERM && contains(o, ".git/"), ".git/config refused: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"missing.c\"}", 4096, &o);
        CHECK(r == -ENOENT && contains(o, "no such file 'missing.c'"), "missing file: %s", L(o));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"main-alias\"}", 4096, &o);
        CHECK(r == 0 && contains(o, "hello needle"), "symlink inside read");
        free(o);

        /* Long files: cut at a line with a note that says how to go on. */
        {
                char *big = malloc(2000 * 16 + 1);
                size_t n = 0;
                for (unsigned i = 1; i <= 2000; i++)
                        n += (size_t) sprintf(big + n, "line %u\n", i);
                put("big.txt", big);
                free(big);
        }
        r = run(tool_read_file, "read_file", "{\"path\": \"big.txt\"}", 1000, &o);
        CHECK(r == 0 && strlen(o) <= 1000 && contains(o, "   1| line 1\n") && contains(o, "call read_file with start_line=") &&
              contains(o, "of 2000"), "long output cut with a note (%zu bytes)", strlen(o ?: ""));
        free(o);
        r = run(tool_read_file, "read_file", "{\"path\": \"big.txt\", \"start_line\": 1990}", 1000, &o);
        CHECK(r == 0 && contains(o, "2000| line 2000") && !contains(o, "cut"), "the rest read on");
        free(o);

        /* A single line bigger than the room (minified code). */
        char *wide = malloc(10001);
        memset(wide, 'w', 10000);
        wide[10000] = '\0';
        put("wide.js", wide);
        free(wide);
        r = run(tool_read_file, "read_file", "{\"path\": \"wide.js\"}", 1000, &o);
        CHECK(r == 0 && strlen(o) <= 1000 && contains(o, "line 1 is 10000 bytes long"), "one long line cut: %zu", strlen(o ?: ""));
        free(o);

        put("empty.txt", "");
        r = run(tool_read_file, "read_file", "{\"path\": \"empty.txt\"}", 1000, &o);
        CHECK(r == 0 && contains(o, "is empty"), "empty file said so");
        free(o);

        /* Invalid UTF-8 reaches the model as valid UTF-8. */
        put("latin1.txt", "caf\xe9\n");
        r = run(tool_read_file, "read_file", "{\"path\": \"latin1.txt\"}", 1000, &o);
        CHECK(r == 0 && contains(o, "caf?"), "invalid UTF-8 replaced");
        free(o);
}

static void test_write_edit(void) {
        char *o = NULL, *c;
        struct stat st;
        int r;

        r = run(tool_write_file, "write_file", "{\"path\": \"new/deep/file.txt\", \"content\": \"one\\ntwo\\n\"}", 1024, &o);
        c = get("new/deep/file.txt");
        CHECK(r == 0 && streq_ptr(c, "one\ntwo\n") && contains(o, "new file") && contains(o, "2 lines"),
              "written with parents: %s", L(o));
        free(o);
        free(c);
        r = run(tool_write_file, "write_file", "{\"path\": \"run.sh\", \"content\": \"#!/bin/sh\\necho bye\\n\"}", 1024, &o);
        c = get("run.sh");
        CHECK(r == 0 && streq_ptr(c, "#!/bin/sh\necho bye\n") && contains(o, "replaced") &&
              fstatat(ws_fd, "run.sh", &st, 0) == 0 && (st.st_mode & 0777) == 0755, "replaced, still executable");
        free(o);
        free(c);
        r = run(tool_write_file, "write_file", "{\"path\": \"main-alias\", \"content\": \"x\"}", 1024, &o);
        c = get("src/main.c");
        CHECK(r == -ELOOP && contains(o, "symlink") && contains(c, "hello needle"), "not written through a symlink: %s", L(o));
        free(o);
        free(c);
        CHECK(fstatat(ws_fd, "main-alias", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode), "the symlink stays");
        r = run(tool_write_file, "write_file", "{\"path\": \"passwd-link\", \"content\": \"x\"}", 1024, &o);
        CHECK_ERRNO(r, -ELOOP, "symlink to /etc/passwd not written: %s", L(o));
        free(o);
        r = run(tool_write_file, "write_file", "{\"path\": \"etc-link/evil\", \"content\": \"x\"}", 1024, &o);
        CHECK(r == -EXDEV && access("/etc/evil", F_OK) < 0, "not written into a symlinked dir out: %s", L(o));
        free(o);
        r = run(tool_write_file, "write_file", "{\"path\": \"out-dir/evil\", \"content\": \"x\"}", 1024, &o);
        CHECK(r == -EXDEV && faccessat(ws_fd, "../outside/evil", F_OK, 0) < 0, "relative symlink out: %s", L(o));
        free(o);
        r = run(tool_write_file, "write_file", "{\"path\": \"src\", \"content\": \"x\"}", 1024, &o);
        CHECK(r == -EISDIR && contains(o, "directory"), "directory refused: %s", L(o));
        free(o);
        r = run(tool_write_file, "write_file", "{\"path\": \".\", \"content\": \"x\"}", 1024, &o);
        CHECK_ERRNO(r, -EISDIR, "the top refused: %s", L(o));
        free(o);
        r = run(tool_write_file, "write_file", "{\"path\": \".git/hooks/pre-commit\", \"content\": \"x\"}", 1024, &o);
        CHECK(r == -EPERM && faccessat(ws_fd, ".git/hooks", F_OK, 0) < 0, ".git refused: %s", L(o));
        free(o);
        /* 1,500 parents made one below the other: each checked against .git
         * once, not by a walk up to the top (which took seconds). */
        char deep[4096], json[4200];
        size_t n = 0;
        for (unsigned i = 0; i < 1500; i++)
                n += (size_t) snprintf(deep + n, sizeof(deep) - n, "d/");
        snprintf(deep + n, sizeof(deep) - n, "f.txt");
        snprintf(json, sizeof(json), "{\"path\": \"%s\", \"content\": \"deep\"}", deep);
        r = run(tool_write_file, "write_file", json, 1024, &o);
        c = get(deep);
        CHECK(r == 0 && streq_ptr(c, "deep"), "written 1,500 directories deep: %s", L(o));
        free(o);
        free(c);
        (void) rm_rf_at(ws_fd, "d");
        r = run(tool_write_file, "write_file", "{\"path\": \"huge.txt\", \"content\": \"0123456789\"}", 5, &o);
        CHECK(r == -EFBIG && contains(o, "limit of 5") && faccessat(ws_fd, "huge.txt", F_OK, 0) < 0, "too big: %s", L(o));
        free(o);
        r = run(tool_write_file, "write_file", "{\"path\": \"../escape.txt\", \"content\": \"x\"}", 1024, &o);
        CHECK(r == -EXDEV && faccessat(ws_fd, "../escape.txt", F_OK, 0) < 0, "'..' write refused: %s", L(o));
        free(o);

        put("e.txt", "alpha\nbeta\ngamma\nbeta\n");
        r = run(tool_edit_file, "edit_file", "{\"path\": \"e.txt\", \"old_text\": \"gamma\\n\", \"new_text\": \"GAMMA\\nDELTA\\n\"}", 1024, &o);
        c = get("e.txt");
        CHECK(r == 0 && streq_ptr(c, "alpha\nbeta\nGAMMA\nDELTA\nbeta\n") && contains(o, "at line 3"), "edited: %s", L(o));
        free(o);
        free(c);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"e.txt\", \"old_text\": \"beta\", \"new_text\": \"B\"}", 1024, &o);
        CHECK(r == -ENOTUNIQ && contains(o, "2 times") && contains(o, "lines 2, 5"), "two matches: %s", L(o));
        free(o);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"e.txt\", \"old_text\": \"  epsilon\", \"new_text\": \"B\"}", 1024, &o);
        CHECK(r == -ENODATA && contains(o, "not found") && contains(o, "whitespace"), "no match: %s", L(o));
        free(o);
        /* Drift is forgiven (test-tool-edit.c has the rules): LF for CRLF. */
        put("dos.txt", "one\r\ntwo\r\n");
        r = run(tool_edit_file, "edit_file", "{\"path\": \"dos.txt\", \"old_text\": \"one\\ntwo\", \"new_text\": \"x\"}", 1024, &o);
        c = get("dos.txt");
        CHECK(r == 0 && streq_ptr(c, "x\r\n") && contains(o, "line endings"), "CRLF matched and kept: %s", L(o));
        free(c);
        free(o);
        put("aaa.txt", "aaa\n");
        r = run(tool_edit_file, "edit_file", "{\"path\": \"aaa.txt\", \"old_text\": \"aa\", \"new_text\": \"b\"}", 1024, &o);
        CHECK_ERRNO(r, -ENOTUNIQ, "overlapping occurrences are ambiguous: %s", L(o));
        free(o);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"main-alias\", \"old_text\": \"hello\", \"new_text\": \"bye\"}", 1024, &o);
        CHECK_ERRNO(r, -ELOOP, "no edit through a symlink: %s", L(o));
        free(o);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"blob.bin\", \"old_text\": \"needle\", \"new_text\": \"x\"}", 1024, &o);
        CHECK_ERRNO(r, -EMEDIUMTYPE, "no edit of binary files: %s", L(o));
        free(o);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"nope/x.c\", \"old_text\": \"a\", \"new_text\": \"b\"}", 1024, &o);
        CHECK(r == -ENOENT && contains(o, "no such file") && faccessat(ws_fd, "nope", F_OK, 0) < 0,
              "missing file, no parents made: %s", L(o));
        free(o);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"e.txt\", \"old_text\": \"alpha\", \"new_text\": \"0123456789012345678901234567890\"}", 30, &o);
        CHECK(r == -EFBIG && contains(o, "would become"), "growing past the limit refused: %s", L(o));
        free(o);
        r = run(tool_edit_file, "edit_file", "{\"path\": \"etc-link/passwd\", \"old_text\": \"root\", \"new_text\": \"toor\"}", 1 << 20, &o);
        CHECK_ERRNO(r, -EXDEV, "no edit through a symlinked dir out: %s", L(o));
        free(o);
}

static void test_list_search(void) {
        char *o = NULL;
        int r;

        r = list("{}", 1000, &o);
        CHECK(r == 0 && contains(o, "README.md\n") && contains(o, "src/\n") && contains(o, "src/main.c\n") &&
              contains(o, "etc-link -> /etc\n") && contains(o, "out-dir -> ../outside\n"), "listing: %s", L(o));
        CHECK(!contains(o, ".git") && !contains(o, "etc-link/") && !contains(o, "secret") && !contains(o, "out-dir/"),
              "no .git, symlinked dirs not descended");
        CHECK(contains(o, "node_modules/ (not listed") && !contains(o, "left-pad"), "bulky dirs not descended");
        CHECK(contains(o, "README.md\naaa.txt\nbig.txt\n"), "sorted, bytewise");
        free(o);
        r = list("{\"path\": \"src\"}", 1000, &o);
        CHECK(r == 0 && streq_ptr(o, "src/main.c\nsrc/util.c\n"), "subdirectory: %s", L(o));
        free(o);
        r = list("{\"path\": \"node_modules\"}", 1000, &o);
        CHECK(r == 0 && contains(o, "node_modules/left-pad/index.js"), "bulky dir listed when named");
        free(o);
        r = list("{}", 3, &o);
        CHECK(r == 0 && contains(o, "listing cut after 3 entries"), "bounded: %s", L(o));
        free(o);
        /* An empty directory (found by fuzz-tool-call: its name list was a
         * NULL array handed to qsort(), undefined behaviour). */
        CHECK_INT_EQ(mkdirat(ws_fd, "empty", 0755), 0, "empty directory made");
        r = list("{\"path\": \"empty\"}", 1000, &o);
        CHECK(r == 0 && o && !contains(o, "/empty/"), "an empty directory lists as nothing: %s", L(o));
        free(o);
        CHECK_INT_EQ(unlinkat(ws_fd, "empty", AT_REMOVEDIR), 0, "empty directory removed");
        r = list("{\"path\": \"../\"}", 10, &o);
        CHECK_ERRNO(r, -EXDEV, "'..' refused: %s", L(o));
        free(o);
        r = list("{\"path\": \"etc-link\"}", 10, &o);
        CHECK_ERRNO(r, -EXDEV, "listing through a symlink out refused: %s", L(o));
        free(o);
        r = list("{\"path\": \"README.md\"}", 10, &o);
        CHECK(r == -ENOTDIR && contains(o, "read_file"), "file refused: %s", L(o));
        free(o);
        r = list("{\"path\": \".git\"}", 10, &o);
        CHECK_ERRNO(r, -EPERM, ".git refused: %s", L(o));
        free(o);

        r = search("{\"pattern\": \"needle\"}", 100, &o);
        CHECK(r == 0 && contains(o, "src/main.c:3:         puts(\"hello needle\");\n") && contains(o, "src/util.c:2:"),
              "fixed string found: %s", L(o));
        CHECK(!contains(o, "SECRET") && !contains(o, ".git") && !contains(o, "blob.bin") && !contains(o, "left-pad") &&
              !contains(o, "main-alias"), "no symlinks out, no .git, no binary, no bulky dirs, no symlinks");
        free(o);
        r = search("{\"pattern\": \"^int [a-z]+\\\\(\", \"regex\": true}", 100, &o);
        CHECK(r == 0 && contains(o, "src/main.c:2: int main(void) {") && contains(o, "src/util.c:1: int add("),
              "regex: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"int [a-z]+\\\\(\"}", 100, &o);
        CHECK(r == 0 && contains(o, "no matches"), "fixed string is not a regex: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"(unclosed\", \"regex\": true}", 100, &o);
        CHECK(r == -EINVAL && contains(o, "not a valid"), "bad regex: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"needle\", \"path\": \"src/util.c\"}", 100, &o);
        CHECK(r == 0 && streq_ptr(o, "src/util.c:2:         return a + b; /* needle */\n"), "one file: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"e\"}", 2, &o);
        CHECK(r == 0 && contains(o, "stopped after 2 matches"), "bounded: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"SECRET\", \"path\": \"out-dir\"}", 10, &o);
        CHECK_ERRNO(r, -EXDEV, "symlinked dir out not searched: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"needle\", \"path\": \".git\"}", 10, &o);
        CHECK_ERRNO(r, -EPERM, ".git not searched: %s", L(o));
        free(o);
        /* A symlink to .git, planted by a command, opens no way in. */
        symlinkat(".git", ws_fd, "g");
        r = list("{\"path\": \"g\"}", 10, &o);
        CHECK(r == -EPERM && contains(o, ".git/"), "listing .git through a symlink refused: %s", L(o));
        free(o);
        r = search("{\"pattern\": \"needle\", \"path\": \"g\"}", 10, &o);
        CHECK_ERRNO(r, -EPERM, "searching .git through a symlink refused: %s", L(o));
        free(o);
        ToolCallArgs a = args("write_file", "{\"path\": \"g/hooks/pre-commit\", \"content\": \"x\"}");
        r = tool_write_file(ws_fd, &a, 100, &o);
        tool_call_args_done(&a);
        CHECK(r == -EPERM && faccessat(ws_fd, ".git/hooks", F_OK, 0) < 0, "writing into .git through a symlink refused: %s", L(o));
        free(o);
        a = args("edit_file", "{\"path\": \"g/config\", \"old_text\": \"needle\", \"new_text\": \"x\"}");
        r = tool_edit_file(ws_fd, &a, 1000, &o);
        tool_call_args_done(&a);
        CHECK_ERRNO(r, -EPERM, "editing .git/config through a symlink refused: %s", L(o));
        free(o);
        unlinkat(ws_fd, "g", 0);

        r = search("{\"pattern\": \"root\", \"path\": \"/etc/passwd\"}", 10, &o);
        CHECK_ERRNO(r, -EXDEV, "absolute refused: %s", L(o));
        free(o);
}

static void test_bound_tree_instructions(void) {
        char *s, *t = NULL;
        size_t n = 0;

        s = malloc(20000 + 1);
        for (unsigned i = 0; n < 20000 - 20; i++)
                n += (size_t) sprintf(s + n, "row %05u\n", i);
        CHECK(tool_output_bound(&s, 500) == 0 && strlen(s) <= 500 && strneq(s, "row 00000\n", 10) &&
              contains(s, "bytes cut ...]\n") && s[strlen(s) - 1] == '\n', "head and tail kept with a note: %zu", strlen(s));
        free(s);
        s = strdup("short");
        CHECK(tool_output_bound(&s, 500) == 0 && streq(s, "short"), "short text untouched");
        free(s);
        s = strdup("äääääääääääääääääääää");
        CHECK(tool_output_bound(&s, 9) == 0 && streq(s, "ääää"), "tiny bound cuts on UTF-8: %s", s);
        free(s);

        CHECK(workspace_tree(ws_fd, 100, &t) == 0 && contains(t, "src/ (2 files)\n  main.c\n") &&
              contains(t, "node_modules/ (not shown)") && !contains(t, ".git") && contains(t, "etc-link -> /etc"),
              "tree: %s", L(t));
        free(t);
        CHECK(workspace_tree(ws_fd, 2, &t) == 0 && contains(t, "[... 2 of "), "tree bounded");
        free(t);

        t = (char *) 1;
        CHECK(workspace_agent_instructions(ws_fd, 100, &t) == 0 && !t, "no instructions");
        put("AGENTS.md", "Run meson test.\n");
        CHECK(workspace_agent_instructions(ws_fd, 100, &t) == 0 && streq_ptr(t, "Run meson test.\n"), "AGENTS.md read");
        free(t);
        put(".agentfab.md", "Be brief.\n");
        CHECK(workspace_agent_instructions(ws_fd, 100, &t) == 0 && contains(t, "# AGENTS.md\n\nRun meson test.\n") &&
              contains(t, "# .agentfab.md\n\nBe brief.\n"), "both read: %s", L(t));
        free(t);
        unlinkat(ws_fd, ".agentfab.md", 0);
        char long_text[400];
        memset(long_text, 'z', sizeof(long_text) - 1);
        long_text[sizeof(long_text) - 1] = '\0';
        put("AGENTS.md", long_text);
        CHECK(workspace_agent_instructions(ws_fd, 200, &t) == 0 && t && strlen(t) <= 200 && contains(t, "cut"),
              "instructions bounded");
        free(t);
        unlinkat(ws_fd, "AGENTS.md", 0);
        symlinkat("/etc/passwd", ws_fd, "AGENTS.md");
        t = (char *) 1;
        CHECK(workspace_agent_instructions(ws_fd, 200, &t) == 0 && !t, "a symlink out is ignored");
        unlinkat(ws_fd, "AGENTS.md", 0);
}

int main(void) {
        setup();

        test_paths();
        test_parse();
        test_schema();
        test_read();
        test_write_edit();
        test_list_search();
        test_bound_tree_instructions();

        close(ws_fd);
        rm_rf_at(AT_FDCWD, top);
        return tap_done();
}
