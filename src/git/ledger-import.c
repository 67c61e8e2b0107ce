/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs-util.h"
#include "json-util.h"
#include "known-hosts.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* ledger_create(): a task's ledger from its source, a local repository
 * (ledger-source.c reads it) or a URL (https, ssh: ledger-ssh.c, file),
 * its submodules with it, within the size the caller allows. */

typedef struct ImportSize {
        uint64_t checkout;      /* bytes the checkout of base writes */
        uint64_t max;
        bool too_big;
} ImportSize;

typedef struct TreeSum {
        git_odb *odb;
        uint64_t total, max;
        int error;
} TreeSum;

static int tree_sum_cb(const char *root, const git_tree_entry *e, void *userdata) {
        TreeSum *s = userdata;
        size_t size;
        git_object_t type;

        if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
                return 0;       /* Trees are walked into; gitlinks are never fetched. */
        if (git_odb_read_header(&size, &type, s->odb, git_tree_entry_id(e)) < 0) {
                s->error = -EBADMSG;
                return -1;
        }
        s->total += size;
        if (s->total > s->max) {
                s->error = -EFBIG;
                return -1;
        }
        return 0;
}

/* Sums what checking out tree writes, stopping as soon as it exceeds max. */
static int tree_size(git_repository *repo, git_tree *tree, uint64_t max, uint64_t *ret) {
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        TreeSum s = { .max = max };

        if (git_repository_odb(&odb, repo) < 0)
                return -EIO;
        s.odb = odb;
        if (git_tree_walk(tree, GIT_TREEWALK_PRE, tree_sum_cb, &s) < 0 && s.error == 0)
                s.error = -EIO;
        *ret = s.total;
        return s.error;
}

/* Counts the pack as it is made; libgit2 1.5's git_packbuilder_write()
 * reports garbage byte counts, so the pack is fed to an indexer by hand. */
typedef struct PackSink {
        git_indexer *indexer;
        git_indexer_progress stats;
        uint64_t written;
        ImportSize *size;
} PackSink;

static bool import_too_big(ImportSize *s, uint64_t bytes) {
        return s->max != UINT64_MAX && bytes > s->max - MIN(s->checkout, s->max);
}

static int pack_sink_cb(void *buf, size_t size, void *payload) {
        PackSink *p = payload;

        p->written += size;
        if (import_too_big(p->size, p->written)) {
                p->size->too_big = true;
                return -1;
        }
        return git_indexer_append(p->indexer, buf, size, &p->stats) < 0 ? -1 : 0;
}

static int pack_progress_cb(const git_indexer_progress *stats, void *payload) {
        ImportSize *s = payload;

        if (import_too_big(s, stats->received_bytes)) {
                s->too_big = true;
                return -1;
        }
        return 0;
}

static int peel_commit(git_repository *repo, const git_oid *id, git_oid *ret) {
        _cleanup_(git_object_freep) git_object *o = NULL, *peeled = NULL;

        if (git_object_lookup(&o, repo, id, GIT_OBJECT_ANY) < 0)
                return -ENOENT;
        if (git_object_peel(&peeled, o, GIT_OBJECT_COMMIT) < 0)
                return -EMEDIUMTYPE;
        git_oid_cpy(ret, git_object_id(peeled));
        return 0;
}

static int check_checkout_size(git_repository *repo, const git_oid *base, uint64_t max, const char *source,
                               uint64_t *ret, char **ret_error) {
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        int r;

        if (git_commit_lookup(&commit, repo, base) < 0 || git_commit_tree(&tree, commit) < 0)
                return error_set(ret_error, -EBADMSG, "Base commit of '%s' cannot be read: %s",
                                        source, ledger_git_message());
        r = tree_size(repo, tree, max, ret);
        if (r == -EFBIG)
                return error_set(ret_error, r,
                                        "Repository '%s' is too big: checking it out needs more than the limit of %" PRIu64 " bytes.",
                                        source, max);
        if (r < 0)
                return error_set(ret_error, r, "Base commit of '%s' is incomplete: %s", source, ledger_git_message());
        return 0;
}

