/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakers.h"
#include "dependencies.h"
#include "json-util.h"
#include "string-util.h"
#include "toml-walk.h"

static const char *basename_of(const char *path) {
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

ManifestKind manifest_kind_from_path(const char *path) {
        const char *b;

        if (isempty(path))
                return _MANIFEST_KIND_INVALID;
        b = basename_of(path);
        if (streq(b, "package.json"))
                return MANIFEST_PACKAGE_JSON;
        if (streq(b, "package-lock.json") || streq(b, "npm-shrinkwrap.json"))
                return MANIFEST_PACKAGE_LOCK;
        if (path_glob_match("requirements*.txt", b) || path_glob_match("constraints*.txt", b) ||
            path_glob_match("**/requirements/*.txt", path))
                return MANIFEST_REQUIREMENTS;
        if (streq(b, "pyproject.toml"))
                return MANIFEST_PYPROJECT;
        if (streq(b, "go.mod"))
                return MANIFEST_GO_MOD;
        if (streq(b, "Cargo.toml"))
                return MANIFEST_CARGO_TOML;
        if (streq(b, "Cargo.lock"))
                return MANIFEST_CARGO_LOCK;
        return _MANIFEST_KIND_INVALID;
}

Ecosystem manifest_kind_ecosystem(ManifestKind k) {
        switch (k) {
        case MANIFEST_PACKAGE_JSON:
        case MANIFEST_PACKAGE_LOCK:
                return ECOSYSTEM_NPM;
        case MANIFEST_REQUIREMENTS:
        case MANIFEST_PYPROJECT:
                return ECOSYSTEM_PYPI;
        case MANIFEST_GO_MOD:
                return ECOSYSTEM_GO;
        case MANIFEST_CARGO_TOML:
        case MANIFEST_CARGO_LOCK:
                return ECOSYSTEM_CRATES_IO;
        default:
                return _ECOSYSTEM_INVALID;
        }
}

void dependency_list_done(DependencyList *l) {
        for (size_t i = 0; l && i < l->n; i++) {
                free(l->entries[i].key);
                free(l->entries[i].name);
                free(l->entries[i].version);
        }
        if (l) {
                free(l->entries);
                *l = (DependencyList) {};
        }
}

/* PEP 503: lower case, every run of '-', '_', '.' one '-'. */
static char *pypi_normalize(const char *s, size_t n) {
        char *r = malloc(n + 1);
        size_t k = 0;

        if (!r)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '-' || c == '_' || c == '.') {
                        if (k > 0 && r[k - 1] == '-')
                                continue;
                        c = '-';
                }
                r[k++] = (char) tolower((unsigned char) c);
        }
        r[k] = '\0';
        return r;
}

static int list_add(DependencyList *l, const char *key, const char *name, size_t name_len, const char *version,
                    size_t version_len) {
        DependencyEntry e = {};

        if (l->n >= MANIFEST_ENTRIES_MAX)
                return -E2BIG;
        if (l->n >= l->allocated) {
                size_t k = MAX(l->allocated * 2, (size_t) 32);
                DependencyEntry *t = realloc(l->entries, k * sizeof(DependencyEntry));
                if (!t)
                        return -ENOMEM;
                l->entries = t;
                l->allocated = k;
        }
        e.name = strndup(name, name_len);
        e.key = strdup(key ?: e.name ?: "");
        e.version = version ? strndup(version, version_len) : NULL;
        if (!e.name || !e.key || (version && !e.version)) {
                free(e.name);
                free(e.key);
                free(e.version);
                return -ENOMEM;
        }
        l->entries[l->n++] = e;
        return 0;
}

static int list_add_pypi(DependencyList *l, const char *name, size_t name_len, const char *version, size_t version_len) {
        _cleanup_free_ char *n = pypi_normalize(name, name_len);
        if (!n)
                return -ENOMEM;
        return list_add(l, NULL, n, strlen(n), version, version_len);
}

/* ---- npm ---- */

