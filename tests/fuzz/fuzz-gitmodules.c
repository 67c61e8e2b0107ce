/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A repository's .gitmodules, as ledger_submodules_read() reads it from
 * base's tree: our own strict parser, the name and path checks against the
 * tree, and the URL checks and relative URL resolution. The tree lives in an
 * in-memory object database, so nothing touches the disk.
 *
 * Invariants of an accepted list: at most LEDGER_SUBMODULES_MAX entries;
 * names and paths safe, paths distinct and each a gitlink of the tree (its
 * commit recorded), names not nesting; no URL for a local source; for a URL
 * source only https://, ssh:// or the superproject's own scheme and host,
 * never climbing out with "..", never with control characters. */
#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/repository.h>

#include "fuzz.h"
#include "ledger-internal.h"
#include "string-util.h"

static git_repository *repo;
static git_odb_backend *mempack;
static git_oid link_commit[3];
static const char *const link_paths[3] = { "sub", "lib/x", "deep/a/b/c" };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        git_odb *odb = NULL;

        fuzz_quiet();
        ledger_library_init();
        /* libgit2 keeps looked-up trees in a cache of up to 256 MB: with a
         * new tree every input that is memory that only grows. */
        git_libgit2_opts(GIT_OPT_ENABLE_CACHING, 0);
        if (git_repository_new(&repo) < 0 || git_odb_new(&odb) < 0 || git_mempack_new(&mempack) < 0 ||
            git_odb_add_backend(odb, mempack, 1) < 0)
                abort();
        git_repository_set_odb(repo, odb);
        git_odb_free(odb);
        for (int i = 0; i < 3; i++)
                memset(link_commit[i].id, 0x11 * (i + 1), sizeof(link_commit[i].id));
        return 0;
}

static git_oid tree_of(const char *const *names, const git_oid *ids, const git_filemode_t *modes, size_t n) {
        git_treebuilder *b = NULL;
        git_oid id;

        if (git_treebuilder_new(&b, repo, NULL) < 0)
                abort();
        for (size_t i = 0; i < n; i++)
                if (git_treebuilder_insert(NULL, b, names[i], &ids[i], modes[i]) < 0)
                        abort();
        if (git_treebuilder_write(&id, b) < 0)
                abort();
        git_treebuilder_free(b);
        return id;
}

/* / .gitmodules sub=gitlink lib/{x=gitlink,y} link->lib deep/a/b/c=gitlink.
 * Everything but .gitmodules and the top tree is made once per reset of the
 * in-memory database (every 256 inputs, to bound its memory). */
static git_tree *tree_make(const uint8_t *text, size_t size) {
        static git_oid lnk, lib, deep;
        static unsigned uses = 0;
        git_oid gm, top;
        git_tree *tree = NULL;

        if (uses++ % 256 == 0) {
                git_oid y, t2, t3;

                git_mempack_reset(mempack);
                if (git_blob_create_from_buffer(&y, repo, "y\n", 2) < 0 || git_blob_create_from_buffer(&lnk, repo, "lib", 3) < 0)
                        abort();
                lib = tree_of((const char *[]) { "x", "y" }, (git_oid[]) { link_commit[1], y },
                              (git_filemode_t[]) { GIT_FILEMODE_COMMIT, GIT_FILEMODE_BLOB }, 2);
                t3 = tree_of((const char *[]) { "c" }, &link_commit[2], (git_filemode_t[]) { GIT_FILEMODE_COMMIT }, 1);
                t2 = tree_of((const char *[]) { "b" }, &t3, (git_filemode_t[]) { GIT_FILEMODE_TREE }, 1);
                deep = tree_of((const char *[]) { "a" }, &t2, (git_filemode_t[]) { GIT_FILEMODE_TREE }, 1);
        }
        if (git_blob_create_from_buffer(&gm, repo, text, size) < 0)
                abort();
        top = tree_of((const char *[]) { ".gitmodules", "deep", "lib", "link", "sub" },
                      (git_oid[]) { gm, deep, lib, lnk, link_commit[0] },
                      (git_filemode_t[]) { GIT_FILEMODE_BLOB, GIT_FILEMODE_TREE, GIT_FILEMODE_TREE, GIT_FILEMODE_LINK,
                                           GIT_FILEMODE_COMMIT }, 5);
        if (git_tree_lookup(&tree, repo, &top) < 0)
                abort();
        return tree;
}

static bool has_control(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s <= ' ' || *s == 127 || *s == '\\')
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const supers[] = { NULL, "https://git.example.org/org/repo.git", "ssh://git@host:2222/r",
                                              "https://h", "file:///srv/git/super/", NULL, "https://a/b/c/d/", NULL };
        LedgerSubmodule *s = NULL;
        size_t n = 0;
        char *error = NULL;

        if (size < 1 || size > 64 * 1024)
                return -1;
        const char *super = supers[data[0] & 7];
        git_tree *tree = tree_make(data + 1, size - 1);

        int r = ledger_submodules_read(repo, tree, super, &s, &n, &error);
        if (r < 0) {
                FUZZ_CHECK(!s && n == 0, "nothing on failure");
                FUZZ_CHECK(r == -ENOMEM || error, "a refusal says why (%d)", r);
        } else {
                FUZZ_CHECK(n <= LEDGER_SUBMODULES_MAX, "%zu submodules", n);
                for (size_t i = 0; i < n; i++) {
                        LedgerSubmodule *e = &s[i];
                        size_t k;

                        FUZZ_CHECK(ledger_submodule_name_safe(e->name) && ledger_submodule_path_safe(e->path),
                                   "name '%s' path '%s'", e->name, e->path);
                        for (k = 0; k < 3 && !streq(e->path, link_paths[k]); k++)
                                ;
                        FUZZ_CHECK(k < 3 && git_oid_equal(&e->commit, &link_commit[k]), "'%s' is a gitlink of the tree", e->path);
                        for (size_t j = 0; j < i; j++) {
                                size_t l = strlen(s[j].name);
                                FUZZ_CHECK(!streq(s[j].path, e->path), "paths distinct");
                                FUZZ_CHECK(!(strneq(s[j].name, e->name, l) && e->name[l] == '/'), "names do not nest");
                        }
                        if (!super) {
                                FUZZ_CHECK(!e->url, "no URL for local sources");
                                continue;
                        }
                        FUZZ_CHECK(e->url && !has_control(e->url) && e->url[0] != '-', "URL '%s'", strempty(e->url));
                        if (strneq(e->url, "https://", 8) || strneq(e->url, "ssh://", 6))
                                FUZZ_CHECK(e->url[strcspn(e->url, ":") + 3] != '/', "a host in '%s'", e->url);
                        /* Resolved against the superproject: never above its host. */
                        const char *auth = strstr(super, "://") + 3;
                        size_t host_end = (size_t) (auth - super) + strcspn(auth, "/");
                        if (!strneq(e->url, "https://", 8) && !strneq(e->url, "ssh://", 6))
                                FUZZ_CHECK(strneq(e->url, super, host_end) && e->url[host_end] == '/',
                                           "'%s' keeps the superproject's scheme and host", e->url);
                        /* Only a relative URL can have become file://: it is
                         * resolved completely, no dot components left. (An
                         * absolute https:// URL is the server's to interpret.) */
                        if (strneq(e->url, "file://", 7))
                                FUZZ_CHECK(!strstr(e->url, "/../") && !strstr(e->url, "/./") && !strstr(e->url + 8, "//"),
                                           "'%s' has no dot components left", e->url);
                }
                ledger_submodules_free(s, n);
        }
        free(error);
        git_tree_free(tree);
        return 0;
}
