/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2/sys/mempack.h>

#include "fs-util.h"
#include "ledger-internal.h"
#include "log.h"
#include "string-util.h"
#include "trace.h"

/* Bundles: the task's branch exported as one, one checked and imported
 * (its header and pack bounded before anything is written), and a whole
 * source repository as one (agentfabctl submit, agentfabd). */

#define BUNDLE_HEADER_MAX (64U * 1024U)

static int pack_write_cb(void *buf, size_t size, void *payload) {
        int *fd = payload;
        return ledger_write_all(*fd, buf, size) < 0 ? -1 : 0;
}

int ledger_export_bundle(Ledger *l, int out_fd) {
        _cleanup_(git_packbuilder_freep) git_packbuilder *pb = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_(git_commit_freep) git_commit *bc = NULL;
        _cleanup_free_ char *header = NULL, *comment = NULL;
        char base[GIT_OID_HEXSZ + 1], tip_hex[GIT_OID_HEXSZ + 1];
        git_oid tip;
        int r;

        assert(l);
        assert(out_fd >= 0);

        r = ledger_tip(l, &tip);
        if (r < 0)
                return r;
        if (git_oid_equal(&tip, &l->base))
                return -ENODATA;        /* Like git bundle: nothing to deliver. */

        if (git_commit_lookup(&bc, l->repo, &l->base) < 0)
                return -EBADMSG;
        comment = ledger_one_line(git_commit_summary(bc), LEDGER_SUBJECT_MAX);
        if (!comment)
                return -ENOMEM;
        git_oid_tostr(base, sizeof(base), &l->base);
        git_oid_tostr(tip_hex, sizeof(tip_hex), &tip);
        if (asprintf(&header, "# v2 git bundle\n-%s %s\n%s %s\n\n", base, comment, tip_hex, l->ref) < 0)
                return -ENOMEM;

        /* The pack holds base..tip only, without deltas against objects
         * outside it (libgit2 makes no thin packs): the receiver needs
         * nothing but the prerequisite's history. */
        r = ledger_walk_new(l, &w);
        if (r < 0)
                return r;
        if (git_packbuilder_new(&pb, l->repo) < 0)
                return -EIO;
        (void) git_packbuilder_set_threads(pb, 1);
        if (git_packbuilder_insert_walk(pb, w) < 0)
                return log_debug_errno(-EIO, "Cannot pack: %s", ledger_git_message());

        r = ledger_write_all(out_fd, header, strlen(header));
        if (r < 0)
                return r;
        if (git_packbuilder_foreach(pb, pack_write_cb, &out_fd) < 0)
                return -EIO;
        return 0;
}

/* Parses "# v2 git bundle\n", prerequisites "-<id> [comment]", refs
 * "<id> <refname>", up to the blank line. Takes the first branch ref. */
int ledger_bundle_header_parse(char *text, BundleHeader *h, char **ret_error) {
        char *line = text, *next;

        next = strchr(line, '\n');
        if (!next)
                return error_set(ret_error, -EBADMSG, "Not a git bundle.");
        *next++ = '\0';
        if (!streq(line, "# v2 git bundle"))
                return error_set(ret_error, -EBADMSG, "Not a version 2 git bundle.");

        for (line = next; line && *line; line = next) {
                bool prereq = line[0] == '-';
                char hex[GIT_OID_HEXSZ + 1];
                git_oid id;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (prereq)
                        line++;
                if (strlen(line) < GIT_OID_HEXSZ || (line[GIT_OID_HEXSZ] != '\0' && line[GIT_OID_HEXSZ] != ' '))
                        return error_set(ret_error, -EBADMSG, "Malformed bundle header.");
                memcpy(hex, line, GIT_OID_HEXSZ);
                hex[GIT_OID_HEXSZ] = '\0';
                if (strspn(hex, "0123456789abcdef") != GIT_OID_HEXSZ || git_oid_fromstr(&id, hex) < 0)
                        return error_set(ret_error, -EBADMSG, "Malformed object id in bundle header.");

                if (prereq) {
                        if (h->n_prereqs >= BUNDLE_PREREQS_MAX)
                                return error_set(ret_error, -E2BIG, "Bundle has too many prerequisites.");
                        h->prereqs[h->n_prereqs++] = id;
                } else if (!h->have_tip && line[GIT_OID_HEXSZ] == ' ' && strneq(line + GIT_OID_HEXSZ + 1, "refs/heads/", 11)) {
                        h->tip = id;
                        h->have_tip = true;
                }
        }
        if (!h->have_tip)
                return error_set(ret_error, -EBADMSG, "Bundle carries no branch.");
        return 0;
}

