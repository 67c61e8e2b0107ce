/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ledger-internal.h"
#include "string-util.h"

/* Bounds on what a repository's .gitmodules can make us parse. */
#define GITMODULES_MAX (64U * 1024U)
#define SUBMODULE_NAME_MAX 255U
#define SUBMODULE_URL_MAX 2048U

void ledger_submodules_free(LedgerSubmodule *s, size_t n) {
        for (size_t i = 0; s && i < n; i++) {
                free(s[i].name);
                free(s[i].path);
                free(s[i].url);
                ledger_free(s[i].ledger);
        }
        free(s);
}

/* SECURITY: a name becomes a directory below ledger.git/modules/ and a path
 * one below the workspace. Neither may climb out (CVE-2018-11235), be
 * absolute, hide a separator in a backslash, or carry control characters or
 * quotes (they end up in messages). A path must not name or pass through a
 * .git either. */
static bool component_list_safe(const char *s, bool is_path) {
        if (isempty(s) || strlen(s) > SUBMODULE_NAME_MAX || s[0] == '/')
                return false;
        for (const char *c = s; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 127 || *c == '\\' || *c == '"')
                        return false;

        for (const char *p = s;;) {
                size_t n = strcspn(p, "/");

                if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && strneq(p, "..", 2)))
                        return false;
                if (is_path && n == 4 && strncasecmp(p, ".git", 4) == 0)
                        return false;
                if (p[n] == '\0')
                        return true;
                p += n + 1;
        }
}

bool ledger_submodule_name_safe(const char *name) {
        return component_list_safe(name, false);
}

bool ledger_submodule_path_safe(const char *path) {
        return component_list_safe(path, true);
}

/* Resolves a relative submodule URL ("./x", "../x") against the URL of the
 * repository that names it, as git does, without climbing above the host. */
static int url_resolve(const char *super_url, const char *rel, char **ret) {
        _cleanup_free_ char *b = strdup(super_url);
        if (!b)
                return -ENOMEM;

        size_t n = strlen(b);
        while (n > 0 && b[n - 1] == '/')
                b[--n] = '\0';
        char *authority = strstr(b, "://");
        if (!authority)
                return -EINVAL;
        authority += 3;
        char *path_start = strchr(authority, '/');

        for (;;) {
                if (strneq(rel, "./", 2))
                        rel += 2;
                else if (strneq(rel, "../", 3) || streq(rel, "..")) {
                        char *slash = strrchr(b, '/');
                        if (!path_start || !slash || slash < path_start)
                                return -EINVAL;
                        *slash = '\0';
                        rel += streq(rel, "..") ? 2 : 3;
                } else
                        break;
        }
        /* "./" or "../" followed by '/' (".//x") would leave "//" in the URL. */
        if (isempty(rel) || streq(rel, ".") || rel[0] == '/')
                return -EINVAL;
        /* Only leading ./ and ../: anything in the middle is not resolved, so refused. */
        if (strstr(rel, "/../") || strstr(rel, "/./") || strstr(rel, "//") || rel[strlen(rel) - 1] == '.')
                return -EINVAL;
        if (asprintf(ret, "%s/%s", b, rel) < 0)
                return -ENOMEM;
        return 0;
}

/* SECURITY: a submodule URL comes from the repository, which is hostile.
 * Only https:// and ssh:// on the network, or a path relative to the
 * superproject's URL (which keeps its scheme: a file:// superproject the
 * caller chose gives file:// submodules); never a local path, file://, an
 * option-looking "-..." (CVE-2017-1000117), or any other transport. */
static int url_check(const char *super_url, const char *url, char **ret, char **ret_error, const char *name) {
        if (strlen(url) > SUBMODULE_URL_MAX)
                return error_set(ret_error, -EINVAL, "Submodule '%s' has a URL that is too long.", name);
        for (const char *c = url; *c; c++)
                if ((unsigned char) *c <= ' ' || *c == 127 || *c == '\\')
                        return error_set(ret_error, -EINVAL,
                                                "Submodule '%s' has a URL with spaces, control characters or backslashes: refused.",
                                                name);
        if (url[0] == '-')
                return error_set(ret_error, -EINVAL, "Submodule '%s' has a URL beginning with '-': refused.", name);

        if (strneq(url, "./", 2) || strneq(url, "../", 3)) {
                int r = url_resolve(super_url, url, ret);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return error_set(ret_error, -EINVAL,
                                                "Submodule '%s' has a relative URL '%s' that cannot be resolved against the "
                                                "superproject's URL: refused.", name, url);
                return 0;
        }
        if ((strneq(url, "https://", 8) && url[8] && url[8] != '/') || (strneq(url, "ssh://", 6) && url[6] && url[6] != '/')) {
                *ret = strdup(url);
                return *ret ? 0 : -ENOMEM;
        }
        return error_set(ret_error, -EPROTONOSUPPORT,
                                "Submodule '%s' has URL '%s': only https://, ssh:// and relative (./, ../) URLs are "
                                "fetched, never local paths, file:// or other transports.", name, url);
}

