/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "tools-internal.h"
#include "tools.h"
#include "workspace-path.h"

/* Bounds of the file tools that callers do not choose. */
#define SEARCH_FILE_MAX_BYTES (1024U * 1024U)
#define SEARCH_TOTAL_MAX_BYTES (256U * 1024U * 1024U)
#define SEARCH_LINE_SHOWN 240U
#define WALK_VISITS_MAX 200000U
#define WALK_DIR_ENTRIES_MAX 65536U
#define LIST_MAX_DEPTH 24U
#define TREE_MAX_DEPTH 3U
#define SYMLINK_TARGET_SHOWN 200U

/* The tools that walk the workspace (list_files, search) and what the system
 * prompt shows of it (its tree, the repository's agent instructions). */

/* ---- Directory walks ---- */

/* Directories of generated or downloaded files: listed, not descended when
 * met during a walk (naming them as the path still works). */
bool dir_is_bulky(const char *name) {
        static const char *const table[] = {
                "node_modules", "bower_components", "__pycache__", ".venv", "venv", ".tox", ".nox",
                ".mypy_cache", ".pytest_cache", ".ruff_cache", ".gradle", ".next", ".cache", "target", "vendor",
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(name, table[i]))
                        return true;
        return false;
}

#define WALK_STOP 1
#define WALK_NO_DESCEND 2

typedef struct Walk Walk;
struct Walk {
        dev_t dev;
        unsigned max_depth;
        unsigned visited;
        bool too_many;
        /* Called for each entry, sorted per directory, parents before their
         * children. Returns <0 to fail, WALK_STOP or WALK_NO_DESCEND. */
        int (*entry)(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth);
        void *userdata;
};