/* The smallest object a pack can hold: a one-byte type and size, and an
 * empty zlib stream (8 bytes). */
#define PACK_OBJECT_MIN 9U
#define PACK_OBJECTS_MAX (UINT32_C(1) << 26)

int ledger_pack_header_check(const uint8_t h[static 12], uint64_t max_bytes, char **ret_error) {
        uint32_t version = (uint32_t) h[4] << 24 | (uint32_t) h[5] << 16 | (uint32_t) h[6] << 8 | h[7];
        uint32_t objects = (uint32_t) h[8] << 24 | (uint32_t) h[9] << 16 | (uint32_t) h[10] << 8 | h[11];

        if (memcmp(h, "PACK", 4) != 0 || !IN_SET(version, 2, 3))
                return error_set(ret_error, -EBADMSG, "Bundle's pack has no valid header.");
        if (objects > PACK_OBJECTS_MAX)
                return error_set(ret_error, -EFBIG, "Bundle's pack claims %" PRIu32 " objects, more than the %" PRIu32 " accepted.",
                                        objects, PACK_OBJECTS_MAX);
        if (max_bytes != UINT64_MAX && objects > max_bytes / PACK_OBJECT_MIN)
                return error_set(ret_error, -EFBIG, "Bundle's pack claims %" PRIu32 " objects, more than fit in the limit of %" PRIu64 " bytes.",
                                        objects, max_bytes);
        return 0;
}

typedef struct ImportLimit {
        uint64_t max, seen;
} ImportLimit;

