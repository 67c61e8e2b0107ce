/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "ledger.h"
#include "macro.h"
#include "string-util.h"

/* A submodule of base that was fetched (LedgerOptions.submodules): its own
 * bare ledger at <parent ledger>/modules/<name>, its work tree the
 * directory <path> of the parent's workspace. */
typedef struct LedgerSubmodule {
        char *name;
        char *path;             /* relative to the parent's workspace */
        char *url;              /* resolved; NULL for local sources */
        git_oid commit;         /* the gitlink in the parent's base */
        Ledger *ledger;
        git_oid staged;         /* its tip, for the parent's checkpoint */
        bool have_staged;
} LedgerSubmodule;

#define LEDGER_SUBMODULES_MAX 32U      /* in all, at every depth */
#define LEDGER_SUBMODULE_DEPTH_MAX 4U

/* Line counts of one blob pair, kept from one ledger_changes() to the next
 * (see ledger-stage.c): a step's diff computes only what is new. */
typedef struct LedgerLines {
        git_oid old_id, new_id;
        unsigned added, removed;
        unsigned long used;     /* the generation that last asked */
} LedgerLines;

struct Ledger {
        git_repository *repo;
        LedgerSubmodule *subs;
        size_t n_subs;
        char *branch;           /* "agentfab/<id>" */
        char *ref;              /* "refs/heads/agentfab/<id>" */
        git_oid base;
        uint64_t max_bytes;
        int workspace_fd;

        /* The stat index and what is staged (ledger-stage.c). */
        git_index *index;       /* ledger.git/index, kept open */
        struct stat index_st;   /* the index file as we last wrote it */
        bool have_index_st;
        bool index_dirty;       /* changed since it was read or written */
        git_oid staged_tree;    /* the tree the index holds */
        bool have_staged;
        bool track;             /* the caller reports changes (ledger_note_*()) */
        bool dirty_all;         /* a scan is needed */
        bool dirty_command;     /* a command ran: ask the watch what it changed */
        struct TreeWatch *watch; /* inotify on the workspace's directories (tree-watch.c); NULL: scans */
        const char *last_stage_kind;
        char **dirty;           /* paths reported since the last stage */
        size_t n_dirty;
        /* What the stages left out (ledger_take_left_out()). */
        char **left_out_known;  /* sorted; each reported once */
        size_t n_left_out_known;
        char **left_out_new;    /* met since the last take, the first LEDGER_LEFT_OUT_SHOWN */
        size_t n_left_out_new;  /* how many in all */
        LedgerLeaveOut leave_out; /* ledger_set_leave_out() */
        LedgerLines *lines;     /* sorted by (old_id, new_id) */
        size_t n_lines;
        unsigned long lines_generation;
        /* The link count of objects/ when it was last fsynced (ledger-sync.c). */
        nlink_t objects_nlink;
        bool have_objects_nlink;
};

/* Where the base commit is remembered, so that ledger_open() finds it again. */
#define LEDGER_BASE_REF "refs/agentfab/base"

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_reference *, git_reference_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_index *, git_index_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb *, git_odb_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_revwalk *, git_revwalk_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_packbuilder *, git_packbuilder_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_diff *, git_diff_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_diff_stats *, git_diff_stats_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_patch *, git_patch_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_signature *, git_signature_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_remote *, git_remote_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_config *, git_config_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_blob *, git_blob_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(git_treebuilder *, git_treebuilder_free);

static inline void git_buf_disposep(git_buf *b) {
        git_buf_dispose(b);
}
#define _cleanup_git_buf_ _cleanup_(git_buf_disposep)

/* The message of the last libgit2 error, never NULL. */
const char *ledger_git_message(void);

/* Maps a libgit2 return code to a negative errno. */
int ledger_git_errno(int error);

int ledger_write_all(int fd, const void *data, size_t size);

/* Copies s to one line: control characters become spaces, invalid UTF-8 '?',
 * at most max bytes (cut on a character boundary, "…" appended when cut). */
char *ledger_one_line(const char *s, size_t max);

/* base..tip, oldest first. */
int ledger_walk_new(Ledger *l, git_revwalk **ret);

int ledger_tip(Ledger *l, git_oid *ret);

