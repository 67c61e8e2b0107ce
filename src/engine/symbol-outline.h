/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The symbol outline of the first prompt: the files the task points to
 * (named in its goal and acceptance criteria, or by the tests that failed
 * at the start), their symbols as universal-ctags lists them, and the text
 * the model is shown within a budget of its own. ctags itself runs in the
 * task's sandbox, since it parses the repository's files, which are
 * untrusted; here are the choice of files, the command line, and the
 * reading of its output, which is untrusted too. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OUTLINE_FILES_MAX      20u
/* Larger files are left out: ctags would take long, and the outline of one
 * would fill the budget alone. */
#define OUTLINE_FILE_SIZE_MAX  (512u * 1024u)
/* ctags' output read, and the symbols and lines of it kept. */
#define OUTLINE_OUTPUT_MAX     (1024u * 1024u)
#define OUTLINE_LINE_MAX       (16u * 1024u)
#define OUTLINE_SYMBOLS_MAX    4096u
/* A symbol's name and kind as shown, at most. */
#define OUTLINE_NAME_MAX       80u
#define OUTLINE_KIND_MAX       24u
#define OUTLINE_SIGNATURE_MAX  80u
#define OUTLINE_TIMEOUT_SEC    20u
/* The outline's share of the context window: a sixteenth, within these
 * bounds, in tokens. */
#define OUTLINE_TOKENS_MIN     256u
#define OUTLINE_TOKENS_MAX     2048u
#define OUTLINE_TOKENS_DEFAULT 1024u

/* Ranks files (workspace-relative paths) by how the task points to them:
 * a path named in requirement (the goal and the acceptance criteria) or
 * in a failed test's name, a basename named there, then a word equal to
 * the file's stem (its name without the extension; for a failed test's
 * name also without a "test" prefix or suffix, so that test_parser points
 * to parser.py). Files nothing points to are left out. At most max, best
 * first, in *ret (NULL-terminated, NULL when none). */
int outline_rank_files(char **files, const char *requirement, char **failures, unsigned max, char ***ret);

/* The regular files of the workspace, workspace-relative: .git, symlinks,
 * other file systems and the bulky directories of workspace_tree() are
 * left out, and the walk is bounded in depth and entries. */
int outline_list_files(int ws_fd, char ***ret);

/* outline_list_files() ranked by outline_rank_files(), keeping the text
 * files of at most OUTLINE_FILE_SIZE_MAX bytes whose names are printable
 * UTF-8, at most max. *ret NULL when none. */
int outline_pick_files(int ws_fd, const char *requirement, char **failures, unsigned max, char ***ret);

/* The command line run in the sandbox (in /workspace) for files. */
int outline_ctags_argv(char **files, char ***ret);

typedef struct OutlineSymbol {
        char *name, *kind;
        char *signature;        /* "(a, b)" of a function, or NULL */
        size_t file;            /* index in the files given to outline_parse() */
        unsigned line;
        unsigned depth;         /* nesting by scope: 0 at the top of the file */
} OutlineSymbol;

typedef struct Outline {
        OutlineSymbol *symbols;
        size_t n;
        size_t skipped;         /* lines that were not a tag of one of the files */
        size_t dropped;         /* tags past OUTLINE_SYMBOLS_MAX */
} Outline;

/* Reads ctags' JSON lines output (size bytes of text). Lines that are not
 * one JSON object of "_type" "tag" with a string name, a path that is one
 * of files and a positive line are skipped and counted; names and kinds
 * are shortened, their control characters and invalid UTF-8 replaced. */
int outline_parse(const char *text, size_t size, char **files, Outline *ret);
void outline_done(Outline *o);

/* The outline as the model sees it, at most max bytes: per file (in the
 * order of files), "path:" then a line "  kind name(signature) (line N)"
 * per symbol,
 * indented further by scope; each file has a share of what is left, cut
 * with "… N more". Files without symbols are left out. *ret NULL when
 * nothing is shown. */
int outline_format(const Outline *o, char **files, size_t max, char **ret);

/* The budget in bytes: a sixteenth of context_tokens (OUTLINE_TOKENS_DEFAULT
 * when 0), within OUTLINE_TOKENS_MIN and OUTLINE_TOKENS_MAX, at
 * bytes_per_token_milli / 1000 bytes a token. */
size_t outline_budget_bytes(uint64_t context_tokens, unsigned bytes_per_token_milli);