static int name_compare(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void names_free(char ***names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free((*names)[i]);
        *names = mfree_ptr(*names);
}

int dir_read_names(DIR *d, size_t max, int (*compare)(const void *, const void *), char ***ret, size_t *ret_n,
                   bool *too_many) {
        char **names = NULL;
        size_t n = 0, allocated = 0;
        int r = 0;

        for (struct dirent *de; (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                /* SECURITY: the repository metadata is never shown or searched. */
                if (strcasecmp(de->d_name, ".git") == 0)
                        continue;
                if (n >= max) {
                        *too_many = true;
                        break;
                }
                if (n >= allocated) {
                        size_t na = MAX(allocated * 2, (size_t) 64);
                        char **t = realloc(names, na * sizeof(char *));
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        names = t;
                        allocated = na;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        /* An empty directory has no array at all: qsort() must not see NULL. */
        if (n > 0)
                qsort(names, n, sizeof(char *), compare);
        *ret = names;
        *ret_n = n;
        return r;
}

/* Takes ownership of fd. SECURITY: each level is opened with O_NOFOLLOW |
 * O_DIRECTORY relative to its parent, symlinks are never descended, nor are
 * other file systems, and depth and entries are bounded. */
static int walk_dir(Walk *w, int fd, const char *prefix, unsigned depth) {
        _cleanup_free_ char **names = NULL;
        size_t n = 0;
        DIR *d;
        int r;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }

        r = dir_read_names(d, WALK_DIR_ENTRIES_MAX, name_compare, &names, &n, &w->too_many);

        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *rel = NULL;
                struct stat st;

                if (++w->visited > WALK_VISITS_MAX) {
                        w->too_many = true;
                        r = WALK_STOP;
                        break;
                }
                if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;

                if (streq(prefix, "."))
                        rel = strdup(names[i]);
                else if (asprintf(&rel, "%s/%s", prefix, names[i]) < 0)
                        rel = NULL;
                if (!rel) {
                        r = -ENOMEM;
                        break;
                }

                r = w->entry(w, dirfd(d), names[i], rel, &st, depth);
                if (r < 0 || r == WALK_STOP)
                        break;
                if (!S_ISDIR(st.st_mode) || r == WALK_NO_DESCEND || st.st_dev != w->dev || depth + 1 >= w->max_depth) {
                        r = 0;
                        continue;
                }

                int child = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                if (child < 0) {
                        r = 0;
                        continue;
                }
                /* The entry may have been swapped since fstatat(): check
                 * what was opened, not what was looked at. */
                struct stat cst;
                if (fstat(child, &cst) < 0 || cst.st_dev != w->dev) {
                        safe_close(child);
                        r = 0;
                        continue;
                }
                r = walk_dir(w, child, rel, depth + 1);
                if (r < 0 || r == WALK_STOP)
                        break;
                r = 0;
        }

        names_free(&names, n);
        closedir(d);
        return r;
}

/* Opens the directory (or, when allow_file, the file) a walk starts from. */
static int walk_open_start(int ws_fd, ToolKind k, const char *path, bool allow_file,
                           int *ret_fd, struct stat *ret_st, char **ret_prefix, char **ret_output) {
        _cleanup_free_ char *prefix = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        path = path ?: ".";

        r = workspace_path_normalize(path, &prefix);
        if (r >= 0)
                r = workspace_open(ws_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | (allow_file ? 0 : O_DIRECTORY), 0, &fd);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOTDIR && !allow_file) {
                _cleanup_free_ char *shown = quote_short(path);
                if (!shown)
                        return -ENOMEM;
                return tool_message(ret_output, r, "%s: '%s' is not a directory; use read_file for files",
                                  tool_kind_to_string(k), shown);
        }
        if (r < 0)
                return tool_path_error(k, path, r, ret_output);

        if (fstat(fd, ret_st) < 0)
                return tool_path_error(k, path, -errno, ret_output);

        /* SECURITY: the walks skip .git by name; a symlink to it given as
         * the start must not list or search it either. */
        if (S_ISDIR(ret_st->st_mode)) {
                r = workspace_dir_in_git(ws_fd, fd);
                if (r < 0)
                        return tool_path_error(k, path, r, ret_output);
                if (r > 0)
                        return tool_path_error(k, path, -EPERM, ret_output);
        }

        *ret_fd = TAKE_FD(fd);
        *ret_prefix = TAKE_PTR(prefix);
        return 0;
}

int readlink_shown(int dir_fd, const char *name, char **ret) {
        char target[PATH_MAX];
        ssize_t l = readlinkat(dir_fd, name, target, sizeof(target) - 1);
        if (l < 0)
                l = 0;
        target[l] = '\0';
        *ret = strshorten_line(target, SYMLINK_TARGET_SHOWN);
        return *ret ? 0 : -ENOMEM;
}

/* ---- list_files ---- */

typedef struct ListContext {
        Buf out;
        unsigned n, max_entries;
        size_t max_output;
        bool cut;
} ListContext;

static int list_entry(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth) {
        ListContext *c = w->userdata;
        int r;

        if (c->n >= c->max_entries || c->out.n >= c->max_output) {
                c->cut = true;
                return WALK_STOP;
        }
        c->n++;

        if (S_ISLNK(st->st_mode)) {
                _cleanup_free_ char *target = NULL;
                r = readlink_shown(dir_fd, name, &target);
                if (r < 0)
                        return r;
                return buf_printf(&c->out, "%s -> %s\n", relpath, target);
        }
        if (S_ISDIR(st->st_mode)) {
                if (dir_is_bulky(name)) {
                        r = buf_printf(&c->out, "%s/ (not listed; name it as the path to see inside)\n", relpath);
                        return r < 0 ? r : WALK_NO_DESCEND;
                }
                return buf_printf(&c->out, "%s/\n", relpath);
        }
        return buf_printf(&c->out, "%s\n", relpath);
}

int tool_list_files(int ws_fd, const ToolCallArgs *a, unsigned max_entries, size_t max_output, char **ret_output) {
        _cleanup_free_ char *prefix = NULL;
        ListContext c = { .max_entries = max_entries, .max_output = max_output };
        struct stat st;
        int fd, r;

        assert(a);
        assert(ret_output);

        r = walk_open_start(ws_fd, TOOL_LIST_FILES, a->path, false, &fd, &st, &prefix, ret_output);
        if (r < 0)
                return r;

        Walk w = { .dev = st.st_dev, .max_depth = LIST_MAX_DEPTH, .entry = list_entry, .userdata = &c };
        r = walk_dir(&w, fd, prefix, 0);
        if (r < 0) {
                buf_done(&c.out);
                return r == -ENOMEM ? r : tool_path_error(TOOL_LIST_FILES, a->path, r, ret_output);
        }

        if (c.n == 0)
                r = buf_printf(&c.out, "(%s is empty)\n", streq(prefix, ".") ? "the workspace" : "the directory");
        else if (c.cut || w.too_many)
                r = buf_printf(&c.out, "[... listing cut after %u entries; list a subdirectory to see more ...]\n", c.n);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }

        r = buf_steal(&c.out, ret_output);
        if (r < 0)
                return r;
        return tool_output_bound(ret_output, max_output);
}

/* ---- search ---- */

typedef struct SearchContext {
        const ToolCallArgs *args;
        regex_t regex;
        size_t pattern_len;
        Buf out;
        unsigned matches, max_matches, files;
        size_t max_output, scanned;
        bool cut;
} SearchContext;

static bool search_line_matches(SearchContext *c, char *line, size_t l) {
        if (!c->args->regex)
                return memmem(line, l, c->args->pattern, c->pattern_len) != NULL;

        /* regexec() wants a string: end the line there for the moment. */
        char saved = line[l];
        line[l] = '\0';
        bool m = regexec(&c->regex, line, 0, NULL, 0) == 0;
        line[l] = saved;
        return m;
}