/* Which gitlinks of tree to fetch: those with an entry in the tree's own
 * .gitmodules blob, each checked (name, path, and for URL sources, with
 * super_url non-NULL, the URL, resolved). Refuses the whole list when any
 * entry is unsafe. */
int ledger_submodules_read(git_repository *repo, git_tree *tree, const char *super_url,
                           LedgerSubmodule **ret, size_t *ret_n, char **ret_error);
void ledger_submodules_free(LedgerSubmodule *s, size_t n);
bool ledger_submodule_name_safe(const char *name);
bool ledger_submodule_path_safe(const char *path);

/* ledger-sync.c. Every directory and regular file of the tree name below
 * parent_fd fsynced, and parent_fd: for a ledger just made. */
int ledger_sync_tree(int parent_fd, const char *name);
/* After a commit, before anyone is told of it: what libgit2's own fsyncs
 * left out (a new fan-out directory of objects/). */
int ledger_sync(Ledger *l);

/* ledger-stage.c. The stat index (l->index), read again if another Ledger
 * wrote it; 1 when it was. *ret_racy: entries whose file changed at or
 * after it are not trusted (git's racy rule; now bounds it). */
int ledger_index_refresh(Ledger *l, const struct timespec *now, struct timespec *ret_racy, char **ret_error);
/* The entry still describes the file: its stat data match and it was not
 * racy when recorded. */
bool ledger_entry_clean(const git_index_entry *e, const struct statx *x, const struct timespec *racy);
/* Whether the index has an entry below the directory path: 1, 0, or
 * -ENOMEM. */
int ledger_index_has_dir(git_index *index, const char *path);
/* Copies st's stat data into the entry. */
void ledger_entry_set_stat(git_index_entry *entry, const struct stat *st);
/* The submodule fetched at path, or NULL. */
LedgerSubmodule *ledger_submodule_by_path(Ledger *l, const char *path);

/* A bundle's header (ledger-export.c), exposed for tests/fuzz: the text up
 * to and including the newline before the blank line, NUL-terminated and
 * modified in place. */
#define BUNDLE_PREREQS_MAX 256U
typedef struct BundleHeader {
        git_oid prereqs[BUNDLE_PREREQS_MAX];
        size_t n_prereqs;
        git_oid tip;
        bool have_tip;
} BundleHeader;
int ledger_bundle_header_parse(char *text, BundleHeader *h, char **ret_error);
/* The 12 bytes that begin the pack: signature, version, and an object count
 * that must fit in max_bytes (UINT64_MAX: no bound). */
int ledger_pack_header_check(const uint8_t h[static 12], uint64_t max_bytes, char **ret_error);

/* (Re)opens the submodule's work tree below the parent's workspace, never
 * through a symlink. -ENOENT, -ENOTDIR or -ELOOP when the sandbox removed or
 * replaced it. */
int ledger_submodule_attach(Ledger *parent, LedgerSubmodule *s);

/* For exports and the review (ledger-export.c): a handle on the ledger
 * whose object database also reads the fetched submodules' ledgers (NULL,
 * and 0, without submodules: use l->repo), a commit's tree with every
 * fetched submodule's files in place, and the diff base..tip of those. */
int export_repo_open(Ledger *l, git_repository **ret);
int review_tree(Ledger *l, git_repository *repo, const git_oid *commit, git_tree **ret);
int diff_base_head(Ledger *l, git_repository *repo, bool binary, git_diff **ret);

/* Brings the index up to the workspace and makes its tree
 * (l->staged_tree): a scan of the whole workspace's metadata when full, when
 * changes are not tracked or a command may have changed anything, else
 * only the reported paths, else nothing. Hashes only what moved. */
int ledger_stage(Ledger *l, bool full, char **ret_error);
/* After a reset or a failed stage: the next stage scans. */
void ledger_stage_forget(Ledger *l);
/* A reset's walk watched every directory it read (tree_watch_walk_begin()
 * .. _done() on l->watch) and wrote the index file for tree, with the
 * stat data of what it kept and wrote (racy ones smudged, see
 * ledger_entry_smudge_racy()): the stage stands at tree, and with a
 * complete watch the next one looks only at what changed since. */
