/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* What a change added, as the review reads it: per file, the lines the
 * change added or changed, with their numbers in the new file. The daemon
 * fills these from the ledger (ledger_added_lines()); the review library
 * only borrows them. */

typedef struct ReviewLine {
        unsigned number;        /* 1-based, in the file as the change left it */
        const char *text;       /* without the newline; NUL-terminated */
        size_t length;          /* of text; a NUL inside ends what is scanned there */
} ReviewLine;

typedef struct ReviewFile {
        const char *path;       /* workspace-relative, as in the ledger */
        const ReviewLine *lines;
        size_t n_lines;         /* lines ascending by number, no number twice */
} ReviewFile;

/* True when lines are strictly ascending by number (what the look-ups below need). */
bool review_file_is_valid(const ReviewFile *f);

/* The file of that path, or NULL. */
const ReviewFile *review_files_find(const ReviewFile *files, size_t n, const char *path);

/* True when the change added or changed that line of that file. */
bool review_files_line_changed(const ReviewFile *files, size_t n, const char *path, unsigned line);

/* Normalises a path a tool printed to the workspace-relative form the ledger
 * uses: "file://" dropped (with %XX decoded), "./" and "/workspace/" (the
 * sandbox's mount point) dropped, "//" and "/./" collapsed. Returns NULL for
 * paths that cannot name a file of the workspace (absolute elsewhere, "..",
 * empty, control characters) or on -ENOMEM. */
char *review_path_normalize(const char *path, size_t n);
