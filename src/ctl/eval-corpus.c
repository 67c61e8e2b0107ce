/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval-corpus.h"
#include "fs-util.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

#define CORPUS_MAX_TASKS 10000u
#define TASK_JSON_MAX (256u * 1024u)
#define GRADE_TIMEOUT_DEFAULT_SEC 300u

static bool task_name_is_valid(const char *s) {
        if (isempty(s) || strlen(s) > 128 || s[0] == '.')
                return false;
        for (const char *p = s; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *p))
                        return false;
        return true;
}

static void eval_task_done(EvalTask *t) {
        free(t->name);
        free(t->dir);
        free(t->goal);
        free(t->acceptance);
        free(t->test);
        free(t->grade);
        free(t->language);
        free(t->kind);
        free(t->environment);
        free(t->reason);
        strv_free(t->files);
        strv_free(t->limits);
}

void eval_corpus_done(EvalCorpus *c) {
        for (size_t i = 0; i < c->n_tasks; i++)
                eval_task_done(&c->tasks[i]);
        free(c->tasks);
        free(c->path);
        free(c->name);
        free(c->version);
        *c = (EvalCorpus) {};
}

bool eval_files_named(char **files, const char *text) {
        for (char **f = files; f && *f; f++) {
                const char *base = strrchr(*f, '/');
                if (!strstr(text, *f) && !strstr(text, base ? base + 1 : *f))
                        return false;
        }
        return true;
}

/* A string member: copied, or NULL when missing; -EINVAL if of another type. */
static int get_string(json_object *o, const char *key, bool required, char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) {
                *ret = NULL;
                return required ? -EINVAL : 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return -EINVAL;
        *ret = strdup(json_object_get_string(v));
        return *ret ? 0 : -ENOMEM;
}

