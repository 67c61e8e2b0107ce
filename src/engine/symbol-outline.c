/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "symbol-outline.h"
#include "tools-internal.h"
#include "workspace-path.h"

/* Bounds of the walk that lists the workspace's files, and of the words
 * read from the task's text. */
#define LIST_FILES_MAX     50000u
#define LIST_DEPTH_MAX     16u
#define LIST_DIR_ENTRIES   10000u
#define WORDS_MAX          4096u
#define WORD_LEN_MAX       512u

/* What a match is worth: a path named outright points harder than a
 * basename, which points harder than a word equal to a file's stem. */
enum {
        SCORE_PATH = 100,
        SCORE_PATH_TAIL = 80,
        SCORE_BASENAME = 60,
        SCORE_STEM = 25,
        SCORE_STEM_VARIANT = 15,
};

static void names_free(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

static int compare_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* A set of words: sorted, unique, bounded. */
typedef struct WordSet {
        char **w;
        size_t n, allocated;
} WordSet;

static void word_set_done(WordSet *s) {
        names_free(s->w, s->n);
        *s = (WordSet) {};
}

static int word_set_add(WordSet *s, const char *p, size_t l) {
        if (l == 0 || l > WORD_LEN_MAX || s->n >= WORDS_MAX)
                return 0;
        if (s->n >= s->allocated) {
                size_t na = MAX(s->allocated * 2, (size_t) 32);
                char **t = reallocarray(s->w, na, sizeof(char *));
                if (!t)
                        return -ENOMEM;
                s->w = t;
                s->allocated = na;
        }
        s->w[s->n] = strndup(p, l);
        if (!s->w[s->n])
                return -ENOMEM;
        s->n++;
        return 0;
}

static void word_set_seal(WordSet *s) {
        size_t k = 0;

        if (s->n == 0)
                return;
        qsort(s->w, s->n, sizeof(char *), compare_str);
        for (size_t i = 0; i < s->n; i++) {
                if (k > 0 && streq(s->w[k - 1], s->w[i])) {
                        free(s->w[i]);
                        continue;
                }
                s->w[k++] = s->w[i];
        }
        s->n = k;
}

static bool word_set_has(const WordSet *s, const char *w) {
        return s->n > 0 && bsearch(&w, s->w, s->n, sizeof(char *), compare_str);
}

static bool is_word_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                IN_SET(c, '_', '.', '/', '-');
}

static bool is_piece_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int add_lower(WordSet *s, const char *p, size_t l) {
        char buf[WORD_LEN_MAX + 1];

        if (l < 3 || l > WORD_LEN_MAX)
                return 0;
        for (size_t i = 0; i < l; i++)
                buf[i] = (char) ((p[i] >= 'A' && p[i] <= 'Z') ? p[i] - 'A' + 'a' : p[i]);
        return word_set_add(s, buf, l);
}

/* A test's name without what makes it one: "test_parser", "TestParser",
 * "parser_test", "parser_spec" all point to "parser". Lowercase p. */
static int add_variant(WordSet *s, const char *p, size_t l) {
        if (l > 5 && (strncmp(p, "test_", 5) == 0 || strncmp(p, "spec_", 5) == 0))
                p += 5, l -= 5;
        else if (l > 4 && strncmp(p, "test", 4) == 0)
                p += 4, l -= 4;
        if (l > 5 && (strncmp(p + l - 5, "_test", 5) == 0 || strncmp(p + l - 5, "_spec", 5) == 0))
                l -= 5;
        else if (l > 4 && (strncmp(p + l - 4, "test", 4) == 0 || strncmp(p + l - 4, "spec", 4) == 0))
                l -= 4;
        while (l > 0 && *p == '_')
                p++, l--;
        while (l > 0 && p[l - 1] == '_')
                l--;
        return add_lower(s, p, l);
}

/* The words of a task's text or a test's name: runs of letters, digits and
 * "_./-", without a leading "./" or "/workspace/" and trailing
 * punctuation; and their pieces (the runs of letters, digits and "_"),
 * lowercase, for the stems, and what they are without "test". */
