/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The ledger: a task's own git history. Each task gets a bare repository
 * (<task_dir>/ledger.git) that only the daemon sees, and a workspace
 * (<task_dir>/workspace) that is the repository's work tree but has no .git
 * inside, so nothing the sandbox does can reach the history. Checkpoints are
 * commits on one branch with machine-readable trailers; delivery is a diff,
 * an mbox, a bundle or a push of that branch.
 *
 * Submodules (LedgerOptions.submodules): each fetched submodule of base has
 * a bare ledger of its own, <task_dir>/ledger.git/modules/<name> (nested
 * ones below that, as git lays them out), on the same branch, and its work
 * tree is <path> inside the workspace, again without .git. Gitlinks that
 * are not fetched stay gitlinks, and their directories must stay empty.
 *
 * All calls block (they do file and object I/O); none of them runs a
 * program, a hook or a filter. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

typedef struct Ledger Ledger;

typedef struct LedgerOptions {
        uint64_t max_bytes;      /* bound on what is imported (objects + checkout); UINT64_MAX none */
        bool submodules;         /* false: submodules are not fetched (gitlinks stay as they are); see ledger_create() */
        /* How messages name a source read through source_fd (the path the
         * submitter gave); NULL: "repository_fd", the key of the spec that passed it. */
        const char *source_name;
        /* ssh:// sources only; both NULL otherwise. The caller owns them
         * (and wipes the key); the ledger never reads a configuration. */
        const char *ssh_key;         /* private key text (OpenSSH or PEM, unencrypted); NULL: none */
        const char *ssh_known_hosts; /* known_hosts lines the host key must match; NULL refuses ssh:// */
        /* How messages name the key's setting, for a missing key; NULL:
         * "[Git] SSHKeyCredential=". */
        const char *ssh_key_setting;
} LedgerOptions;

/* Initializes libgit2 once for the process and cuts it off from the daemon's
 * own git configuration. Called by every entry point; safe to call again. */
void ledger_library_init(void);

/* Creates <task_dir>/ledger.git (bare: the task's own history, never seen by
 * the sandbox) and <task_dir>/workspace (its work tree, checked out at base,
 * no .git inside), with branch refs/heads/<branch> at base.
 *
 * The source is a local repository (work tree, bare or linked worktree)
 * given by path, or by an open directory fd (source_fd >= 0: read only
 * through the fd), or an https://, ssh:// or file:// URL fetched by libgit2.
 * An ssh:// fetch needs o->ssh_known_hosts: the server's host key must match
 * an entry for its host and port there (see known-hosts.h), or nothing is
 * fetched (-EPERM); it authenticates as the URL's user ("git" if none) with
 * o->ssh_key, tried once (-EACCES when refused or when there is none). base is
 * a full or abbreviated commit id, a branch, a tag or a ref name; NULL means
 * HEAD (the remote's default branch for a URL).
 *
 * The whole history reachable from base is copied, nothing else (for a URL:
 * all branches and tags are fetched, only base is kept). The source is
 * never written to, never opened as a repository (for local sources), and
 * nothing of it runs. max_bytes bounds the checkout (uncompressed blob
 * sizes of base) plus the copied pack (compressed); over it: -EFBIG and a
 * message, and nothing stays behind. max_bytes 0 is -EINVAL. -EEXIST if
 * the task directory has a ledger already.
 *
 * Without o->submodules, gitlinks become empty directories. With it, every
 * gitlink of base that has an entry in base's .gitmodules (read from base's
 * blob, with a strict parser of our own that knows only path and url) is
 * fetched at exactly the gitlink's commit and checked out into its path,
 * recursively, at most LEDGER_SUBMODULE_DEPTH_MAX (4) deep and
 * LEDGER_SUBMODULES_MAX (32) in all; gitlinks without an entry are left
 * alone. Its objects come, for a local source, from modules/<name> of the
 * source's git directory (where git submodule update --init keeps them;
 * -ENOENT "not initialized" if absent), read like the superproject's
 * (through fds, never through a symlink, never as a repository); for a URL
 * source, from the URL in .gitmodules: https:// or ssh:// (with the same
 * ssh key and known hosts), or ./ ../ relative to the superproject's URL
 * (file:// only that way). For local sources the URL is not used at all.
 * Refused with a message, and nothing left behind: a .gitmodules that is
 * not a regular file or is malformed, a name or path that is empty,
 * absolute, has '.', '..' (or, for a path, .git) components, backslashes,
 * quotes or control characters, names nesting in each other, a path that
 * is not a gitlink in base or goes through a symlink (-ELOOP), and URLs
 * that are local paths, file://, other schemes (-EPROTONOSUPPORT), begin
 * with '-' or climb above the host; a gitlink commit missing from the
 * submodule's repository (-ENOENT). All of it counts against max_bytes
 * with the superproject (-EFBIG). */