typedef struct Entry {
        char *name, *path, *url;
} Entry;

static LedgerSubmodule *entry_find(LedgerSubmodule *s, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(s[i].name, name))
                        return &s[i];
        return NULL;
}

/* Parses the quoted subsection of [submodule "name"]: backslash escapes the
 * next character, as in git. */
static int parse_section(char *line, char **ret_name, bool *ret_is_submodule) {
        char *p = line + 1;

        p += strspn(p, " \t");
        size_t k = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.");
        bool is_submodule = k == 9 && strncasecmp(p, "submodule", 9) == 0;
        p += k;
        p += strspn(p, " \t");

        _cleanup_free_ char *name = NULL;
        if (*p == '"') {
                size_t n = 0;

                name = malloc(strlen(p) + 1);
                if (!name)
                        return -ENOMEM;
                for (p++; *p != '"'; p++) {
                        if (*p == '\0')
                                return -EBADMSG;
                        if (*p == '\\') {
                                p++;
                                if (*p == '\0')
                                        return -EBADMSG;
                        }
                        name[n++] = *p;
                }
                name[n] = '\0';
                p++;
        }
        if (*p != ']')
                return -EBADMSG;
        p++;
        p += strspn(p, " \t");
        if (*p != '\0' && *p != '#' && *p != ';')
                return -EBADMSG;

        *ret_is_submodule = is_submodule && name;
        *ret_name = TAKE_PTR(name);
        return 0;
}

/* Parses a value: quotes, the escapes git knows, comments after # or ;
 * outside quotes. A continuation line (a backslash at the end) is refused. */
static int parse_value(const char *p, char **ret) {
        _cleanup_free_ char *v = malloc(strlen(p) + 1);
        bool quoted = false;
        size_t n = 0, keep = 0;

        if (!v)
                return -ENOMEM;
        p += strspn(p, " \t");
        for (; *p; p++) {
                if (!quoted && (*p == '#' || *p == ';'))
                        break;
                if (*p == '"') {
                        quoted = !quoted;
                        keep = n;
                        continue;
                }
                if (*p == '\\') {
                        p++;
                        switch (*p) {
                        case '\\': case '"': v[n++] = *p; break;
                        case 'n': v[n++] = '\n'; break;
                        case 't': v[n++] = '\t'; break;
                        case 'b': v[n++] = '\b'; break;
                        default: return -EBADMSG;
                        }
                        keep = n;
                        continue;
                }
                v[n++] = *p;
                if (quoted || (*p != ' ' && *p != '\t'))
                        keep = n;
        }
        if (quoted)
                return -EBADMSG;
        v[keep] = '\0';
        *ret = TAKE_PTR(v);
        return 0;
}

/* The submodules .gitmodules describes: name, path and url of each. Our own
 * strict reader of the config syntax, never libgit2's config (which reads
 * includes and files), and only the keys path and url: nothing else (update
 * = !command and the like) has any meaning here. A key given twice for one
 * submodule is refused: which one git would take is not worth guessing. */