static int task_parse(json_object *o, EvalTask *t, const char **ret_what) {
        json_object *v;
        int r;

        static const char *const keys[] = { "goal", "acceptance", "test", "grade", "language", "kind", "files",
                                            "environment", "limits", "solvable", "reason", "timeout" };
        json_object_object_foreach(o, key, val) {
                bool known = false;
                (void) val;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                        known = known || streq(key, keys[i]);
                if (!known)
                        return *ret_what = "an unknown key", -EINVAL;
        }

        if ((r = get_string(o, "goal", true, &t->goal)) < 0 || isempty(t->goal))
                return *ret_what = "goal", r < 0 ? r : -EINVAL;
        if ((r = get_string(o, "acceptance", false, &t->acceptance)) < 0)
                return *ret_what = "acceptance", r;
        if ((r = get_string(o, "test", true, &t->test)) < 0 || isempty(t->test))
                return *ret_what = "test", r < 0 ? r : -EINVAL;
        if ((r = get_string(o, "grade", false, &t->grade)) < 0)
                return *ret_what = "grade", r;
        if ((r = get_string(o, "language", true, &t->language)) < 0)
                return *ret_what = "language", r;
        if ((r = get_string(o, "kind", true, &t->kind)) < 0)
                return *ret_what = "kind", r;
        if ((r = get_string(o, "environment", false, &t->environment)) < 0)
                return *ret_what = "environment", r;
        if ((r = get_string(o, "reason", false, &t->reason)) < 0)
                return *ret_what = "reason", r;

        t->solvable = true;
        if (json_object_object_get_ex(o, "solvable", &v)) {
                if (!json_object_is_type(v, json_type_boolean))
                        return *ret_what = "solvable", -EINVAL;
                t->solvable = json_object_get_boolean(v);
        }

        t->timeout_sec = GRADE_TIMEOUT_DEFAULT_SEC;
        if (json_object_object_get_ex(o, "timeout", &v)) {
                int64_t n = json_object_get_int64(v);
                if (!json_object_is_type(v, json_type_int) || n < 1 || n > 24 * 3600)
                        return *ret_what = "timeout", -EINVAL;
                t->timeout_sec = (unsigned) n;
        }

        if (json_object_object_get_ex(o, "files", &v)) {
                if (!json_object_is_type(v, json_type_array))
                        return *ret_what = "files", -EINVAL;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *f = json_object_array_get_idx(v, i);
                        if (!json_object_is_type(f, json_type_string) || json_object_get_string_len(f) == 0)
                                return *ret_what = "files", -EINVAL;
                        if (strv_extend(&t->files, json_object_get_string(f)) < 0)
                                return -ENOMEM;
                }
        }
        if (t->solvable && !t->files)
                return *ret_what = "files", -EINVAL;

        if (json_object_object_get_ex(o, "limits", &v)) {
                if (!json_object_is_type(v, json_type_object))
                        return *ret_what = "limits", -EINVAL;
                json_object_object_foreach(v, lkey, lval) {
                        char *s;
                        if (!json_object_is_type(lval, json_type_int) || json_object_get_int64(lval) < 0)
                                return *ret_what = "limits", -EINVAL;
                        if (asprintf(&s, "%s=%" PRId64, lkey, json_object_get_int64(lval)) < 0)
                                return -ENOMEM;
                        r = strv_extend(&t->limits, s);
                        free(s);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int read_json(int dir_fd, const char *name, json_object **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_file_at(dir_fd, name, TASK_JSON_MAX, &text, &size);
        if (r < 0)
                return r;
        r = json_parse_strict(text, size, ret);
        if (r < 0)
                return r;
        return json_object_is_type(*ret, json_type_object) ? 0 : -EBADMSG;
}

/* Whether name matches one of the comma-separated fnmatch(3) globs. */
static bool name_matches(const char *globs, const char *name) {
        _cleanup_free_ char *copy = strdup(globs);
        char *next = copy, *g;

        if (!copy)
                return false;
        while ((g = strsep(&next, ",")))
                if (fnmatch(g, name, 0) == 0)
                        return true;
        return false;
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int eval_corpus_load(const char *path, const char *glob, EvalCorpus *ret) {
        _cleanup_(eval_corpus_done) EvalCorpus c = {};
        _cleanup_json_ json_object *meta = NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_close_ int fd = -EBADF;
        char real[PATH_MAX];
        size_t n_names;
        DIR *d;
        int r;

        if (!realpath(path, real))
                return fprintf(stderr, "Corpus '%s': %m\n", path), -errno;
        fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return fprintf(stderr, "Corpus '%s': %m\n", path), -errno;
        r = read_json(fd, "corpus.json", &meta);
        if (r < 0) {
                fprintf(stderr, "Corpus '%s': cannot read corpus.json: %s\n", path, strerror(-r));
                return r;
        }
        if (get_string(meta, "name", true, &c.name) < 0 || get_string(meta, "version", true, &c.version) < 0) {
                fprintf(stderr, "Corpus '%s': corpus.json needs the strings \"name\" and \"version\".\n", path);
                return -EINVAL;
        }
        c.path = strdup(real);
        if (!c.path)
                return -ENOMEM;

        d = xopendirat(fd, ".", 0);
        if (!d)
                return fprintf(stderr, "Corpus '%s': %m\n", path), -errno;
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] == '.' || faccessat(fd, de->d_name, F_OK, 0) < 0)
                        continue;
                _cleanup_free_ char *tj = NULL;
                if (asprintf(&tj, "%s/task.json", de->d_name) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
                if (faccessat(fd, tj, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (glob && !name_matches(glob, de->d_name))
                        continue;
                if (strv_length(names) >= CORPUS_MAX_TASKS || strv_extend(&names, de->d_name) < 0) {
                        closedir(d);
                        fprintf(stderr, "Corpus '%s': more than %u tasks.\n", path, CORPUS_MAX_TASKS);
                        return -E2BIG;
                }
        }
        closedir(d);
        n_names = strv_length(names);
        if (n_names == 0) {
                fprintf(stderr, "Corpus '%s' has no task%s%s%s.\n", path, glob ? " matching '" : "", strempty(glob),
                        glob ? "'" : "");
                return -ENOENT;
        }
        qsort(names, n_names, sizeof(char *), compare_names);

        c.tasks = calloc(n_names, sizeof(EvalTask));
        if (!c.tasks)
                return -ENOMEM;
        for (size_t i = 0; i < n_names; i++) {
                _cleanup_json_ json_object *o = NULL;
                _cleanup_free_ char *tj = NULL, *text = NULL;
                EvalTask *t = &c.tasks[c.n_tasks];
                const char *what = "task.json";

                if (!task_name_is_valid(names[i])) {
                        fprintf(stderr, "Corpus '%s': '%s' is not a task name (letters, digits, '.', '_', '-').\n",
                                path, names[i]);
                        return -EINVAL;
                }
                if (asprintf(&tj, "%s/task.json", names[i]) < 0)
                        return -ENOMEM;
                r = read_json(fd, tj, &o);
                if (r >= 0) {
                        c.n_tasks++;
                        r = task_parse(o, t, &what);
                }
                if (r < 0) {
                        fprintf(stderr, "Task '%s' of corpus '%s': %s: %s\n", names[i], path,
                                r == -EINVAL ? what : "task.json", r == -EINVAL ? "missing or malformed" : strerror(-r));
                        return r == -ENOMEM ? r : -EINVAL;
                }
                t->name = strdup(names[i]);
                if (!t->name || asprintf(&t->dir, "%s/%s", c.path, names[i]) < 0)
                        return -ENOMEM;
                if (asprintf(&text, "%s\n%s\n%s", t->goal, strempty(t->acceptance), t->test) < 0)
                        return -ENOMEM;
                t->files_named = eval_files_named(t->files, text);
                for (size_t j = 0; j < c.n_tasks - 1; j++)
                        if (streq(c.tasks[j].goal, t->goal)) {
                                fprintf(stderr, "Tasks '%s' and '%s' of corpus '%s' have the same goal: the built-in "
                                        "agents tell tasks apart by their goals.\n", c.tasks[j].name, t->name, path);
                                return -EINVAL;
                        }
        }

        *ret = c;
        c = (EvalCorpus) {};
        return 0;
}