typedef struct Words {
        WordSet words, pieces, variants;
} Words;

static void words_done(Words *w) {
        word_set_done(&w->words);
        word_set_done(&w->pieces);
        word_set_done(&w->variants);
}

static int words_add_text(Words *w, const char *text) {
        int r;

        for (const char *p = strempty(text); *p;) {
                if (!is_word_char(*p)) {
                        p++;
                        continue;
                }
                const char *s = p;
                while (*p && is_word_char(*p))
                        p++;
                size_t l = (size_t) (p - s);

                if (l >= 11 && strncmp(s, "/workspace/", 11) == 0)
                        s += 11, l -= 11;
                while (l >= 2 && strncmp(s, "./", 2) == 0)
                        s += 2, l -= 2;
                while (l > 0 && IN_SET(s[l - 1], '.', '/', '-'))
                        l--;
                r = word_set_add(&w->words, s, l);
                if (r < 0)
                        return r;

                for (size_t i = 0; i < l;) {
                        if (!is_piece_char(s[i])) {
                                i++;
                                continue;
                        }
                        size_t j = i;
                        while (j < l && is_piece_char(s[j]))
                                j++;
                        char low[WORD_LEN_MAX + 1];
                        size_t pl = j - i;
                        for (size_t k = 0; k < pl; k++)
                                low[k] = (char) ((s[i + k] >= 'A' && s[i + k] <= 'Z') ? s[i + k] - 'A' + 'a' : s[i + k]);
                        r = add_lower(&w->pieces, low, pl);
                        if (r >= 0)
                                r = add_variant(&w->variants, low, pl);
                        if (r < 0)
                                return r;
                        i = j;
                }
        }
        return 0;
}

static void words_seal(Words *w) {
        word_set_seal(&w->words);
        word_set_seal(&w->pieces);
        word_set_seal(&w->variants);
}

/* Whether the words name what a test file tests: "parser" for
 * test_parser.py. stem is lowercase, of l bytes. */
static bool stem_variant_named(const Words *w, const char *stem, size_t l) {
        WordSet v = {};
        bool found;

        if (add_variant(&v, stem, l) < 0 || v.n == 0 || streq(v.w[0], stem)) {
                word_set_done(&v);
                return false;
        }
        found = word_set_has(&w->pieces, v.w[0]);
        word_set_done(&v);
        return found;
}

/* How much words point to path. */
static int score_path(const Words *w, const char *path, int path_score, int tail_score, int base_score,
                      int stem_score, int variant_score) {
        const char *base = strrchr(path, '/');
        char stem[WORD_LEN_MAX + 1];
        int score = 0;

        base = base ? base + 1 : path;
        if (word_set_has(&w->words, path))
                score += path_score;
        else
                for (const char *p = strchr(path, '/'); p; p = strchr(p + 1, '/'))
                        if (strchr(p + 1, '/') && word_set_has(&w->words, p + 1)) {
                                score += tail_score;
                                break;
                        }
        if (word_set_has(&w->words, base))
                score += base_score;

        /* The stem: the name up to its last dot (all of a dot-file's). */
        const char *dot = strrchr(base + 1, '.');
        size_t l = dot ? (size_t) (dot - base) : strlen(base);
        if (base[0] && l >= 3 && l <= WORD_LEN_MAX) {
                for (size_t i = 0; i < l; i++)
                        stem[i] = (char) ((base[i] >= 'A' && base[i] <= 'Z') ? base[i] - 'A' + 'a' : base[i]);
                stem[l] = '\0';
                if (word_set_has(&w->pieces, stem))
                        score += stem_score;
                else if (word_set_has(&w->variants, stem) || stem_variant_named(w, stem, l))
                        score += variant_score;
        }
        return score;
}

typedef struct Ranked {
        const char *path;
        int score;
} Ranked;