static int gitmodules_parse(const char *text, size_t size, LedgerSubmodule **ret, size_t *ret_n, char **ret_error) {
        LedgerSubmodule *s = NULL;
        size_t n = 0;
        unsigned line_no = 0;
        int r = 0;

        if (memchr(text, '\0', size))
                return error_set(ret_error, -EBADMSG, "'.gitmodules' of base contains a NUL byte: refused.");

        _cleanup_free_ char *copy = strndup(text, size);
        _cleanup_free_ char *section = NULL;
        bool in_submodule = false;
        if (!copy)
                return -ENOMEM;

        for (char *line = copy, *next; line && *line && r >= 0; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                line_no++;
                size_t len = strlen(line);
                if (len > 0 && line[len - 1] == '\r')
                        line[--len] = '\0';
                line += strspn(line, " \t");
                if (*line == '\0' || *line == '#' || *line == ';')
                        continue;

                if (*line == '[') {
                        section = mfree_ptr(section);
                        r = parse_section(line, &section, &in_submodule);
                        if (r == -EBADMSG)
                                r = error_set(ret_error, r, "'.gitmodules' of base is malformed in line %u.", line_no);
                        continue;
                }

                size_t k = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-");
                if (k == 0 || !isalpha((unsigned char) line[0])) {
                        r = error_set(ret_error, -EBADMSG, "'.gitmodules' of base is malformed in line %u.", line_no);
                        continue;
                }
                char *rest = line + k;
                rest += strspn(rest, " \t");
                if (*rest != '=' && *rest != '\0' && *rest != '#' && *rest != ';') {
                        r = error_set(ret_error, -EBADMSG, "'.gitmodules' of base is malformed in line %u.", line_no);
                        continue;
                }
                if (line[strlen(line) - 1] == '\\') {
                        r = error_set(ret_error, -EBADMSG, "'.gitmodules' of base continues a line with '\\' (line %u): not supported.",
                                             line_no);
                        continue;
                }
                if (!in_submodule || *rest != '=')
                        continue;
                bool is_path = k == 4 && strncasecmp(line, "path", 4) == 0;
                bool is_url = k == 3 && strncasecmp(line, "url", 3) == 0;
                if (!is_path && !is_url)
                        continue;

                _cleanup_free_ char *value = NULL;
                r = parse_value(rest + 1, &value);
                if (r == -EBADMSG) {
                        r = error_set(ret_error, r, "'.gitmodules' of base has a malformed value in line %u.", line_no);
                        continue;
                }
                if (r < 0)
                        break;

                LedgerSubmodule *e = entry_find(s, n, section);
                if (!e) {
                        if (n >= LEDGER_SUBMODULES_MAX) {
                                r = error_set(ret_error, -E2BIG, "'.gitmodules' of base names more than %u submodules.",
                                                     LEDGER_SUBMODULES_MAX);
                                continue;
                        }
                        LedgerSubmodule *t = realloc(s, (n + 1) * sizeof(LedgerSubmodule));
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        s = t;
                        e = &s[n++];
                        *e = (LedgerSubmodule) { .name = strdup(section) };
                        if (!e->name) {
                                r = -ENOMEM;
                                break;
                        }
                }
                char **slot = is_path ? &e->path : &e->url;
                if (*slot) {
                        _cleanup_free_ char *shown = ledger_one_line(section, 64);
                        r = error_set(ret_error, -EBADMSG, "'.gitmodules' of base sets '%s' twice for submodule '%s': refused.",
                                             is_path ? "path" : "url", strempty(shown));
                        continue;
                }
                *slot = TAKE_PTR(value);
        }
        if (r < 0) {
                ledger_submodules_free(s, n);
                return r;
        }
        *ret = s;
        *ret_n = n;
        return 0;
}

static int path_check_in_tree(git_tree *tree, const LedgerSubmodule *e, git_oid *ret, char **ret_error) {
        _cleanup_free_ char *prefix = strdup(e->path);
        if (!prefix)
                return -ENOMEM;

        /* Every directory on the way must be a directory in base: a symlink
         * there would lead the checkout out of the workspace. */
        for (char *slash = strchr(prefix, '/'); slash; slash = strchr(slash + 1, '/')) {
                git_tree_entry *te = NULL;

                *slash = '\0';
                int k = git_tree_entry_bypath(&te, tree, prefix);
                git_filemode_t mode = k == 0 ? git_tree_entry_filemode(te) : 0;
                git_tree_entry_free(te);
                if (k == 0 && mode == GIT_FILEMODE_LINK)
                        return error_set(ret_error, -ELOOP,
                                                "Submodule '%s' has path '%s', which goes through the symlink '%s': refused.",
                                                e->name, e->path, prefix);
                if (k == 0 && mode != GIT_FILEMODE_TREE)
                        break;
                *slash = '/';
        }

        git_tree_entry *te = NULL;
        int k = git_tree_entry_bypath(&te, tree, e->path);
        bool gitlink = k == 0 && git_tree_entry_filemode(te) == GIT_FILEMODE_COMMIT;
        if (gitlink)
                git_oid_cpy(ret, git_tree_entry_id(te));
        git_tree_entry_free(te);
        if (!gitlink)
                return error_set(ret_error, -ENOENT,
                                        "Submodule '%s' has path '%s', which is not a submodule (gitlink) in base: refused.",
                                        e->name, e->path);
        return 0;
}