/* Copies every object reachable from base out of a local repository into the
 * ledger. SECURITY: the source is never opened as a repository: its object
 * directory is attached to the ledger's object database as a read-only
 * alternate (never written to: libgit2 writes only to non-alternate
 * backends), its refs are read as files. So none of its config (filters,
 * hooks path, fsmonitor, alternates of its own), index or work tree is ever
 * looked at, and the only thing written is a new pack in the ledger. The
 * source's own info/alternates are not followed: it could name object
 * directories its owner cannot read but the daemon can. */
static int import_local(const char *ledger_path, int git_fd, int common_fd, int objects_fd, const char *what,
                        const char *base, const git_oid *commit, uint64_t max, git_oid *ret_base, uint64_t *ret_used,
                        char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        git_odb_backend *loose = NULL, *pack = NULL;
        char objects[PATH_MAX];
        git_oid id;
        int r;

        r = source_check_objects(objects_fd, ret_error);
        if (r < 0)
                return ret_error && *ret_error ? r : error_set(ret_error, r, "Cannot read the objects of '%s': %s", what, strerror(-r));

        if (git_repository_open_ext(&repo, ledger_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0 ||
            git_repository_odb(&odb, repo) < 0)
                return error_set(ret_error, -EIO, "Cannot open the new ledger: %s", ledger_git_message());

        /* Reached through the fd, so that a directory the daemon cannot reach
         * by path (a private home) works when the submitter handed it over. */
        (void) snprintf(objects, sizeof(objects), "/proc/self/fd/%d", objects_fd);
        if (git_odb_backend_pack(&pack, objects) < 0)
                return error_set(ret_error, -EIO, "Cannot read the packs of '%s': %s", what, ledger_git_message());
        if (git_odb_add_alternate(odb, pack, 2) < 0) {
                pack->free(pack);
                return error_set(ret_error, -EIO, "Cannot attach '%s': %s", what, ledger_git_message());
        }
        if (git_odb_backend_loose(&loose, objects, -1, 0, 0, 0) < 0)
                return error_set(ret_error, -EIO, "Cannot read the objects of '%s': %s", what, ledger_git_message());
        if (git_odb_add_alternate(odb, loose, 1) < 0) {
                loose->free(loose);
                return error_set(ret_error, -EIO, "Cannot attach '%s': %s", what, ledger_git_message());
        }

        if (commit) {
                /* A gitlink: exactly that commit, no ref is looked at. */
                if (peel_commit(repo, commit, ret_base) < 0 || !git_oid_equal(ret_base, commit)) {
                        char hex[GIT_OID_HEXSZ + 1];
                        git_oid_tostr(hex, sizeof(hex), commit);
                        return error_set(ret_error, -ENOENT, "Commit %s of %s is missing from its repository.", hex, what);
                }
        } else {
                r = source_resolve(repo, git_fd, common_fd, base ?: "HEAD", &id);
                if (r == -ENOENT && streq(base ?: "HEAD", "HEAD") && source_head_unborn(git_fd))
                        return error_set(ret_error, r, "Repository '%s' has no commit yet: commit something first "
                                                "(or name an existing commit with --base).", what);
                if (r < 0)
                        return error_set(ret_error, r, "'%s' does not name a commit in '%s'.", base ?: "HEAD", what);
                r = peel_commit(repo, &id, ret_base);
                if (r < 0)
                        return error_set(ret_error, r, "'%s' does not name a commit in '%s'.", base ?: "HEAD", what);
        }

        ImportSize size = { .max = max };
        r = check_checkout_size(repo, ret_base, max, what, &size.checkout, ret_error);
        if (r < 0)
                return r;

        /* Delta search is what makes copying slow (seconds for a few
         * thousand files) and buys little on a local disk: a window memory
         * of one byte keeps libgit2's delta window at a single object. The
         * setting is dropped again after the copy, so that delivery packs
         * (bundles, pushes) are compressed as usual. */
        _cleanup_(git_config_freep) git_config *cfg = NULL;
        if (git_repository_config(&cfg, repo) < 0 || git_config_set_int64(cfg, "pack.windowMemory", 1) < 0)
                return error_set(ret_error, -EIO, "Cannot configure the ledger: %s", ledger_git_message());

        _cleanup_(git_packbuilder_freep) git_packbuilder *pb = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *walk = NULL;
        if (git_packbuilder_new(&pb, repo) < 0 || git_revwalk_new(&walk, repo) < 0 ||
            git_revwalk_push(walk, ret_base) < 0)
                return error_set(ret_error, -EIO, "Cannot walk the history of '%s': %s", what, ledger_git_message());
        /* One thread: the machine is shared with the sandboxes. */
        (void) git_packbuilder_set_threads(pb, 1);
        if (git_packbuilder_insert_walk(pb, walk) < 0)
                return error_set(ret_error, -EBADMSG, "History of '%s' is incomplete: %s", what, ledger_git_message());

        _cleanup_free_ char *pack_dir = NULL;
        if (asprintf(&pack_dir, "%s/objects/pack", ledger_path) < 0)
                return -ENOMEM;
        git_indexer_options xo;
        (void) git_indexer_options_init(&xo, GIT_INDEXER_OPTIONS_VERSION);
        PackSink sink = { .size = &size };
        if (git_indexer_new(&sink.indexer, pack_dir, 0, NULL, &xo) < 0)
                return error_set(ret_error, -EIO, "Cannot write into the ledger: %s", ledger_git_message());
        r = git_packbuilder_foreach(pb, pack_sink_cb, &sink) < 0 ? -EIO : 0;
        if (r >= 0 && git_indexer_commit(sink.indexer, &sink.stats) < 0)
                r = -EIO;
        git_indexer_free(sink.indexer);
        (void) git_config_delete_entry(cfg, "pack.windowMemory");
        if (size.too_big)
                return error_set(ret_error, -EFBIG,
                                        "Repository '%s' is too big: its history and checkout exceed the limit of %" PRIu64 " bytes.",
                                        what, max);
        if (r < 0)
                return error_set(ret_error, r, "Cannot copy the history of '%s': %s", what, ledger_git_message());
        *ret_used = size.checkout + sink.written;
        return 0;
}

typedef struct FetchPayload {
        ImportSize size;
        uint64_t received;
        SshAuth *ssh;           /* ssh:// only */
} FetchPayload;

static int fetch_progress_cb(const git_indexer_progress *stats, void *payload) {
        FetchPayload *p = payload;

        p->received = stats->received_bytes;
        return pack_progress_cb(stats, &p->size);
}

static int fetch_certificate_cb(git_cert *cert, int valid, const char *host, void *payload) {
        return ledger_ssh_certificate_check(((FetchPayload *) payload)->ssh, cert, valid, host);
}

static int fetch_credentials_cb(git_credential **out, const char *url, const char *username_from_url, unsigned allowed,
                                void *payload) {
        return ledger_ssh_credentials(((FetchPayload *) payload)->ssh, out, url, username_from_url, allowed);
}

#define FETCH_PREFIX "refs/agentfab/source/"

static int delete_fetch_refs(git_repository *repo) {
        git_reference_iterator *it = NULL;
        git_reference *ref;
        int r = 0;

        if (git_reference_iterator_glob_new(&it, repo, FETCH_PREFIX "*") < 0)
                return -EIO;
        while (git_reference_next(&ref, it) == 0) {
                if (git_reference_delete(ref) < 0 && r == 0)
                        r = -EIO;
                git_reference_free(ref);
        }
        git_reference_iterator_free(it);
        return r;
}

/* Fetches from a URL into the ledger. Only libgit2's transports run: no
 * helper program, no hooks; the daemon's git config is cut off (see
 * ledger_library_init()), so no credential helper or URL rewrite applies. */
static int import_url(git_repository *repo, const char *url, const char *base, const LedgerOptions *o, uint64_t max,
                      git_oid *ret_base, uint64_t *ret_used, char **ret_error) {
        _cleanup_(git_remote_freep) git_remote *remote = NULL;
        git_remote_callbacks cbs;
        (void) git_remote_init_callbacks(&cbs, GIT_REMOTE_CALLBACKS_VERSION);
        git_fetch_options fo;
        (void) git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
        _cleanup_git_buf_ git_buf head = { 0 };
        FetchPayload p = { .size = { .max = max } };
        char *specs[] = { (char *) "+refs/heads/*:" FETCH_PREFIX "heads/*", (char *) "+refs/tags/*:" FETCH_PREFIX "tags/*" };
        git_strarray refspecs = { specs, ELEMENTSOF(specs) };
        git_oid id;
        int r;

        /* A remote's HEAD is its default branch. */
        if (base && streq(base, "HEAD"))
                base = NULL;

        cbs.transfer_progress = fetch_progress_cb;
        cbs.payload = &p;

        SshAuth ssh;
        r = ledger_ssh_prepare(&ssh, url, o, ret_error);
        if (r < 0)
                return r;
        if (r > 0) {
                p.ssh = &ssh;
                cbs.certificate_check = fetch_certificate_cb;
                cbs.credentials = fetch_credentials_cb;
        }
        fo.callbacks = cbs;
        fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
        fo.update_fetchhead = 0;

        if (git_remote_create_anonymous(&remote, repo, url) < 0)
                return error_set(ret_error, -EINVAL, "Invalid repository URL '%s': %s", url, ledger_git_message());
        if (git_remote_connect(remote, GIT_DIRECTION_FETCH, &cbs, NULL, NULL) < 0)
                return error_set(ret_error, ledger_ssh_errno(&ssh, -ECONNREFUSED), "Cannot connect to '%s': %s", url,
                                 ledger_ssh_message(&ssh));
        if (!base && git_remote_default_branch(&head, remote) < 0)
                return error_set(ret_error, -ENOENT, "'%s' has no default branch: %s", url, ledger_git_message());
        if (git_remote_download(remote, &refspecs, &fo) < 0) {
                if (p.size.too_big)
                        return error_set(ret_error, -EFBIG, "Repository '%s' is too big: it exceeds the limit of %" PRIu64 " bytes.",
                                                url, max);
                return error_set(ret_error, ledger_ssh_errno(&ssh, -EIO), "Cannot fetch '%s': %s", url,
                                 ledger_ssh_message(&ssh));
        }
        if (git_remote_update_tips(remote, &cbs, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, NULL) < 0)
                return error_set(ret_error, -EIO, "Cannot record what was fetched from '%s': %s", url, ledger_git_message());
        (void) git_remote_disconnect(remote);

        r = -ENOENT;
        if (!base) {
                _cleanup_free_ char *name = NULL;
                if (!strneq(head.ptr, "refs/heads/", 11) || asprintf(&name, FETCH_PREFIX "heads/%s", head.ptr + 11) < 0)
                        return error_set(ret_error, -ENOENT, "'%s' has no usable default branch.", url);
                r = git_reference_name_to_id(&id, repo, name) < 0 ? -ENOENT : 0;
        } else if (ledger_oid_from_hex(base, &id) >= 0)
                r = 0;
        else {
                static const char *const patterns[] = { FETCH_PREFIX "heads/%s", FETCH_PREFIX "tags/%s" };
                for (size_t i = 0; i < ELEMENTSOF(patterns) && r < 0; i++) {
                        _cleanup_free_ char *name = NULL;
                        int valid = 0;

                        if (asprintf(&name, patterns[i], base) < 0)
                                return -ENOMEM;
                        if (git_reference_name_is_valid(&valid, name) < 0 || !valid)
                                continue;
                        r = git_reference_name_to_id(&id, repo, name) < 0 ? -ENOENT : 0;
                }
        }
        (void) delete_fetch_refs(repo);
        if (r >= 0)
                r = peel_commit(repo, &id, ret_base);
        if (r < 0)
                return error_set(ret_error, r, "'%s' does not name a commit in '%s'.", base ?: "HEAD", url);

        uint64_t checkout;
        r = check_checkout_size(repo, ret_base, max, url, &checkout, ret_error);
        if (r < 0)
                return r;
        /* While fetching, the checkout size was not known yet. */
        if (max != UINT64_MAX && checkout > max - MIN(max, p.received))
                return error_set(ret_error, -EFBIG, "Repository '%s' is too big: it exceeds the limit of %" PRIu64 " bytes.",
                                        url, max);
        *ret_used = checkout + p.received;
        return 0;
}

static bool source_is_url(const char *source) {
        return source && strstr(source, "://");
}

/* SECURITY: https and ssh only on the network (no plain http, no git://);
 * ssh only with the key and known hosts given in LedgerOptions, never the
 * daemon's own (no agent, no ~/.ssh); file:// is for tests and local mirrors. */
static bool url_allowed(const char *url) {
        return strneq(url, "https://", 8) || strneq(url, "ssh://", 6) || strneq(url, "file://", 7);
}

/* SECURITY: filters are off, so not even the built-in ones (ident, eol)
 * look at .gitattributes; libgit2 has no external filter or hook support at
 * all. Gitlinks become empty directories. */
static int checkout_base(Ledger *l, git_tree *tree, char **ret_error) {
        git_checkout_options co;
        (void) git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        co.checkout_strategy = GIT_CHECKOUT_FORCE;
        co.disable_filters = 1;
        co.dir_mode = 0755;
        if (git_checkout_tree(l->repo, (git_object *) tree, &co) < 0)
                return error_set(ret_error, -EIO, "Cannot check out the workspace: %s", ledger_git_message());
        return 0;
}

static int branch_create(git_repository *repo, const git_oid *base, const char *ref) {
        _cleanup_(git_reference_freep) git_reference *base_ref = NULL, *branch_ref = NULL;

        if (git_reference_create(&base_ref, repo, LEDGER_BASE_REF, base, 0, "agentfab: base") < 0 ||
            git_reference_create(&branch_ref, repo, ref, base, 0, "agentfab: create") < 0 ||
            git_repository_set_head(repo, ref) < 0)
                return -EIO;
        return 0;
}

/* What the fetch of submodules shares across all of them. */
typedef struct SubmoduleImport {
        const LedgerOptions *o;
        uint64_t max, used;     /* the bound for everything, and what the superproject and earlier submodules took */
        unsigned count;
        char **error;
} SubmoduleImport;

static int submodules_create(Ledger *l, SubmoduleImport *x, int src_git_fd, int src_common_fd, const char *url, unsigned depth);

/* Fetches one submodule into <parent ledger>/modules/<name> at exactly its
 * gitlink, checks it out into its directory and goes on with its own. */
static int submodule_create(Ledger *parent, LedgerSubmodule *s, SubmoduleImport *x, int src_git_fd, int src_common_fd,
                            unsigned depth) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_free_ char *git_path = NULL, *what = NULL, *rel = NULL;
        _cleanup_close_ int sub_git_fd = -EBADF, objects_fd = -EBADF;
        char hex[GIT_OID_HEXSZ + 1];
        uint64_t used = 0;
        git_oid id;
        int r;

        git_oid_tostr(hex, sizeof(hex), &s->commit);
        if (asprintf(&what, "submodule '%s' (path '%s')", s->name, s->path) < 0 || asprintf(&rel, "modules/%s", s->name) < 0)
                return -ENOMEM;
        r = ledger_submodule_git_path(parent, s->name, &git_path);
        if (r < 0)
                return r;

        /* Names may hold slashes (git uses the path as the name): MKPATH
         * makes the directories between, all our own. */
        git_repository_init_options io;
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT | GIT_REPOSITORY_INIT_MKPATH;
        io.mode = GIT_REPOSITORY_INIT_SHARED_UMASK;
        if (git_repository_init_ext(&repo, git_path, &io) < 0)
                return error_set(x->error, -EIO, "Cannot initialize the ledger of %s: %s", what, ledger_git_message());

        uint64_t left = x->max == UINT64_MAX ? UINT64_MAX : x->max - MIN(x->max, x->used);
        if (left == 0)
                r = -EFBIG;
        else if (!s->url) {
                /* Where git submodule update --init keeps it: modules/<name>
                 * of the git directory (of a linked worktree, or the common
                 * one). SECURITY: opened below the source's git directory,
                 * never through a symlink, never as a repository. */
                sub_git_fd = src_git_fd >= 0 ? ledger_open_beneath_dir(src_git_fd, rel) : -ENOENT;
                if (sub_git_fd == -ENOENT && src_common_fd >= 0 && src_common_fd != src_git_fd)
                        sub_git_fd = ledger_open_beneath_dir(src_common_fd, rel);
                if (sub_git_fd == -ENOENT)
                        return error_set(x->error, -ENOENT,
                                                "Submodule '%s' (path '%s') is not initialized in the repository: "
                                                "run git submodule update --init there first.", s->name, s->path);
                if (sub_git_fd < 0)
                        return error_set(x->error, sub_git_fd, "Cannot open the repository of %s: %s", what, strerror(-sub_git_fd));
                objects_fd = openat(sub_git_fd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (objects_fd < 0)
                        return error_set(x->error, -errno, "Cannot open the objects of %s: %m", what);

                git_repository_free(TAKE_PTR(repo));
                r = import_local(git_path, sub_git_fd, sub_git_fd, objects_fd, what, NULL, &s->commit, left, &id, &used, x->error);
                if (r >= 0 && git_repository_open_ext(&repo, git_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                        r = error_set(x->error, -EIO, "Cannot open the ledger of %s: %s", what, ledger_git_message());
        } else {
                r = import_url(repo, s->url, hex, x->o, left, &id, &used, x->error);
                if (r == -ENOENT)
                        r = error_set(x->error, r, "Commit %s of %s is missing from '%s'.", hex, what, s->url);
        }
        if (r == -EFBIG)
                return error_set(x->error, r,
                                        "Repository is too big: with %s, its history and checkout exceed the limit of %" PRIu64 " bytes.",
                                        what, x->max);
        if (r < 0)
                return r;
        x->used += used;

        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        if (git_commit_lookup(&commit, repo, &s->commit) < 0 || git_commit_tree(&tree, commit) < 0)
                return error_set(x->error, -EBADMSG, "The copied history of %s is incomplete: %s", what, ledger_git_message());
        if (branch_create(repo, &s->commit, parent->ref) < 0)
                return error_set(x->error, -EIO, "Cannot create the branch of %s: %s", what, ledger_git_message());

        int fd = ledger_open_beneath_dir(parent->workspace_fd, s->path);
        if (fd < 0)
                return error_set(x->error, fd, "Cannot open the directory of %s: %s", what, strerror(-fd));
        r = ledger_attach_fd(repo, fd, parent->branch, &s->ledger);
        if (r < 0)
                return error_set(x->error, r, "Cannot attach %s: %s", what, strerror(-r));
        repo = NULL;
        s->ledger->base = s->commit;
        s->ledger->max_bytes = parent->max_bytes;

        r = checkout_base(s->ledger, tree, x->error);
        if (r < 0)
                return r;
        return submodules_create(s->ledger, x, sub_git_fd, sub_git_fd, s->url, depth + 1);
}

static int submodules_create(Ledger *l, SubmoduleImport *x, int src_git_fd, int src_common_fd, const char *url, unsigned depth) {
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        int r;

        r = ledger_base_tree(l, &tree);
        if (r < 0)
                return error_set(x->error, r, "Cannot read base: %s", ledger_git_message());
        r = ledger_submodules_read(l->repo, tree, url, &l->subs, &l->n_subs, x->error);
        if (r < 0)
                return r;
        if (l->n_subs > 0 && depth > LEDGER_SUBMODULE_DEPTH_MAX)
                return error_set(x->error, -ELOOP, "Submodules are nested more than %u deep: refused.", LEDGER_SUBMODULE_DEPTH_MAX);

        for (size_t i = 0; i < l->n_subs; i++) {
                if (++x->count > LEDGER_SUBMODULES_MAX)
                        return error_set(x->error, -E2BIG, "The repository has more than %u submodules: refused.",
                                                LEDGER_SUBMODULES_MAX);
                r = submodule_create(l, &l->subs[i], x, src_git_fd, src_common_fd, depth);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int create_internal(int task_dir_fd, const char *source, int source_fd, const char *base, const char *branch,
                           const LedgerOptions *o, uint64_t max, char **ret_error, Ledger **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_close_ int git_fd = -EBADF, common_fd = -EBADF, objects_fd = -EBADF;
        git_repository_init_options io;
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        _cleanup_free_ char *ref = NULL;
        bool url = source_is_url(source) && source_fd < 0;
        bool submodules = o && o->submodules;
        char ledger_path[64];
        uint64_t used = 0;
        git_oid base_id;
        int r;

        if (ledger_branch_to_ref(branch, &ref) < 0)
                return error_set(ret_error, -EINVAL, "Invalid branch name '%s'.", strempty(branch));

        if (mkdirat(task_dir_fd, "ledger.git", 0700) < 0 || mkdirat(task_dir_fd, "workspace", 0755) < 0)
                return error_set(ret_error, -errno, "Cannot make the ledger directories: %m");

        (void) snprintf(ledger_path, sizeof(ledger_path), "/proc/self/fd/%d/ledger.git", task_dir_fd);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT;
        io.mode = GIT_REPOSITORY_INIT_SHARED_UMASK;
        if (git_repository_init_ext(&repo, ledger_path, &io) < 0)
                return error_set(ret_error, -EIO, "Cannot initialize the ledger: %s", ledger_git_message());

        _cleanup_(git_config_freep) git_config *cfg = NULL;
        if (git_repository_config(&cfg, repo) < 0 ||
            (max != UINT64_MAX && git_config_set_int64(cfg, "agentfab.maxbytes", (int64_t) MIN(max, (uint64_t) INT64_MAX)) < 0) ||
            (submodules && git_config_set_bool(cfg, "agentfab.submodules", 1) < 0))
                return error_set(ret_error, -EIO, "Cannot configure the ledger: %s", ledger_git_message());

        if (url)
                r = import_url(repo, source, base, o, max, &base_id, &used, ret_error);
        else {
                /* Named as the submitter knows it, never as "/proc/self/fd/N". */
                const char *what = source ?: (o ? o->source_name : NULL) ?: "repository_fd";

                r = source_open(source, source_fd, &git_fd, &common_fd, &objects_fd);
                if (r < 0)
                        return error_set(ret_error, r, "'%s' is not a readable git repository: %s", what, strerror(-r));
                git_repository_free(TAKE_PTR(repo));
                r = import_local(ledger_path, git_fd, common_fd, objects_fd, what, base, NULL, max, &base_id, &used, ret_error);
                if (r >= 0 && git_repository_open_ext(&repo, ledger_path, GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
                        r = error_set(ret_error, -EIO, "Cannot open the ledger: %s", ledger_git_message());
        }
        if (r < 0)
                return r;

        /* Reopened without the source attached: this proves the copy is complete. */
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        if (git_commit_lookup(&commit, repo, &base_id) < 0 || git_commit_tree(&tree, commit) < 0)
                return error_set(ret_error, -EBADMSG, "The copied history is incomplete: %s", ledger_git_message());

        if (branch_create(repo, &base_id, ref) < 0)
                return error_set(ret_error, -EIO, "Cannot create branch '%s': %s", branch, ledger_git_message());

        _cleanup_(ledger_freep) Ledger *l = NULL;
        r = ledger_attach(task_dir_fd, repo, branch, &l);
        if (r < 0)
                return error_set(ret_error, r, "Cannot attach the workspace: %s", strerror(-r));
        repo = NULL;    /* Owned by l now. */
        l->base = base_id;
        l->max_bytes = max;

        r = checkout_base(l, tree, ret_error);
        if (r < 0)
                return r;

        if (submodules) {
                SubmoduleImport x = { .o = o, .max = max, .used = used, .error = ret_error };

                r = submodules_create(l, &x, git_fd, common_fd, url ? source : NULL, 1);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(l);
        return 0;
}

int ledger_create(int task_dir_fd, const char *source, int source_fd, const char *base, const char *branch,
                  const LedgerOptions *o, char **ret_error, Ledger **ret) {
        uint64_t max = o ? o->max_bytes : UINT64_MAX;
        int r;

        assert(task_dir_fd >= 0);
        assert(ret);

        ledger_library_init();

        if (!source && source_fd < 0)
                return error_set(ret_error, -EINVAL, "No source repository given.");
        if (source_fd < 0 && source_is_url(source) && !url_allowed(source))
                return error_set(ret_error, -EPROTONOSUPPORT, "Only https://, ssh:// and file:// URLs are supported, not '%s'.", source);
        if (max == 0)
                return error_set(ret_error, -EINVAL, "A size bound of 0 bytes admits nothing; UINT64_MAX means none.");
        if (faccessat(task_dir_fd, "ledger.git", F_OK, AT_SYMLINK_NOFOLLOW) >= 0 ||
            faccessat(task_dir_fd, "workspace", F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                return error_set(ret_error, -EEXIST, "The task directory already has a ledger.");

        r = create_internal(task_dir_fd, source, source_fd, base, branch, o, max, ret_error, ret);
        /* The whole ledger on the disk before the task that holds it is
         * recorded: every step builds on its base's objects. (The workspace
         * is not: a run begins by resetting it to the checkpoint.) */
        if (r >= 0) {
                r = ledger_sync_tree(task_dir_fd, "ledger.git");
                if (r < 0) {
                        *ret = ledger_free(*ret);
                        r = error_set(ret_error, r, "Cannot make the ledger durable: %s", strerror(-r));
                }
        }
        if (r < 0) {
                /* Nothing half-made stays behind. */
                (void) rm_rf_at(task_dir_fd, "ledger.git");
                (void) rm_rf_at(task_dir_fd, "workspace");
        }
        return r;
}

