/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "text-match.h"

/* apply_patch's patches, both the formats models write:
 *
 *   Codex's:  *** Begin Patch
 *             *** Update File: src/a.c       (then hunks; "*** Move to: b.c" may follow)
 *             @@ int main(void)              (optional: a line to find first)
 *              context
 *             -removed
 *             +added
 *             *** End of File                (optional: the hunk ends the file)
 *             *** Add File: new.c            (then "+" lines, the whole content)
 *             *** Delete File: old.c
 *             *** End Patch
 *
 *   unified:  diff --git a/x b/x (optional, with git's extended header lines)
 *             --- a/x   (/dev/null for a new file)
 *             +++ b/x   (/dev/null for a deleted one)
 *             @@ -l,n +l,n @@
 *
 * The patch text is untrusted. Parsing only builds the structure; paths are
 * checked by the tool (workspace-path.h). Hunks are matched with the rules
 * of text-match.h, in the order of the file; line numbers only choose
 * among several matches, and a unified diff's counts only tell body lines
 * from headers where they are right. */

typedef enum PatchFormat {
        PATCH_FORMAT_CODEX,
        PATCH_FORMAT_UNIFIED,
        _PATCH_FORMAT_MAX,
        _PATCH_FORMAT_INVALID = -EINVAL,
} PatchFormat;

typedef enum PatchOp {
        PATCH_OP_ADD,
        PATCH_OP_DELETE,
        PATCH_OP_UPDATE,
        _PATCH_OP_MAX,
        _PATCH_OP_INVALID = -EINVAL,
} PatchOp;

const char *patch_format_to_string(PatchFormat f);
const char *patch_op_to_string(PatchOp o);

/* Bounds of one patch. */
#define PATCH_FILES_MAX 100U
#define PATCH_HUNKS_MAX 1000U
#define PATCH_ANCHORS_MAX 8U

typedef struct PatchHunk {
        char *anchors[PATCH_ANCHORS_MAX]; /* Codex "@@ text": lines found first, in order */
        size_t n_anchors;
        unsigned old_start;     /* unified "@@ -l": 1-based; 0 when not given */
        bool has_start;
        bool at_end;            /* the hunk's old lines end the file */
        int new_final_eol;      /* -1: as the file was; 0: "\ No newline" on the new side; 1: the old side only */
        char *old_text, *new_text; /* the old and the new lines, each ended with "\n" */
        size_t old_size, new_size, n_new;
        int *new_from_old;      /* per new line: the old line it is the context of, or -1 */
        unsigned patch_line;    /* where the hunk starts in the patch, 1-based */
} PatchHunk;

typedef struct PatchFile {
        PatchOp op;
        char *path;
        char *move_to;          /* update: the new path, or NULL */
        PatchHunk *hunks;
        size_t n_hunks;
        char *content;          /* add: the whole content */
        size_t content_size;
        unsigned patch_line;
} PatchFile;

typedef struct Patch {
        PatchFormat format;
        PatchFile *files;
        size_t n_files;
} Patch;

/* Parses a patch in either format. Refused with -EINVAL and a message for
 * the model (which names the patch's line): text that is neither format,
 * malformed headers and hunks, an update without hunks, empty paths, a
 * path named twice, more than PATCH_FILES_MAX files or PATCH_HUNKS_MAX
 * hunks; -E2BIG for more than TEXT_LINES_MAX lines. */
int patch_parse(const char *text, Patch *ret, char **ret_error);
void patch_done(Patch *p);

/* What became of one hunk: under which rule it matched, and where its new
 * lines stand in the new content (1-based). */
typedef struct PatchHunkResult {
        MatchRule rule;
        unsigned line, n_lines;
} PatchHunkResult;

/* The new content of an updated file, whose content is data. Every hunk
 * is matched against data, each after the one before; the results go to
 * results[0 .. f->n_hunks). On failure nothing is returned and a line for
 * every hunk that failed (at most a few) is appended to errors, each
 * starting with "  - 'PATH', hunk N (patch line L): ": -ENODATA (not found;
 * the nearest lines are shown), -ENOTUNIQ (found several times), -EFBIG
 * (more than max_size), -E2BIG (too many lines to match by lines). */
int patch_apply(const PatchFile *f, const char *data, size_t size, size_t max_size, char **ret, size_t *ret_size,
                PatchHunkResult *results, Buf *errors);