/* Searches the file open as fd. Returns WALK_STOP once enough is found. */
static int search_fd(SearchContext *c, int fd, const char *relpath) {
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t size;
        int r;

        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SEARCH_FILE_MAX_BYTES)
                return 0;
        if (c->scanned >= SEARCH_TOTAL_MAX_BYTES) {
                c->cut = true;
                return WALK_STOP;
        }

        r = read_fd_bounded(fd, SEARCH_FILE_MAX_BYTES, &data, &size, NULL);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        c->scanned += size;
        c->files++;
        if (looks_binary(data, size))
                return 0;

        unsigned line = 1;
        for (char *p = data, *end = data + size; p < end; line++) {
                char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);

                if (search_line_matches(c, p, l)) {
                        if (c->matches >= c->max_matches || c->out.n >= c->max_output) {
                                c->cut = true;
                                return WALK_STOP;
                        }
                        c->matches++;

                        char saved = p[l];
                        p[l] = '\0';
                        _cleanup_free_ char *text = strshorten_line(p, SEARCH_LINE_SHOWN);
                        p[l] = saved;
                        if (!text)
                                return -ENOMEM;
                        r = buf_printf(&c->out, "%s:%u: %s\n", relpath, line, text);
                        if (r < 0)
                                return r;
                }
                p = nl ? nl + 1 : end;
        }
        return 0;
}

static int search_entry(Walk *w, int dir_fd, const char *name, const char *relpath, const struct stat *st, unsigned depth) {
        SearchContext *c = w->userdata;

        if (S_ISDIR(st->st_mode))
                return dir_is_bulky(name) ? WALK_NO_DESCEND : 0;
        /* SECURITY: symlinks are skipped, never followed; their targets
         * inside the workspace are searched under their own names. */
        if (!S_ISREG(st->st_mode) || st->st_size > SEARCH_FILE_MAX_BYTES)
                return 0;

        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        return search_fd(c, fd, relpath);
}

int tool_search(int ws_fd, const ToolCallArgs *a, unsigned max_matches, size_t max_output, char **ret_output) {
        _cleanup_free_ char *prefix = NULL, *shown = NULL;
        SearchContext c = { .args = a, .max_matches = max_matches, .max_output = max_output };
        _cleanup_close_ int fd = -EBADF;
        bool compiled = false;
        struct stat st;
        int r;

        assert(a);
        assert(ret_output);

        if (isempty(a->pattern))
                return tool_message(ret_output, -EINVAL, "search: 'pattern' must not be empty");
        shown = quote_short(a->pattern);
        if (!shown)
                return -ENOMEM;
        c.pattern_len = strlen(a->pattern);

        if (a->regex) {
                r = regcomp(&c.regex, a->pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB);
                if (r != 0) {
                        char e[256];
                        regerror(r, &c.regex, e, sizeof(e));
                        return tool_message(ret_output, -EINVAL, "search: '%s' is not a valid extended regular "
                                          "expression: %s", shown, e);
                }
                compiled = true;
        }

        r = walk_open_start(ws_fd, TOOL_SEARCH, a->path, true, &fd, &st, &prefix, ret_output);
        if (r >= 0) {
                if (S_ISDIR(st.st_mode)) {
                        Walk w = { .dev = st.st_dev, .max_depth = LIST_MAX_DEPTH, .entry = search_entry, .userdata = &c };
                        r = walk_dir(&w, TAKE_FD(fd), prefix, 0);
                        if (w.too_many)
                                c.cut = true;
                } else if (S_ISREG(st.st_mode))
                        r = search_fd(&c, fd, prefix);
                else
                        r = tool_message(ret_output, -EBADFD, "search: '%s' is not a regular file or directory", prefix);
        }
        if (compiled)
                regfree(&c.regex);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }

        if (c.matches == 0)
                r = buf_printf(&c.out, "no matches for '%s' (%u file%s searched)\n", shown, c.files, c.files == 1 ? "" : "s");
        else if (c.cut)
                r = buf_printf(&c.out, "[... search stopped after %u matches; narrow the pattern or the path ...]\n", c.matches);
        if (r < 0) {
                buf_done(&c.out);
                return r;
        }

        r = buf_steal(&c.out, ret_output);
        if (r < 0)
                return r;
        return tool_output_bound(ret_output, max_output);
}

/* ---- For the system prompt ---- */

typedef struct StringPair {
        char *s[2];
} StringPair;

static void strings_free(StringPair *p) {
        free(p->s[0]);
        free(p->s[1]);
}

int workspace_agent_instructions(int ws_fd, size_t max, char **ret) {
        static const char *const names[] = { "AGENTS.md", ".agentfab.md" };
        _cleanup_(strings_free) StringPair texts = {};
        bool truncated[ELEMENTSOF(names)] = {};
        size_t found = 0;
        int r;

        assert(ret);

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                size_t size;

                r = workspace_open(ws_fd, names[i], O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;

                r = read_fd_bounded(fd, max, &texts.s[i], &size, &truncated[i]);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        continue;
                found++;
        }

        if (found == 0) {
                *ret = NULL;
                return 0;
        }

        _cleanup_(buf_done) Buf b = {};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                if (!texts.s[i])
                        continue;
                if (found > 1 && buf_printf(&b, "%s# %s\n\n", b.n > 0 ? "\n" : "", names[i]) < 0)
                        return -ENOMEM;
                if (buf_puts(&b, texts.s[i]) < 0)
                        return -ENOMEM;
                if (truncated[i] && buf_printf(&b, "\n[... %s cut at %zu bytes ...]\n", names[i], max) < 0)
                        return -ENOMEM;
        }

        /* Both together may still be twice max: cut the whole. */
        r = buf_steal(&b, ret);
        if (r < 0)
                return r;
        return tool_output_bound(ret, max);
}