static int ranked_compare(const void *a, const void *b) {
        const Ranked *x = a, *y = b;
        size_t lx = strlen(x->path), ly = strlen(y->path);

        if (x->score != y->score)
                return x->score > y->score ? -1 : 1;
        if (lx != ly)
                return lx < ly ? -1 : 1;   /* the shallower of two alike */
        return strcmp(x->path, y->path);
}

int outline_rank_files(char **files, const char *requirement, char **failures, unsigned max, char ***ret) {
        _cleanup_free_ Ranked *ranked = NULL;
        _cleanup_strv_free_ char **out = NULL;
        _cleanup_(words_done) Words req = {}, fail = {};
        size_t n = strv_length(files), k = 0;
        int r;

        assert(ret);

        r = words_add_text(&req, requirement);
        for (size_t i = 0; r >= 0 && failures && failures[i]; i++)
                r = words_add_text(&fail, failures[i]);
        if (r < 0)
                return r;
        words_seal(&req);
        words_seal(&fail);

        if (n > 0) {
                ranked = calloc(n, sizeof(Ranked));
                if (!ranked)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                int s = score_path(&req, files[i], SCORE_PATH, SCORE_PATH_TAIL, SCORE_BASENAME, SCORE_STEM,
                                   SCORE_STEM_VARIANT) +
                        /* A failed test names its own file, and by its name
                         * often the file it tests: a little less than the
                         * task's own words. */
                        score_path(&fail, files[i], SCORE_PATH - 10, SCORE_PATH_TAIL - 10, SCORE_BASENAME - 10,
                                   SCORE_STEM - 5, SCORE_STEM_VARIANT - 5);
                if (s > 0)
                        ranked[k++] = (Ranked) { .path = files[i], .score = s };
        }
        if (k > 0)
                qsort(ranked, k, sizeof(Ranked), ranked_compare);

        k = MIN(k, (size_t) max);
        if (k > 0) {
                out = calloc(k + 1, sizeof(char *));
                if (!out)
                        return -ENOMEM;
                for (size_t i = 0; i < k; i++) {
                        out[i] = strdup(ranked[i].path);
                        if (!out[i])
                                return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(out);
        return 0;
}

/* ---- The workspace's files ---- */

typedef struct FileList {
        char **files;
        size_t n, allocated;
        dev_t dev;
} FileList;

static int list_dir(FileList *l, int fd, const char *prefix, unsigned depth) {
        char **names = NULL;
        size_t n = 0;
        bool too_many = false;
        DIR *d;
        int r;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        r = dir_read_names(d, LIST_DIR_ENTRIES, compare_str, &names, &n, &too_many);
        for (size_t i = 0; r >= 0 && i < n && l->n < LIST_FILES_MAX; i++) {
                _cleanup_free_ char *rel = NULL;
                struct stat st;

                if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != l->dev)
                        continue;
                if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                        continue;
                if (S_ISDIR(st.st_mode) && (depth + 1 >= LIST_DEPTH_MAX || dir_is_bulky(names[i])))
                        continue;
                if (prefix ? asprintf(&rel, "%s/%s", prefix, names[i]) < 0 : !(rel = strdup(names[i]))) {
                        r = -ENOMEM;
                        break;
                }
                if (S_ISREG(st.st_mode)) {
                        if (l->n + 1 >= l->allocated) {
                                size_t na = MAX(l->allocated * 2, (size_t) 256);
                                char **t = reallocarray(l->files, na, sizeof(char *));
                                if (!t) {
                                        r = -ENOMEM;
                                        break;
                                }
                                l->files = t;
                                l->allocated = na;
                        }
                        l->files[l->n++] = TAKE_PTR(rel);
                        l->files[l->n] = NULL;
                        continue;
                }

                /* SECURITY: never through a symlink, never onto another
                 * file system; what was opened is checked, not what was
                 * looked at. */
                int child = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                struct stat cst;
                if (child < 0)
                        continue;
                if (fstat(child, &cst) < 0 || cst.st_dev != l->dev) {
                        safe_close(child);
                        continue;
                }
                r = list_dir(l, child, rel, depth + 1);
        }
        names_free(names, n);
        closedir(d);
        return r;
}

int outline_list_files(int ws_fd, char ***ret) {
        FileList l = {};
        struct stat st;
        int fd, r;

        assert(ret);

        fd = openat(ws_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        l.dev = st.st_dev;
        r = list_dir(&l, fd, NULL, 0);
        if (r < 0) {
                names_free(l.files, l.n);
                return r;
        }
        *ret = l.files;
        return 0;
}

/* A file ctags may be given: a regular text file, small enough, whose
 * name shows as it is. */
static bool file_fits(int ws_fd, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *copy = NULL;
        char head[8192];
        struct stat st;
        ssize_t k;

        if (!string_is_safe(path, false) || path[0] == '-')
                return false;
        copy = strdup(path);
        if (!copy)
                return false;
        utf8_sanitize(copy, strlen(copy));
        if (!streq(copy, path))
                return false;
        if (workspace_open(ws_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0, &fd) < 0)
                return false;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t) OUTLINE_FILE_SIZE_MAX)
                return false;
        k = read(fd, head, sizeof(head));
        return k >= 0 && !looks_binary(head, (size_t) k);
}