int ledger_import_bundle(const char *repo_path, int bundle_fd, const char *branch, uint64_t max_bytes, char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_reference_freep) git_reference *existing = NULL, *ref = NULL;
        _cleanup_(git_odb_freep) git_odb *odb = NULL;
        _cleanup_free_ char *buf = NULL, *name = NULL;
        _cleanup_free_ BundleHeader *h = NULL;
        size_t n = 0;
        char *end = NULL;
        int valid = 0, r;

        assert(repo_path);
        assert(bundle_fd >= 0);

        ledger_library_init();
        if (max_bytes == 0)
                max_bytes = UINT64_MAX;

        if (isempty(branch) || asprintf(&name, "refs/heads/%s", branch) < 0 ||
            git_reference_name_is_valid(&valid, name) < 0 || !valid)
                return error_set(ret_error, -EINVAL, "Invalid branch name '%s'.", strempty(branch));

        if (git_repository_open_ext(&repo, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
                return error_set(ret_error, -ENOTDIR, "'%s' is not a git repository: %s", repo_path, ledger_git_message());

        /* Checked up front for a clear message; the final create is
         * exclusive too, so a branch made meanwhile is not overwritten. */
        if (git_reference_lookup(&existing, repo, name) == 0)
                return error_set(ret_error, -EEXIST, "Branch '%s' exists already in '%s', not overwriting it.", branch, repo_path);

        /* Read the header, keeping whatever of the pack came along with it. */
        buf = malloc(BUNDLE_HEADER_MAX + 1);
        h = calloc(1, sizeof(BundleHeader));
        if (!buf || !h)
                return -ENOMEM;
        while (!end) {
                if (n >= BUNDLE_HEADER_MAX)
                        return error_set(ret_error, -EBADMSG, "Bundle header too long.");
                ssize_t k = read(bundle_fd, buf + n, BUNDLE_HEADER_MAX - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return error_set(ret_error, -errno, "Cannot read the bundle: %m");
                }
                if (k == 0)
                        return error_set(ret_error, -EBADMSG, "Bundle truncated in its header.");
                n += (size_t) k;
                buf[n] = '\0';
                end = memmem(buf, n, "\n\n", 2);
                if (memchr(buf, '\0', end ? (size_t) (end - buf) : n))
                        return error_set(ret_error, -EBADMSG, "Not a git bundle.");
        }
        end[1] = '\0';
        char *pack = end + 2;
        size_t pack_n = n - (size_t) (pack - buf);

        r = ledger_bundle_header_parse(buf, h, ret_error);
        if (r < 0)
                return r;

        if (git_repository_odb(&odb, repo) < 0)
                return error_set(ret_error, -EIO, "Cannot open the objects of '%s': %s", repo_path, ledger_git_message());
        for (size_t i = 0; i < h->n_prereqs; i++)
                if (!git_odb_exists(odb, &h->prereqs[i])) {
                        char hex[GIT_OID_HEXSZ + 1];
                        git_oid_tostr(hex, sizeof(hex), &h->prereqs[i]);
                        return error_set(ret_error, -ENOENT,
                                                "'%s' lacks commit %s that the bundle builds on: fetch the task's base first.",
                                                repo_path, hex);
                }

        /* The pack goes through libgit2's indexer, which verifies every
         * object's checksum before anything becomes visible. */
        git_odb_writepack *wp = NULL;
        git_indexer_progress stats = { 0 };
        uint64_t seen = 0;
        if (git_odb_write_pack(&wp, odb, NULL, NULL) < 0)
                return error_set(ret_error, -EIO, "Cannot write into '%s': %s", repo_path, ledger_git_message());
        uint8_t pack_header[12];
        r = 0;
        for (;;) {
                if (pack_n > 0) {
                        /* SECURITY: libgit2's indexer allocates a table for as many
                         * objects as the pack's header claims, up to 2^32: the claim
                         * is checked before the indexer sees it. */
                        if (seen < sizeof(pack_header)) {
                                size_t k = MIN(pack_n, sizeof(pack_header) - (size_t) seen);
                                memcpy(pack_header + seen, pack, k);
                                if (seen + k == sizeof(pack_header)) {
                                        r = ledger_pack_header_check(pack_header, max_bytes, ret_error);
                                        if (r < 0)
                                                break;
                                }
                        }
                        seen += pack_n;
                        if (seen > max_bytes) {
                                r = error_set(ret_error, -EFBIG, "Bundle is bigger than the limit of %" PRIu64 " bytes.", max_bytes);
                                break;
                        }
                        if (wp->append(wp, pack, pack_n, &stats) < 0) {
                                r = error_set(ret_error, -EBADMSG, "Bundle's pack is corrupt: %s", ledger_git_message());
                                break;
                        }
                }
                ssize_t k = read(bundle_fd, buf, BUNDLE_HEADER_MAX);
                if (k < 0) {
                        if (errno == EINTR) {
                                pack_n = 0;
                                continue;
                        }
                        r = error_set(ret_error, -errno, "Cannot read the bundle: %m");
                        break;
                }
                if (k == 0)
                        break;
                pack = buf;
                pack_n = (size_t) k;
        }
        if (r >= 0 && wp->commit(wp, &stats) < 0)
                r = error_set(ret_error, -EBADMSG, "Bundle's pack is incomplete: %s", ledger_git_message());
        wp->free(wp);
        if (r < 0)
                return r;

        /* The new history must connect to what the repository has. */
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_(git_commit_freep) git_commit *tip = NULL;
        git_oid id;
        if (git_commit_lookup(&tip, repo, &h->tip) < 0 || git_revwalk_new(&w, repo) < 0 || git_revwalk_push(w, &h->tip) < 0)
                return error_set(ret_error, -EBADMSG, "Bundle does not contain its branch's commit.");
        for (size_t i = 0; i < h->n_prereqs; i++)
                if (git_revwalk_hide(w, &h->prereqs[i]) < 0)
                        return error_set(ret_error, -EBADMSG, "Cannot walk the bundle's history: %s", ledger_git_message());
        while ((r = git_revwalk_next(&id, w)) == 0)
                ;
        if (r != GIT_ITEROVER)
                return error_set(ret_error, -EBADMSG, "Bundle's history is incomplete: %s", ledger_git_message());

        r = git_reference_create(&ref, repo, name, &h->tip, 0, "agentfab: fetch");
        if (r == GIT_EEXISTS)
                return error_set(ret_error, -EEXIST, "Branch '%s' exists already in '%s', not overwriting it.", branch, repo_path);
        if (r < 0)
                return error_set(ret_error, -EIO, "Cannot create branch '%s': %s", branch, ledger_git_message());
        return 0;
}

#define SOURCE_BUNDLE_BRANCH "agentfab-source"
#define SOURCE_BUNDLE_REF "refs/heads/" SOURCE_BUNDLE_BRANCH

int ledger_bundle_repository(const char *repo_path, const char *rev, int out_fd, char ret_tip[static 41], char **ret_error) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_object_freep) git_object *o = NULL, *c = NULL;
        _cleanup_(git_packbuilder_freep) git_packbuilder *pb = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *w = NULL;
        _cleanup_free_ char *header = NULL;
        char tip[GIT_OID_HEXSZ + 1];
        int r;

        assert(repo_path);
        assert(out_fd >= 0);

        ledger_library_init();
        if (!rev)
                rev = "HEAD";

        if (git_repository_open_ext(&repo, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
                return error_set(ret_error, -ENOTDIR, "'%s' is not a git repository: %s", repo_path, ledger_git_message());
        if (git_revparse_single(&o, repo, rev) < 0) {
                if (streq(rev, "HEAD") && git_repository_head_unborn(repo) == 1)
                        return error_set(ret_error, -ENOENT, "Repository '%s' has no commit yet: commit something "
                                                "first (or name an existing commit with --base).", repo_path);
                return error_set(ret_error, -ENOENT, "'%s' names no commit in '%s': %s", rev, repo_path, ledger_git_message());
        }
        if (git_object_peel(&c, o, GIT_OBJECT_COMMIT) < 0)
                return error_set(ret_error, -EMEDIUMTYPE, "'%s' in '%s' is not a commit.", rev, repo_path);
        git_oid_tostr(tip, sizeof(tip), git_object_id(c));

        if (git_revwalk_new(&w, repo) < 0 || git_revwalk_push(w, git_object_id(c)) < 0 ||
            git_packbuilder_new(&pb, repo) < 0)
                return error_set(ret_error, -EIO, "Cannot walk the history of '%s': %s", repo_path, ledger_git_message());
        (void) git_packbuilder_set_threads(pb, 1);
        if (git_packbuilder_insert_walk(pb, w) < 0)
                return error_set(ret_error, -EIO, "Cannot pack the history of '%s': %s", repo_path, ledger_git_message());

        if (asprintf(&header, "# v2 git bundle\n%s " SOURCE_BUNDLE_REF "\n\n", tip) < 0)
                return -ENOMEM;
        r = ledger_write_all(out_fd, header, strlen(header));
        if (r < 0)
                return error_set(ret_error, r, "Cannot write the bundle: %s", strerror(-r));
        if (git_packbuilder_foreach(pb, pack_write_cb, &out_fd) < 0)
                return error_set(ret_error, -EIO, "Cannot write the bundle: %s", ledger_git_message());

        memcpy(ret_tip, tip, sizeof(tip));
        return 0;
}

int ledger_create_from_bundle(int task_dir_fd, int bundle_fd, const char *branch, const LedgerOptions *o,
                              char **ret_error, Ledger **ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_close_ int source_fd = -EBADF;
        git_repository_init_options io;
        char path[64], tip[GIT_OID_HEXSZ + 1];
        git_oid id;
        int r;

        assert(task_dir_fd >= 0);
        assert(bundle_fd >= 0);
        assert(ret);

        ledger_library_init();

        if (faccessat(task_dir_fd, "ledger.git", F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                return error_set(ret_error, -EEXIST, "The task directory already has a ledger.");

        /* The bundle is unpacked into a repository of our own first (only
         * libgit2's indexer reads the submitter's bytes), which is then the
         * source of an ordinary local ledger_create(), and goes. */
        (void) rm_rf_at(task_dir_fd, "source.git");
        if (mkdirat(task_dir_fd, "source.git", 0700) < 0)
                return error_set(ret_error, -errno, "Cannot make a directory for the bundle: %m");
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%d/source.git", task_dir_fd);
        (void) git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT;
        if (git_repository_init_ext(&repo, path, &io) < 0)
                r = error_set(ret_error, -EIO, "Cannot make a repository for the bundle: %s", ledger_git_message());
        else
                r = ledger_import_bundle(path, bundle_fd, SOURCE_BUNDLE_BRANCH,
                                         o ? o->max_bytes : UINT64_MAX, ret_error);
        if (r == -ENOENT) {
                /* The repository it "lacks" them in is ours: say what is wrong with the bundle. */
                r = error_set(ret_error, -EBADMSG, "The bundle builds on commits it does not carry: "
                                     "it must hold the whole history of its branch.");
        }
        if (r >= 0 && git_reference_name_to_id(&id, repo, SOURCE_BUNDLE_REF) < 0)
                r = error_set(ret_error, -EBADMSG, "The bundle carries no branch.");
        if (r >= 0) {
                git_oid_tostr(tip, sizeof(tip), &id);
                source_fd = openat(task_dir_fd, "source.git", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (source_fd < 0)
                        r = error_set(ret_error, -errno, "Cannot open the bundle's repository: %m");
        }
        git_repository_free(TAKE_PTR(repo));
        if (r >= 0)
                r = ledger_create(task_dir_fd, NULL, source_fd, tip, branch, o, ret_error, ret);
        (void) rm_rf_at(task_dir_fd, "source.git");
        return r;
}