int ledger_create(int task_dir_fd, const char *source, int source_fd, const char *base, const char *branch,
                  const LedgerOptions *o, char **ret_error, Ledger **ret);
/* Opens the ledger of a task directory again, e.g. after a daemon restart.
 * Lock files a crash left behind are removed: only one Ledger per task
 * directory may be open at a time, in one process. -EBADMSG or -ENOENT for
 * a ledger whose creation was cut short: ledger_destroy() and create again.
 * Fetched submodules are attached again (their list read again from base);
 * -EBADMSG if one of their ledgers is missing. */
int ledger_open(int task_dir_fd, const char *branch, Ledger **ret);

/* Removes <task_dir>/workspace and <task_dir>/ledger.git, without following
 * symlinks. The Ledger, if open, must be freed first. */
int ledger_destroy(int task_dir_fd);
Ledger *ledger_free(Ledger *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(Ledger *, ledger_free);

/* O_DIRECTORY fd of the workspace, owned by the ledger. */
int ledger_workspace_fd(Ledger *l);
int ledger_base(Ledger *l, char ret[static 41]);
int ledger_head(Ledger *l, char ret[static 41]);
const char *ledger_branch(Ledger *l);

typedef struct Checkpoint {
        const char *task_id;
        unsigned step;              /* 0: no Agentfab-Step: trailer (a record, not a step) */
        const char *subject;
        const char *body;
        const char *model;
        char **commands;
        const char *tests;          /* "pass" | "fail" | "not-run" */
        const char *test_command;
        int test_exit;
        uid_t uid;
        const char *user_name;
        const char *environment;    /* "NAME (system; identity)", an Agentfab-Environment: trailer; NULL none */
        /* The requirement the work answers: Agentfab-Ref: (a ticket id or
         * URL; NULL: none) and Agentfab-Requirement: vN (0: none). */
        const char *reference;
        unsigned requirement;
        /* How many tests the runner said it ran, for Agentfab-Tests:
         * "pass (CMD, exit 0, N tests)"; not said without have_test_count. */
        bool have_test_count;
        unsigned test_count;
        /* Further trailers, "Agentfab-Key: value" each, written after
         * Agentfab-Tests: in this order (the review stage's result). Lines
         * of another shape are refused (-EINVAL). */
        char **trailers;
} Checkpoint;

/* Bounds on what goes into a commit message. */
#define LEDGER_SUBJECT_MAX 72U
#define LEDGER_BODY_MAX (64U * 1024U)
#define LEDGER_TRAILER_VALUE_MAX 256U
#define LEDGER_COMMANDS_MAX 64U
#define LEDGER_TRAILERS_MAX 32U

/* Commits the whole workspace on the branch (additions, modifications,
 * deletions; symlinks as symlinks, never followed; .gitignore'd files that
 * are not tracked stay out; anything named .git is never added). The
 * message is the sanitized subject, the body, then the Agentfab-Task,
 * -Step, -Model, -Command (one each), -Tests and -Submitter trailers; author
 * and committer "agentfab <agentfab@HOSTNAME>". Returns 1 and the commit id
 * when it committed, 0 when nothing changed. Files over the size bound
 * are refused with a message (-EFBIG). Special files (FIFOs, sockets,
 * device nodes) are left out, as git leaves them out: they hold nothing a
 * commit could record (a tracked file that became one goes from the tree);
 * so are names git refuses to record and paths longer than
 * LEDGER_PATH_MAX or deeper than the scan goes. ledger_take_left_out()
 * names them.
 *
 * Files are read through directory fds opened without following symlinks,
 * never by path, with O_NONBLOCK: a sandbox still running can make the
 * checkpoint fail or record a mix of before and after, but cannot make us
 * read outside the workspace or block. Content is stored unfiltered.
 *
 * Fetched submodules are committed first, each in its own ledger with the
 * same message (when something changed there), and the superproject's
 * single commit moves their gitlinks to those commits. A submodule whose
 * directory the task removed or replaced is recorded as what stands there
 * (the gitlink goes). Anything but .git inside the directory of a gitlink
 * that was not fetched makes the checkpoint fail (-ENOTEMPTY, the message
 * names the file): it could not be recorded, and is not dropped silently. */
int ledger_checkpoint(Ledger *l, const Checkpoint *c, char ret_commit[static 41], char **ret_error);
/* What checkpoints (and ledger_changes()) leave out besides what the
 * repository's .gitignore files ignore: the workshop's sweepings, never the
 * change. Such a path stays in the workspace and out of the tree (a tracked
 * file keeps what the tree has), and ledger_take_left_out() names it with
 * the reason: "build output", "binary, N bytes" or "made by the tests". */
typedef struct LedgerLeaveOut {
        /* Names of build output, fnmatch() patterns matched against one
         * component of an untracked path: "name/" a directory, with
         * everything below it unless something there is tracked; other
         * patterns a file's name. */
        char **patterns;
        /* New files that are executables, libraries, object archives or
         * compiled bytecode (ELF, Mach-O, PE, ar, Python, Java, WebAssembly). */
        bool binaries;
        /* When the test command ran: n_windows pairs of CLOCK_REALTIME
         * microseconds, [start, end]. A file whose inode changed within
         * one (its ctime, which no process sets at will) is the tests'
         * output, unless it is in written. */
        uint64_t *windows;
        size_t n_windows;
        /* Workspace-relative paths the agent wrote through its tools. */
        char **written;
        /* Paths kept on purpose: none of the above applies to them. */
        char **kept;
} LedgerLeaveOut;

/* Whether name in dir_fd is an executable, a library, an object archive or
 * compiled bytecode, by its first bytes (never following a symlink); its
 * size in *ret_size. */
bool ledger_file_is_binary(int dir_fd, const char *name, uint64_t *ret_size);

/* Copies o into l; later stages follow it. */
int ledger_set_leave_out(Ledger *l, const LedgerLeaveOut *o);
void ledger_leave_out_done(LedgerLeaveOut *o);

/* What stages (of checkpoints and of ledger_changes()) left out since the
 * last call and no stage of this Ledger had met before: special files,
 * names git refuses (one NTFS takes for .git: ".git.", "GIT~1", with
 * everything below), paths too long or too deep. How many, and in *ret_paths (a NULL-terminated list the caller frees,
 * NULL when none) the first LEDGER_LEFT_OUT_SHOWN of them. A path is
 * reported once in a Ledger's life (the first LEDGER_LEFT_OUT_KNOWN_MAX
 * paths are remembered; past them, again whenever met). */
#define LEDGER_LEFT_OUT_SHOWN 8U
#define LEDGER_LEFT_OUT_KNOWN_MAX 1024U
size_t ledger_take_left_out(Ledger *l, char ***ret_paths);

/* Change tracking. By default every checkpoint and ledger_changes() looks
 * at the metadata of the whole workspace (a scan; only files whose stat
 * data moved are read). A caller that knows what touches the workspace
 * turns tracking on and reports it: ledger_note_path() for a file it wrote
 * itself (workspace-relative), ledger_note_all() when anything may have
 * changed (a command ran in the sandbox). Then a step that only wrote
 * files through the caller looks at those files alone, and one that did
 * nothing at nothing; ledger_changes() and the checkpoint that follows it
 * record exactly the same tree. A reset, and any path that is not a plain
 * file below plain directories, makes the next one scan. Both notes
 * accept a NULL ledger (nothing to do). */
void ledger_track_changes(Ledger *l, bool track);
void ledger_note_path(Ledger *l, const char *path);
void ledger_note_all(Ledger *l);
/* With tracking on, the workspace's directories are watched (inotify,
 * tree-watch.c) from the first scan on, so that after ledger_note_all()
 * a stage looks only at the paths that changed (a directory made or
 * renamed: what is in it), not at every file; when the watch cannot say
 * (no inotify instance or watch left, its queue overflowed, a .gitignore
 * changed, gitlinks or submodules) the stage scans the whole workspace.
 * ledger_note_rescan(): the next stage scans whatever the watch says (a
 * final checkpoint: inotify does not see writes through a shared mapping
 * after close). */
void ledger_note_rescan(Ledger *l);
/* For tests and benchmarks: watch (true, the default) or always scan. */
void ledger_set_watch(bool b);
/* For tests: how the last stage of l found its paths: "scan", "watch",
 * "noted" or "none". */
const char *ledger_last_stage_kind(Ledger *l);

/* For tests: called with the workspace-relative path right before a file's
 * content is read by a stage, on the thread that stages. NULL: none. */
typedef void (*LedgerStageHook)(const char *path, void *userdata);
void ledger_set_stage_hook(LedgerStageHook hook, void *userdata);
/* For tests and benchmarks: scans ask through io_uring (true, the default)
 * or with one statx() call after the other. */
void ledger_set_io_uring(bool b);

/* Records c on the branch as a commit of the tip's own tree, whatever the
 * workspace holds: evidence about the tree that is there (the final test
 * run at delivery), never a change. Submodules are not touched. Returns
 * the commit id. Same message rules as ledger_checkpoint(). */
int ledger_record(Ledger *l, const Checkpoint *c, char ret_commit[static 41], char **ret_error);
/* Every commit of base..tip, oldest first:
 * [{"commit":"hex","step":N (absent without an Agentfab-Step trailer),"subject":"..."}]:
 * what an audit compares with the journal. At most max commits (-E2BIG). */
int ledger_commits(Ledger *l, size_t max, json_object **ret);
/* Resets the workspace and the branch to commit (full hex), which must be
 * base or between base and the tip (-ENXIO otherwise). Untracked and
 * ignored files go too, also inside the directories of gitlinks that were
 * not fetched. Fetched submodules are reset to the target's gitlinks. */
int ledger_reset(Ledger *l, const char *commit);
/* [{"step":N,"commit":"hex","subject":"..."}] for base..tip, oldest first;
 * commits without an Agentfab-Step trailer are skipped. */
int ledger_checkpoints(Ledger *l, json_object **ret);
/* Trailers of the last paragraph of a message (never the subject):
 * {"Key":"value", ...}, a repeated key gives an array. */
int ledger_parse_trailers(const char *message, json_object **ret);

typedef struct FileChange {
        char *path;
        char *old_path;      /* 'R': the name it had, else NULL */
        char status; /* 'A','M','D','R','T' */
        unsigned added, removed;
} FileChange;

/* Changes from `from` (full hex; NULL: base) to the workspace as it is,
 * uncommitted and untracked files included, renames detected. Files inside
 * fetched submodules are listed with their path in the workspace
 * ("sub/file.c"), from the gitlink in `from`; gitlinks themselves are not
 * listed. */
int ledger_changes(Ledger *l, const char *from, FileChange **ret, size_t *ret_n);
void file_changes_free(FileChange *c, size_t n);
/* Like git diff --stat base..tip. For this and the diff and mbox exports,
 * each fetched submodule's gitlink is replaced by its tree: a reviewer sees
 * "sub/file.c" changes (a patch git apply takes in a clone with its
 * submodules checked out), never "Subproject commit" lines. */
int ledger_diffstat(Ledger *l, char **ret);

/* For the review stage (ledger-review.c): what base..tip added, file by
 * file, with the same view as the exports (fetched submodules' files in
 * place, renames detected). */
typedef struct LedgerAddedLine {
        unsigned number;        /* in the file at the tip */
        char *text;             /* without its newline, NUL-terminated */
        size_t length;          /* of text; a NUL in the file ends what a C string shows */
} LedgerAddedLine;

typedef struct LedgerFileLines {
        char *path;             /* at the tip */
        char status;            /* 'A', 'M', 'R', 'T' (deleted files are not listed) */
        bool binary;            /* no lines given */
        LedgerAddedLine *lines; /* ascending by number */
        size_t n_lines;
} LedgerFileLines;

#define LEDGER_ADDED_BYTES_MAX (64U * 1024U * 1024U)

/* The lines base..tip added or changed ("+" lines of the diff), per file.
 * -E2BIG past LEDGER_ADDED_BYTES_MAX of added text: the review must then
 * say it could not read everything rather than pass on a part. */
int ledger_added_lines(Ledger *l, LedgerFileLines **ret, size_t *ret_n);
void ledger_file_lines_free(LedgerFileLines *f, size_t n);

/* A file's content in base's tree (at_tip false) or the tip's, as the
 * review sees them (fetched submodules' files in place): -ENOENT when
 * there is none, -EISDIR for a directory or gitlink, -ELOOP for a
 * symlink (never followed), -EFBIG past max bytes. NUL-terminated. */
int ledger_read_file(Ledger *l, bool at_tip, const char *path, size_t max, char **ret, size_t *ret_size);

/* Unified patch base..tip (binary files as git binary patches). */
int ledger_export_diff(Ledger *l, int out_fd);
/* The same patch as text for the model to review (binary files as "Binary
 * files ... differ"), at most max bytes: a longer one is cut at a line
 * boundary and begins with its diffstat, and a note says how much was left
 * out. *ret NULL: base and tip do not differ. */
int ledger_review_diff(Ledger *l, size_t max, char **ret);
/* One mail per commit of base..tip, as git format-patch writes them. */
int ledger_export_mbox(Ledger *l, int out_fd);
/* A "# v2 git bundle": refs/heads/<branch>, prerequisite base, a pack of
 * base..tip. -ENODATA when the branch is still at base (as git bundle
 * create refuses an empty bundle). Superproject only: its gitlinks name
 * submodule commits that are not in the bundle (deliver those with the
 * diff or the mbox). */
int ledger_export_bundle(Ledger *l, int out_fd);

/* Client side (agentfabctl fetch): indexes the bundle's pack into the
 * repository at repo_path and creates refs/heads/<branch> at its tip.
 * Never overwrites a branch (-EEXIST), never touches HEAD, the index, the
 * work tree or other refs; -ENOENT with a message when a prerequisite is
 * missing; -EFBIG past max_bytes of pack data. */
int ledger_import_bundle(const char *repo_path, int bundle_fd, const char *branch, uint64_t max_bytes, char **ret_error);

/* Client side (agentfabctl submit, for a repository agentfabd cannot read
 * even through a directory fd): writes a "# v2 git bundle" of everything
 * reachable from rev (NULL: HEAD), no prerequisites, its one ref
 * refs/heads/agentfab-source, and returns the commit id. The repository is
 * opened as the caller, with its own configuration. */
int ledger_bundle_repository(const char *repo_path, const char *rev, int out_fd, char ret_tip[static 41], char **ret_error);
/* Daemon side: like ledger_create() from a local source, the source being
 * such a bundle (bundle_fd, read from its current offset), based on its
 * branch's commit. Only libgit2's indexer reads the bundle's pack; it is
 * bounded by o->max_bytes like everything else. */
int ledger_create_from_bundle(int task_dir_fd, int bundle_fd, const char *branch, const LedgerOptions *o,
                              char **ret_error, Ledger **ret);

/* Pushes refs/heads/<branch> (only that, never forced) to url. The branch
 * must be under agentfab/. credential_token, if given, is offered as the
 * password of user "x-access-token" for https remotes. The superproject's
 * branch only, as for bundles: submodule commits are not pushed. */
int ledger_push(Ledger *l, const char *url, const char *credential_token, char **ret_error);

/* Names commit ref here (under refs/agentfab/) and pushes it there,
 * forced, to url: a checkpoint published for the hosts of a fleet
 * (ledger-publish.c). With base_ref (under refs/agentfab/ too), the
 * ledger's base is pushed under that name as well.
 *
 * For an ssh:// url, this and the two below connect as ledger_create()
 * does: only with o->ssh_known_hosts (-EPERM before any connection
 * without them, or when the host key is not there) and o->ssh_key, offered
 * once (-EACCES); o may be NULL for other URLs. */
int ledger_publish(Ledger *l, const char *url, const LedgerOptions *o, const char *commit, const char *ref,
                   const char *base_ref, char **ret_error);

/* For a host that takes a task over: fetches prefix/ * from url (what
 * ledger_publish() put there: the checkpoints and prefix/base), checks
 * that checkpoint is there and grew from prefix/base, and makes them the
 * ledger's base and its branch's tip. The workspace is left as it is:
 * ledger_reset() to checkpoint brings it there. */
int ledger_adopt(Ledger *l, const char *url, const LedgerOptions *o, const char *prefix, const char *checkpoint,
                 char **ret_error);

/* For a host that shows a task another host holds: makes a ledger in
 * dir_fd (empty; ledger.git and an empty workspace) from what url has
 * under prefix (prefix/base and tip_ref, which must grow from it), with
 * branch at tip_ref, and opens it: for exports only. */
int ledger_open_published(int dir_fd, const char *url, const LedgerOptions *o, const char *prefix, const char *tip_ref,
                          const char *branch, Ledger **ret, char **ret_error);