int outline_pick_files(int ws_fd, const char *requirement, char **failures, unsigned max, char ***ret) {
        _cleanup_strv_free_ char **all = NULL, **ranked = NULL, **out = NULL;
        size_t k = 0;
        int r;

        assert(ret);

        r = outline_list_files(ws_fd, &all);
        if (r < 0)
                return r;
        /* Some of the best may not fit: more are ranked than kept. */
        r = outline_rank_files(all, requirement, failures, max * 4, &ranked);
        if (r < 0)
                return r;
        for (size_t i = 0; ranked && ranked[i] && k < max; i++) {
                if (!file_fits(ws_fd, ranked[i]))
                        continue;
                r = strv_extend(&out, ranked[i]);
                if (r < 0)
                        return r;
                k++;
        }
        *ret = TAKE_PTR(out);
        return 0;
}

int outline_ctags_argv(char **files, char ***ret) {
        /* SECURITY: --options=NONE first, so that no option file is read:
         * not the repository's own .ctags.d/, which could make ctags write
         * its tags into the workspace or read other files. ctags knows no
         * "--": no file picked begins with "-" (file_fits()). The pattern
         * field (P) is left out, as it repeats a whole line of the file,
         * which may be huge. In file order (--sort=no), so that a scope
         * comes before what it holds. */
        static const char *const head[] = {
                "ctags", "--options=NONE", "--quiet=yes", "--output-format=json", "--fields=+nKS-P", "--sort=no",
                "-f", "-",
        };
        _cleanup_strv_free_ char **argv = NULL;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(head); i++) {
                r = strv_extend(&argv, head[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; files && files[i]; i++) {
                r = strv_extend(&argv, files[i]);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(argv);
        return 0;
}

/* ---- ctags' output ---- */

void outline_done(Outline *o) {
        if (!o)
                return;
        for (size_t i = 0; i < o->n; i++) {
                free(o->symbols[i].name);
                free(o->symbols[i].kind);
                free(o->symbols[i].signature);
        }
        free(o->symbols);
        *o = (Outline) {};
}

/* A string of ctags' as shown: one line of valid UTF-8, at most max bytes
 * and "…" when cut. */
static char *shown_string(json_object *v, size_t max) {
        const char *s = json_object_get_string(v);
        size_t l = (size_t) json_object_get_string_len(v), keep = l;
        bool cut = false;
        char *c;

        if (l > max) {
                keep = max;
                /* Not in the middle of a character. */
                while (keep > 0 && ((unsigned char) s[keep] & 0xC0) == 0x80)
                        keep--;
                cut = true;
        }
        c = malloc(keep + sizeof("…"));
        if (!c)
                return NULL;
        memcpy(c, s, keep);
        c[keep] = '\0';
        utf8_sanitize(c, keep);
        for (size_t i = 0; i < keep; i++)
                if ((unsigned char) c[i] < 0x20 || c[i] == 0x7F)
                        c[i] = '?';
        utf8_blank_c1(c);
        if (cut)
                strcat(c, "…");
        return c;
}

static unsigned scope_depth(json_object *scope) {
        const char *s;
        unsigned d = 1;

        if (!scope || !json_object_is_type(scope, json_type_string))
                return 0;
        s = json_object_get_string(scope);
        if (isempty(s))
                return 0;
        /* "Outer.Inner" (Python, Java), "outer::inner" (C++, Rust). */
        for (const char *p = s; *p && d < 4; p++) {
                if (p[0] == ':' && p[1] == ':') {
                        p++;
                        d++;
                } else if (*p == '.')
                        d++;
        }
        return d;
}

static int parse_line(const char *line, size_t l, char **files, Outline *o) {
        _cleanup_(json_object_putp) json_object *j = NULL;
        _cleanup_free_ char *copy = NULL;
        json_object *type, *name, *path, *lineno, *kind, *scope, *signature;
        size_t file = SIZE_MAX;
        int64_t n;

        if (l == 0 || l > OUTLINE_LINE_MAX || memchr(line, '\0', l))
                return 0;
        copy = strndup(line, l);
        if (!copy)
                return -ENOMEM;
        j = json_tokener_parse(copy);
        if (!j || !json_object_is_type(j, json_type_object))
                return 0;
        if (!json_object_object_get_ex(j, "_type", &type) || !json_object_is_type(type, json_type_string) ||
            !streq(json_object_get_string(type), "tag"))
                return 0;
        if (!json_object_object_get_ex(j, "name", &name) || !json_object_is_type(name, json_type_string) ||
            json_object_get_string_len(name) == 0)
                return 0;
        if (!json_object_object_get_ex(j, "path", &path) || !json_object_is_type(path, json_type_string))
                return 0;
        for (size_t i = 0; files && files[i]; i++)
                if (streq(files[i], json_object_get_string(path))) {
                        file = i;
                        break;
                }
        if (file == SIZE_MAX)
                return 0;
        if (!json_object_object_get_ex(j, "line", &lineno) || !json_object_is_type(lineno, json_type_int))
                return 0;
        n = json_object_get_int64(lineno);
        if (n <= 0 || n > (int64_t) UINT32_MAX)
                return 0;
        if (!json_object_object_get_ex(j, "kind", &kind) || !json_object_is_type(kind, json_type_string) ||
            json_object_get_string_len(kind) == 0)
                kind = NULL;
        if (!json_object_object_get_ex(j, "scope", &scope))
                scope = NULL;
        if (!json_object_object_get_ex(j, "signature", &signature) ||
            !json_object_is_type(signature, json_type_string) || json_object_get_string_len(signature) == 0)
                signature = NULL;

        if (o->n >= OUTLINE_SYMBOLS_MAX) {
                o->dropped++;
                return 1;
        }
        if (o->n % 64 == 0) {
                OutlineSymbol *t = reallocarray(o->symbols, o->n + 64, sizeof(OutlineSymbol));
                if (!t)
                        return -ENOMEM;
                o->symbols = t;
        }
        OutlineSymbol *s = &o->symbols[o->n];
        *s = (OutlineSymbol) {
                .name = shown_string(name, OUTLINE_NAME_MAX),
                .kind = kind ? shown_string(kind, OUTLINE_KIND_MAX) : strdup("symbol"),
                .signature = signature ? shown_string(signature, OUTLINE_SIGNATURE_MAX) : NULL,
                .file = file,
                .line = (unsigned) n,
                .depth = scope_depth(scope),
        };
        o->n++;   /* outline_done() frees what it holds */
        if (!s->name || !s->kind || (signature && !s->signature))
                return -ENOMEM;
        return 1;
}

int outline_parse(const char *text, size_t size, char **files, Outline *ret) {
        Outline o = {};
        int r;

        assert(ret);

        for (size_t i = 0; text && i < size;) {
                const char *nl = memchr(text + i, '\n', size - i);
                size_t l = nl ? (size_t) (nl - (text + i)) : size - i;

                r = parse_line(text + i, l, files, &o);
                if (r < 0) {
                        outline_done(&o);
                        return r;
                }
                if (r == 0 && l > 0)
                        o.skipped++;
                i += l + 1;
        }
        *ret = o;
        return 0;
}

/* ---- The text for the model ---- */

#define MORE_RESERVE 32u   /* "  … 4096 more\n", "… 20 more files\n" */
#define FILE_SHARE_MIN 160u

int outline_format(const Outline *o, char **files, size_t max, char **ret) {
        _cleanup_(buf_done) Buf b = {};
        size_t n_files = strv_length(files), with = 0, shown_files = 0, left;
        _cleanup_free_ size_t *count = NULL;
        int r;

        assert(o);
        assert(ret);

        *ret = NULL;
        if (n_files == 0 || o->n == 0 || max <= MORE_RESERVE)
                return 0;
        count = calloc(n_files, sizeof(size_t));
        if (!count)
                return -ENOMEM;
        for (size_t i = 0; i < o->n; i++)
                if (o->symbols[i].file < n_files)
                        count[o->symbols[i].file]++;
        for (size_t f = 0; f < n_files; f++)
                with += count[f] > 0;

        left = max - MORE_RESERVE;
        for (size_t f = 0, k = 0; f < n_files; f++) {
                size_t share, used, shown = 0, header = strlen(files[f]) + 2;

                if (count[f] == 0)
                        continue;
                /* A file's share of what is left, but enough for a few
                 * symbols: better fewer files that show something than
                 * names only. */
                share = MIN(MAX(left / (with - k), (size_t) FILE_SHARE_MIN), left);
                k++;
                if (header + MORE_RESERVE > share)
                        break;
                r = buf_printf(&b, "%s:\n", files[f]);
                if (r < 0)
                        return r;
                used = header;
                for (size_t i = 0; i < o->n; i++) {
                        const OutlineSymbol *s = &o->symbols[i];
                        char num[32];
                        size_t len;

                        if (s->file != f)
                                continue;
                        len = 2 * (s->depth + 1) + strlen(s->kind) + 1 + strlen(s->name) + strlen(strempty(s->signature)) +
                                (size_t) snprintf(num, sizeof(num), " (line %u)\n", s->line);
                        bool last = shown + 1 == count[f];
                        if (used + len + (last ? 0 : MORE_RESERVE) > share)
                                break;
                        r = buf_printf(&b, "%*s%s %s%s%s", (int) (2 * (s->depth + 1)), "", s->kind, s->name,
                                       strempty(s->signature), num);
                        if (r < 0)
                                return r;
                        used += len;
                        shown++;
                }
                if (shown < count[f]) {
                        r = buf_printf(&b, "  … %zu more\n", count[f] - shown);
                        if (r < 0)
                                return r;
                        used += strlen("  … more\n") + 21;
                }
                left = left > used ? left - used : 0;
                shown_files++;
        }
        if (shown_files < with) {
                r = buf_printf(&b, "… %zu more files\n", with - shown_files);
                if (r < 0)
                        return r;
        }
        if (!b.s)
                return 0;
        return buf_steal(&b, ret);
}

size_t outline_budget_bytes(uint64_t context_tokens, unsigned bytes_per_token_milli) {
        uint64_t t = context_tokens == 0 ? OUTLINE_TOKENS_DEFAULT : context_tokens / 16;

        t = MAX(t, (uint64_t) OUTLINE_TOKENS_MIN);
        t = MIN(t, (uint64_t) OUTLINE_TOKENS_MAX);
        return (size_t) (t * MAX(bytes_per_token_milli, 1000u) / 1000u);
}