void ledger_stage_take_reset(Ledger *l, const git_oid *tree);
/* An entry written at or after start could change again within the
 * timestamp granularity: the next look at it hashes it again. */
void ledger_entry_smudge_racy(git_index_entry *e, const struct timespec *start);
void ledger_stage_free(Ledger *l);

/* ledger_changes() by libgit2's walk of the workspace, for comparison. */
int ledger_changes_walk(Ledger *l, const char *from, FileChange **ret, size_t *ret_n);
/* The message of a checkpoint: subject, body, trailers (see Checkpoint). */
int ledger_build_message(const Checkpoint *c, char **ret);
/* "agentfab <agentfab@HOSTNAME>", now. */
int ledger_make_signature(git_signature **ret);

/* ledger.c: what the other parts of the ledger share. */
int ledger_oid_from_hex(const char *hex, git_oid *ret);
/* "refs/heads/BRANCH", for a valid branch name only. */
int ledger_branch_to_ref(const char *branch, char **ret);
/* A directory beneath dir_fd, never through a symlink or out of it. */
int ledger_open_beneath_dir(int dir_fd, const char *path);
/* A Ledger of repo (the caller's until success) with workspace_fd (always
 * taken) as its work tree; -EBADF: there is none yet. */
int ledger_attach_fd(git_repository *repo, int workspace_fd, const char *branch, Ledger **ret);
/* The same with the task directory's "workspace". */
int ledger_attach(int task_dir_fd, git_repository *repo, const char *branch, Ledger **ret);
int ledger_base_tree(Ledger *l, git_tree **ret);
/* Where a submodule's repository lives: modules/NAME in the parent's. */
int ledger_submodule_git_path(Ledger *parent, const char *name, char **ret);

/* ledger-source.c: a source repository on disk, read without trusting it
 * (refs by hand, beneath its directory; no symlinked objects). */
int source_open(const char *source, int source_fd, int *ret_git_fd, int *ret_common_fd, int *ret_objects_fd);
/* base (a ref name or a commit id; HEAD when NULL) in the source. */
int source_resolve(git_repository *repo, int git_fd, int common_fd, const char *base, git_oid *ret);
/* HEAD points to a branch with no commit (git init, nothing committed). */
bool source_head_unborn(int git_fd);
int source_check_objects(int objects_fd, char **ret_error);

/* ledger-ssh.c: an ssh:// source, with only the key and known hosts the
 * daemon was given (LedgerOptions), never the daemon user's own. */
#define SSH_HOST_MAX 255U
#define SSH_USER_MAX 64U
#define SSH_REASON_MAX 512U

typedef struct SshAuth {
        char host[SSH_HOST_MAX + 1];
        char user[SSH_USER_MAX + 1];
        unsigned port;
        const char *key;
        const char *known_hosts;
        const char *key_setting;        /* how messages name the key's setting */
        unsigned key_tries;
        char reason[SSH_REASON_MAX];    /* why the connection was given up, for the task's error */
        int reason_errno;
} SshAuth;

bool ledger_ssh_url(const char *url);
/* user, host and port of an ssh:// URL into a. */
int ledger_ssh_parse(const char *url, SshAuth *a);
/* For an ssh:// url: a made from url and o (known hosts required:
 * -EPERM, before any connection, without them), and 1. 0 for any other
 * URL. Errors are set in *ret_error. */
int ledger_ssh_prepare(SshAuth *a, const char *url, const LedgerOptions *o, char **ret_error);
/* cbs checks the host and authenticates with a (its payload), after
 * ledger_ssh_prepare() returned 1. */
void ledger_ssh_set_callbacks(git_remote_callbacks *cbs, SshAuth *a);
/* Why a connection failed: a's reason when the ssh callbacks gave up,
 * libgit2's message (and fallback) otherwise. */
const char *ledger_ssh_message(const SshAuth *a);
int ledger_ssh_errno(const SshAuth *a, int fallback);
/* libgit2's certificate_check and credentials callbacks, for a. */
int ledger_ssh_certificate_check(SshAuth *a, git_cert *cert, int valid, const char *host);
int ledger_ssh_credentials(SshAuth *a, git_credential **out, const char *url, const char *username_from_url,
                           unsigned allowed);