static bool name_nests(const char *a, const char *b) {
        size_t n = strlen(a);
        return strneq(a, b, n) && b[n] == '/';
}

int ledger_submodules_read(git_repository *repo, git_tree *tree, const char *super_url,
                           LedgerSubmodule **ret, size_t *ret_n, char **ret_error) {
        LedgerSubmodule *s = NULL;
        size_t n = 0;
        int r;

        assert(repo);
        assert(tree);

        *ret = NULL;
        *ret_n = 0;

        const git_tree_entry *te = git_tree_entry_byname(tree, ".gitmodules");
        if (!te)
                return 0;
        /* SECURITY: read from base's own blob, never from the workspace the
         * sandbox writes, and never through a link (CVE-2018-11235). */
        if (git_tree_entry_filemode(te) != GIT_FILEMODE_BLOB && git_tree_entry_filemode(te) != GIT_FILEMODE_BLOB_EXECUTABLE)
                return error_set(ret_error, -EBADMSG, "'.gitmodules' of base is not a regular file (a symlink?): refused.");

        _cleanup_(git_blob_freep) git_blob *blob = NULL;
        if (git_blob_lookup(&blob, repo, git_tree_entry_id(te)) < 0)
                return error_set(ret_error, -EBADMSG, "'.gitmodules' of base cannot be read: %s", ledger_git_message());
        if (git_blob_rawsize(blob) > GITMODULES_MAX)
                return error_set(ret_error, -EFBIG, "'.gitmodules' of base is bigger than %u bytes: refused.", GITMODULES_MAX);

        r = gitmodules_parse(git_blob_rawcontent(blob), (size_t) git_blob_rawsize(blob), &s, &n, ret_error);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n && r >= 0; i++) {
                LedgerSubmodule *e = &s[i];

                if (!ledger_submodule_name_safe(e->name)) {
                        _cleanup_free_ char *shown = ledger_one_line(e->name, 64);
                        r = error_set(ret_error, -EINVAL,
                                             "Submodule name '%s' is unsafe (empty, absolute, '.' or '..' components, "
                                             "backslashes, quotes or control characters): refused.", strempty(shown));
                } else if (!e->path)
                        r = error_set(ret_error, -EINVAL, "Submodule '%s' has no path in '.gitmodules': refused.", e->name);
                else if (!ledger_submodule_path_safe(e->path)) {
                        _cleanup_free_ char *shown = ledger_one_line(e->path, 64);
                        r = error_set(ret_error, -EINVAL,
                                             "Submodule '%s' has an unsafe path '%s' (absolute, '.', '..' or .git components, "
                                             "backslashes, quotes or control characters): refused.", e->name, strempty(shown));
                } else
                        r = path_check_in_tree(tree, e, &e->commit, ret_error);

                for (size_t j = 0; r >= 0 && j < i; j++) {
                        if (streq(s[j].path, e->path))
                                r = error_set(ret_error, -EINVAL, "Submodules '%s' and '%s' have the same path: refused.",
                                                     s[j].name, e->name);
                        else if (name_nests(s[j].name, e->name) || name_nests(e->name, s[j].name))
                                r = error_set(ret_error, -EINVAL,
                                                     "Submodule names '%s' and '%s' nest in each other: refused.", s[j].name, e->name);
                }

                if (r >= 0 && super_url) {
                        _cleanup_free_ char *resolved = NULL;

                        if (!e->url)
                                r = error_set(ret_error, -EINVAL, "Submodule '%s' has no URL in '.gitmodules'.", e->name);
                        else
                                r = url_check(super_url, e->url, &resolved, ret_error, e->name);
                        if (r >= 0) {
                                free(e->url);
                                e->url = TAKE_PTR(resolved);
                        }
                } else if (r >= 0)
                        e->url = mfree_ptr(e->url);   /* Local sources: the URL is never used. */
        }
        if (r < 0) {
                ledger_submodules_free(s, n);
                return r;
        }
        *ret = s;
        *ret_n = n;
        return 0;
}

LedgerSubmodule *ledger_submodule_by_path(Ledger *l, const char *path) {
        for (size_t i = 0; i < l->n_subs; i++)
                if (streq(l->subs[i].path, path))
                        return &l->subs[i];
        return NULL;
}