static int parse_package_json(json_object *j, DependencyList *l, char **ret_error) {
        static const char *const sections[] = { "dependencies", "devDependencies", "optionalDependencies", "peerDependencies" };
        int r;

        if (!json_object_is_type(j, json_type_object))
                return error_set(ret_error, -EBADMSG, "package.json is not a JSON object.");
        for (size_t i = 0; i < ELEMENTSOF(sections); i++) {
                json_object *deps;
                if (!json_object_object_get_ex(j, sections[i], &deps) || !json_object_is_type(deps, json_type_object))
                        continue;
                json_object_object_foreach(deps, name, v) {
                        const char *version = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
                        r = list_add(l, NULL, name, strlen(name), version, version ? strlen(version) : 0);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int parse_lock_v1(json_object *deps, const char *prefix, unsigned depth, DependencyList *l) {
        int r;

        if (depth > 32)
                return -EBADMSG;
        json_object_object_foreach(deps, name, v) {
                _cleanup_free_ char *key = NULL;
                json_object *version = NULL, *sub = NULL;

                if (!json_object_is_type(v, json_type_object))
                        continue;
                if (asprintf(&key, "%s%s", prefix, name) < 0)
                        return -ENOMEM;
                if (json_object_object_get_ex(v, "version", &version) && json_object_is_type(version, json_type_string)) {
                        const char *s = json_object_get_string(version);
                        r = list_add(l, key, name, strlen(name), s, strlen(s));
                        if (r < 0)
                                return r;
                }
                if (json_object_object_get_ex(v, "dependencies", &sub) && json_object_is_type(sub, json_type_object)) {
                        _cleanup_free_ char *p = NULL;
                        if (asprintf(&p, "%s/", key) < 0)
                                return -ENOMEM;
                        r = parse_lock_v1(sub, p, depth + 1, l);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int parse_package_lock(json_object *j, DependencyList *l, char **ret_error) {
        json_object *packages, *deps;
        int r;

        if (!json_object_is_type(j, json_type_object))
                return error_set(ret_error, -EBADMSG, "The lock file is not a JSON object.");
        if (json_object_object_get_ex(j, "packages", &packages) && json_object_is_type(packages, json_type_object)) {
                json_object_object_foreach(packages, path, v) {
                        const char *name = path, *m;
                        json_object *version, *link;

                        /* "" is the project itself; links point into the workspace. */
                        if (isempty(path) || !json_object_is_type(v, json_type_object))
                                continue;
                        if (json_object_object_get_ex(v, "link", &link) && json_object_get_boolean(link))
                                continue;
                        while ((m = strstr(name, "node_modules/")))
                                name = m + strlen("node_modules/");
                        if (isempty(name))
                                continue;
                        if (!json_object_object_get_ex(v, "version", &version) || !json_object_is_type(version, json_type_string))
                                continue;
                        r = list_add(l, path, name, strlen(name), json_object_get_string(version),
                                     strlen(json_object_get_string(version)));
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        if (json_object_object_get_ex(j, "dependencies", &deps) && json_object_is_type(deps, json_type_object)) {
                r = parse_lock_v1(deps, "", 0, l);
                if (r == -EBADMSG)
                        return error_set(ret_error, r, "The lock file's dependencies nest too deep.");
                return r;
        }
        return 0;
}

/* ---- PEP 508 ---- */

/* "name[extras] (spec) ; marker", "name spec", "name @ url". */
static int pep508_add(DependencyList *l, const char *s, size_t n) {
        const char *end = s + n, *name, *spec, *spec_end;
        size_t name_len;

        while (s < end && isspace((unsigned char) *s))
                s++;
        name = s;
        while (s < end && (isalnum((unsigned char) *s) || strchr("-_.", *s)))
                s++;
        name_len = (size_t) (s - name);
        if (name_len == 0)
                return 0;       /* Not a requirement: skipped, as pip would refuse it. */
        while (s < end && isspace((unsigned char) *s))
                s++;
        if (s < end && *s == '[') {
                const char *c = memchr(s, ']', (size_t) (end - s));
                if (!c)
                        return 0;
                s = c + 1;
        }
        while (s < end && isspace((unsigned char) *s))
                s++;
        if (s < end && *s == '@')       /* a direct reference: no version */
                return list_add_pypi(l, name, name_len, NULL, 0);
        if (s > end)
                s = end;
        spec_end = memchr(s, ';', (size_t) (end - s)) ?: end;
        if (s < spec_end && *s == '(') {
                s++;
                const char *c = memchr(s, ')', (size_t) (spec_end - s));
                if (c)
                        spec_end = c;
        }
        while (spec_end > s && isspace((unsigned char) spec_end[-1]))
                spec_end--;
        spec = s;
        return list_add_pypi(l, name, name_len, spec_end > spec ? spec : NULL, (size_t) (spec_end - spec));
}

static int parse_requirements(const char *text, size_t size, DependencyList *l) {
        const char *end = text + size;
        int r;

        for (const char *s = text; s < end;) {
                const char *nl = memchr(s, '\n', (size_t) (end - s)), *e = nl ?: end, *c;

                /* A comment begins at '#' at the start or after whitespace; options after " -". */
                for (c = s; c < e; c++)
                        if (*c == '#' && (c == s || isspace((unsigned char) c[-1])))
                                break;
                e = c;
                for (c = s; c + 1 < e; c++)
                        if (isspace((unsigned char) c[0]) && c[1] == '-' && c + 2 < e && c[2] == '-')
                                break;
                if (c + 1 < e)
                        e = c;
                while (s < e && isspace((unsigned char) *s))
                        s++;
                /* Options (-r, -c, -e, --index-url), paths and URLs name no PyPI release. */
                c = s;
                while (c < e && !isspace((unsigned char) *c))
                        c++;
                if (s < e && !strchr("-./", *s) && !memmem(s, (size_t) (c - s), "://", 3)) {
                        r = pep508_add(l, s, (size_t) (e - s));
                        if (r < 0)
                                return r;
                }
                s = nl ? nl + 1 : end;
        }
        return 0;
}

/* ---- TOML manifests ---- */

typedef struct TomlState {
        ManifestKind kind;
        DependencyList *list;
        unsigned index;                 /* Cargo.lock: the [[package]] being read */
        char *name, *version;
        char **unversioned;             /* tables seen without (yet) a version: { path = "..." } */
} TomlState;

static bool str_in(const char *s, const char *const *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (streq(s, l[i]))
                        return true;
        return false;
}

static bool cargo_deps_table(const char *s) {
        return streq(s, "dependencies") || streq(s, "dev-dependencies") || streq(s, "build-dependencies");
}

/* A dependency "name" with value v at the key path's remainder: "x" or
 * {version = "x"} or [table.name] version = "x". Entries without a version
 * are listed once, with none. */
static int toml_dep(TomlState *s, const char *name, const TomlValue *v, const char *sub) {
        bool py = s->kind == MANIFEST_PYPROJECT;
        DependencyList *l = s->list;

        if (!sub)
                return py ? list_add_pypi(l, name, strlen(name), v->is_string ? v->value : NULL, v->is_string ? strlen(v->value) : 0)
                          : list_add(l, NULL, name, strlen(name), v->is_string ? v->value : NULL, v->is_string ? strlen(v->value) : 0);
        if (streq(sub, "version") && v->is_string) {
                /* Listed with its version: no longer one without. */
                for (char **u = s->unversioned; u && *u; u++)
                        if (streq(*u, name))
                                **u = '\0';
                return py ? list_add_pypi(l, name, strlen(name), v->value, strlen(v->value))
                          : list_add(l, NULL, name, strlen(name), v->value, strlen(v->value));
        }
        for (char **u = s->unversioned; u && *u; u++)
                if (streq(*u, name))
                        return 0;
        /* Bounded lower than entries: this list is searched linearly. */
        if (strv_length(s->unversioned) >= 4096)
                return -E2BIG;
        return strv_extend(&s->unversioned, name);
}

static int toml_manifest_value(const TomlValue *v, void *userdata) {
        TomlState *s = userdata;
        const char *const *t = v->table;
        size_t nt = v->n_table;
        int r;

        if (s->kind == MANIFEST_CARGO_LOCK) {
                if (nt != 1 || !streq(t[0], "package") || v->n_key != 1 || !v->is_string)
                        return 0;
                if (v->table_index != s->index) {
                        s->index = v->table_index;
                        s->name = mfree_ptr(s->name);
                        s->version = mfree_ptr(s->version);
                }
                if (streq(v->key[0], "name") && !s->name && !(s->name = strdup(v->value)))
                        return -ENOMEM;
                if (streq(v->key[0], "version") && !s->version && !(s->version = strdup(v->value)))
                        return -ENOMEM;
                if (s->name && s->version) {
                        _cleanup_free_ char *key = NULL;
                        if (asprintf(&key, "%s %s", s->name, s->version) < 0)
                                return -ENOMEM;
                        r = list_add(s->list, key, s->name, strlen(s->name), s->version, strlen(s->version));
                        s->name = mfree_ptr(s->name);
                        s->version = mfree_ptr(s->version);
                        return r;
                }
                return 0;
        }

        if (s->kind == MANIFEST_PYPROJECT) {
                static const char *const poetry_sections[] = { "dependencies", "dev-dependencies" };
                /* [project] dependencies = ["requests>=2", ...] */
                if (nt == 1 && streq(t[0], "project") && v->n_key == 1 && streq(v->key[0], "dependencies") &&
                    v->in_array && v->is_string)
                        return pep508_add(s->list, v->value, strlen(v->value));
                /* [project.optional-dependencies] group = [...] */
                if (nt == 2 && streq(t[0], "project") && streq(t[1], "optional-dependencies") && v->n_key == 1 &&
                    v->in_array && v->is_string)
                        return pep508_add(s->list, v->value, strlen(v->value));
                /* [project] optional-dependencies.group = [...] */
                if (nt == 1 && streq(t[0], "project") && v->n_key == 2 && streq(v->key[0], "optional-dependencies") &&
                    v->in_array && v->is_string)
                        return pep508_add(s->list, v->value, strlen(v->value));
                /* [tool.poetry.dependencies], [tool.poetry.dev-dependencies],
                 * [tool.poetry.group.G.dependencies]: name = "^1.2" | {version = "^1.2"} */
                if (nt >= 3 && streq(t[0], "tool") && streq(t[1], "poetry") &&
                    ((nt == 3 && str_in(t[2], poetry_sections, ELEMENTSOF(poetry_sections))) ||
                     (nt == 5 && streq(t[2], "group") && streq(t[4], "dependencies"))) &&
                    v->n_key >= 1 && !v->in_array && !streq(v->key[0], "python"))
                        return toml_dep(s, v->key[0], v, v->n_key >= 2 ? v->key[1] : NULL);
                return 0;
        }

        /* Cargo.toml: [dependencies], [target.X.dependencies], [workspace.dependencies], and
         * [dependencies.NAME] version = "x". */
        if (nt >= 1 && cargo_deps_table(t[nt - 1]) && v->n_key >= 1 && !v->in_array)
                return toml_dep(s, v->key[0], v, v->n_key >= 2 ? v->key[1] : NULL);
        if (nt >= 2 && cargo_deps_table(t[nt - 2]) && v->n_key == 1 && !v->in_array)
                return toml_dep(s, t[nt - 1], v, v->key[0]);
        return 0;
}

static int parse_toml_manifest(ManifestKind kind, const char *text, size_t size, DependencyList *l, char **ret_error) {
        TomlState s = { .kind = kind, .list = l };
        int r;

        r = toml_walk(text, size, toml_manifest_value, &s, ret_error);
        /* What had no version in the end: a path or git dependency. */
        for (char **u = s.unversioned; r >= 0 && u && *u; u++) {
                bool versioned = (*u)[0] == '\0';
                for (size_t i = 0; !versioned && i < l->n; i++)
                        versioned = streq(l->entries[i].name, *u);
                if (!versioned)
                        r = kind == MANIFEST_PYPROJECT ? list_add_pypi(l, *u, strlen(*u), NULL, 0) : list_add(l, NULL, *u, strlen(*u), NULL, 0);
        }
        strv_free(s.unversioned);
        free(s.name);
        free(s.version);
        return r;
}

/* ---- go.mod ---- */

static int parse_go_mod(const char *text, size_t size, DependencyList *l, char **ret_error) {
        const char *end = text + size;
        bool block = false;
        unsigned line = 0;
        int r;

        for (const char *s = text; s < end;) {
                const char *nl = memchr(s, '\n', (size_t) (end - s)), *e = nl ?: end, *c, *mod, *mod_end, *ver;

                line++;
                c = memmem(s, (size_t) (e - s), "//", 2);
                if (c)
                        e = c;
                while (s < e && isspace((unsigned char) *s))
                        s++;
                while (e > s && isspace((unsigned char) e[-1]))
                        e--;
                if (!block) {
                        if ((size_t) (e - s) < 8 || !strneq(s, "require", 7) || (!isspace((unsigned char) s[7]) && s[7] != '(')) {
                                s = nl ? nl + 1 : end;
                                continue;
                        }
                        s += 7;
                        while (s < e && isspace((unsigned char) *s))
                                s++;
                        if (s < e && *s == '(') {
                                block = true;
                                s = nl ? nl + 1 : end;
                                continue;
                        }
                } else if (s < e && *s == ')') {
                        block = false;
                        s = nl ? nl + 1 : end;
                        continue;
                }
                if (s < e) {
                        /* "module/path v1.2.3", the path possibly quoted. */
                        mod = s;
                        while (s < e && !isspace((unsigned char) *s))
                                s++;
                        mod_end = s;
                        while (s < e && isspace((unsigned char) *s))
                                s++;
                        ver = s;
                        if (ver == e || mod_end == mod)
                                return error_set(ret_error, -EBADMSG, "line %u: a require without a version.", line);
                        if (*mod == '"' && mod_end - mod >= 2 && mod_end[-1] == '"')
                                mod++, mod_end--;
                        r = list_add(l, NULL, mod, (size_t) (mod_end - mod), ver, (size_t) (e - ver));
                        if (r < 0)
                                return r;
                }
                s = nl ? nl + 1 : end;
        }
        if (block)
                return error_set(ret_error, -EBADMSG, "A require block is not closed.");
        return 0;
}

int manifest_parse(ManifestKind k, const char *text, size_t size, DependencyList *ret, char **ret_error) {
        _cleanup_json_ json_object *j = NULL;
        int r;

        assert(text || size == 0);
        assert(ret);

        if (size > MANIFEST_SIZE_MAX)
                return error_set(ret_error, -EFBIG, "The manifest is larger than %u bytes.", MANIFEST_SIZE_MAX);
        if (memchr(text, '\0', size))
                return error_set(ret_error, -EBADMSG, "The manifest holds a NUL byte.");

        switch (k) {
        case MANIFEST_PACKAGE_JSON:
        case MANIFEST_PACKAGE_LOCK:
                if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
                        text += 3, size -= 3;
                r = json_parse_strict(text, size, &j);
                if (r < 0)
                        return error_set(ret_error, r, "Not a JSON document.");
                return k == MANIFEST_PACKAGE_JSON ? parse_package_json(j, ret, ret_error) : parse_package_lock(j, ret, ret_error);
        case MANIFEST_REQUIREMENTS:
                return parse_requirements(text, size, ret);
        case MANIFEST_PYPROJECT:
        case MANIFEST_CARGO_TOML:
        case MANIFEST_CARGO_LOCK:
                return parse_toml_manifest(k, text, size, ret, ret_error);
        case MANIFEST_GO_MOD:
                return parse_go_mod(text, size, ret, ret_error);
        default:
                return -EINVAL;
        }
}

/* ---- versions for the vulnerability check ---- */

char *dependency_check_version(Ecosystem e, ManifestKind k, const char *spec) {
        _cleanup_free_ char *v = NULL;
        const char *s = spec;
        size_t n;

        if (isempty(spec))
                return NULL;
        while (*s == ' ')
                s++;

        if (e == ECOSYSTEM_PYPI) {
                /* The first clause of a specifier set that has a lower bound. */
                for (const char *c = s; c && *c;) {
                        while (*c == ' ' || *c == ',')
                                c++;
                        if (strneq(c, "===", 3))
                                c += 3;
                        else if (strneq(c, "==", 2) || strneq(c, "~=", 2) || strneq(c, ">=", 2))
                                c += 2;
                        else if (k == MANIFEST_PYPROJECT && (*c == '^' || *c == '~'))     /* poetry */
                                c += 1;
                        else if (k == MANIFEST_PYPROJECT && isdigit((unsigned char) *c))
                                ;       /* poetry: a bare version is exact */
                        else {
                                c = strchr(c, ',');
                                continue;
                        }
                        while (*c == ' ')
                                c++;
                        n = strcspn(c, " ,;");
                        v = strndup(c, n);
                        if (!v)
                                return NULL;
                        /* "1.2.*": its lower bound is 1.2. */
                        n = strlen(v);
                        if (n >= 2 && streq(v + n - 2, ".*"))
                                v[n - 2] = '\0';
                        break;
                }
        } else {
                /* npm, crates.io: "^1.2.3", "~1.2", ">=1.2.3 <2", "=1.2.3", "1.2.3", "1.x"; Go: "v1.2.3". */
                if (strneq(s, ">=", 2))
                        s += 2;
                else if (*s == '^' || *s == '~' || *s == '=')
                        s++;
                else if (!isdigit((unsigned char) *s) && !(e == ECOSYSTEM_GO && *s == 'v'))
                        return NULL;
                while (*s == ' ' || *s == '=')
                        s++;
                if (*s == 'v' || *s == 'V')
                        s++;
                n = strcspn(s, " ,|<>");
                v = strndup(s, n);
                if (!v)
                        return NULL;
                /* "1.x", "1.2.*": the lower bound is 1.0.0, 1.2.0. */
                for (char *x = v; *x; x++)
                        if ((*x == 'x' || *x == 'X' || *x == '*') && (x == v || x[-1] == '.') && (x[1] == '\0' || x[1] == '.'))
                                *x = '0';
        }
        if (!v || !version_is_valid(e, v))
                return NULL;
        return TAKE_PTR(v);
}

/* ---- diff ---- */

void dependency_changes_done(DependencyChanges *c) {
        for (size_t i = 0; c && i < c->n; i++) {
                DependencyChange *d = &c->changes[i];
                free(d->manifest);
                free(d->name);
                free(d->old_version);
                free(d->new_version);
                free(d->check_version);
        }
        if (c) {
                free(c->changes);
                *c = (DependencyChanges) {};
        }
}

static int changes_add(DependencyChanges *c, Ecosystem e, ManifestKind k, const char *path, const DependencyEntry *n,
                       char *old_version) {
        DependencyChange d = { .ecosystem = e, .old_version = old_version };

        if (c->n >= MANIFEST_ENTRIES_MAX) {
                free(old_version);
                return -E2BIG;
        }
        if (c->n >= c->allocated) {
                size_t a = MAX(c->allocated * 2, (size_t) 16);
                DependencyChange *t = realloc(c->changes, a * sizeof(DependencyChange));
                if (!t) {
                        free(old_version);
                        return -ENOMEM;
                }
                c->changes = t;
                c->allocated = a;
        }
        d.manifest = strdup(path);
        d.name = strdup(n->name);
        d.new_version = n->version ? strdup(n->version) : NULL;
        d.check_version = n->version ? dependency_check_version(e, k, n->version) : NULL;
        if (!d.manifest || !d.name || (n->version && !d.new_version)) {
                free(d.manifest);
                free(d.name);
                free(d.new_version);
                free(d.check_version);
                free(old_version);
                return -ENOMEM;
        }
        c->changes[c->n++] = d;
        return 0;
}

static int entry_compare(const void *a, const void *b) {
        const DependencyEntry *x = a, *y = b;
        int r = strcmp(x->key, y->key);
        return r != 0 ? r : strcmp(strempty(x->version), strempty(y->version));
}

int dependencies_diff(const char *path, const char *old_text, size_t old_size, const char *new_text, size_t new_size,
                      DependencyChanges *out, char **ret_error) {
        _cleanup_(dependency_list_done) DependencyList old = {}, new = {};
        ManifestKind k = manifest_kind_from_path(path);
        Ecosystem e = manifest_kind_ecosystem(k);
        int r;

        assert(out);

        if (k < 0)
                return error_set(ret_error, -EINVAL, "'%s' is not a dependency manifest this check knows.", strempty(path));
        if (old_text) {
                r = manifest_parse(k, old_text, old_size, &old, ret_error);
                if (r < 0)
                        return r;
        }
        r = manifest_parse(k, new_text ?: "", new_text ? new_size : 0, &new, ret_error);
        if (r < 0)
                return r;

        /* Sorted by key, then version: each new entry finds its old ones by bisection. */
        if (old.n > 0)
                qsort(old.entries, old.n, sizeof(DependencyEntry), entry_compare);
        if (new.n > 0)
                qsort(new.entries, new.n, sizeof(DependencyEntry), entry_compare);
        for (size_t i = 0; i < new.n; i++) {
                DependencyEntry *n = &new.entries[i];
                _cleanup_free_ char *olds = NULL;
                size_t lo = 0, hi = old.n, first, last, listed = 0;
                bool same = false;

                /* The same key twice in the new text (package.json's dependencies and
                 * devDependencies) is one dependency. */
                if (i > 0 && entry_compare(&new.entries[i - 1], n) == 0)
                        continue;
                /* The first old entry of this key... */
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (strcmp(old.entries[mid].key, n->key) < 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                first = lo;
                /* ... past its last... */
                hi = old.n;
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (strcmp(old.entries[mid].key, n->key) <= 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                last = lo;
                lo = first;
                hi = last;
                /* ... and the first of this key and version: a manifest may list a
                 * key many times (a lock file, a requirements file), so both are
                 * found by bisection, never by walking all of them. */
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (entry_compare(&old.entries[mid], n) < 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                for (size_t j = lo; j < last && entry_compare(&old.entries[j], n) == 0 && !same; j++)
                        same = streq_ptr(old.entries[j].version, n->version);
                if (same)
                        continue;
                /* The old versions of the key, the first few of them. */
                for (size_t j = first; j < last; j++) {
                        const char *ov = old.entries[j].version ?: "(none)";
                        char *t;
                        if (listed == DEPENDENCY_OLD_VERSIONS_MAX) {
                                if (asprintf(&t, "%s and %zu more", olds, last - j) < 0)
                                        return -ENOMEM;
                                free(olds);
                                olds = t;
                                break;
                        }
                        if (asprintf(&t, "%s%s%s", strempty(olds), olds ? ", " : "", ov) < 0)
                                return -ENOMEM;
                        free(olds);
                        olds = t;
                        listed++;
                }
                r = changes_add(out, e, k, path, n, TAKE_PTR(olds));
                if (r < 0)
                        return r;
        }
        return 0;
}

int dependency_changes_to_findings(const DependencyChanges *c, FindingList *out) {
        int r;

        for (size_t i = 0; c && i < c->n; i++) {
                const DependencyChange *d = &c->changes[i];
                if (d->old_version)
                        r = finding_list_add(out, FINDING_DEPENDENCY, FINDING_NOTE, d->manifest, 0, ecosystem_to_string(d->ecosystem),
                                             "Changed %s %s -> %s.", d->name, d->old_version, d->new_version ?: "(no version)");
                else
                        r = finding_list_add(out, FINDING_DEPENDENCY, FINDING_NOTE, d->manifest, 0, ecosystem_to_string(d->ecosystem),
                                             "Added %s %s.", d->name, d->new_version ?: "(no version)");
                if (r < 0)
                        return r;
        }
        return 0;
}
