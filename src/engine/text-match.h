/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Finding in a file the text a model means when what it sent has drifted
 * from what the file holds: edit_file's old_text and the context of
 * apply_patch's hunks. Models copy text back with trailing spaces lost or
 * added, tabs turned into spaces, the indentation shifted, straight quotes
 * for curly ones, LF for CRLF, and read_file's "  12| " prefixes; each
 * miss costs the task a step. The rules below are tried in order, from the
 * strictest, and the first one under which the text is found decides:
 * found once, it is used; found several times, the edit is refused, saying
 * where, as an exact match found several times is. Pure functions on
 * memory; the file tools read and write (tools-edit.c). */

typedef enum MatchRule {
        MATCH_EXACT,               /* byte for byte (whole lines, for blocks) */
        MATCH_LINE_ENDINGS,        /* LF against CRLF */
        MATCH_TRAILING_WHITESPACE, /* spaces and tabs at the ends of lines */
        MATCH_INDENTATION,         /* and at their starts; the new text is re-indented */
        MATCH_PUNCTUATION,         /* and curly quotes, dashes, Unicode spaces as ASCII */
        _MATCH_RULE_MAX,
        _MATCH_RULE_INVALID = -EINVAL,
} MatchRule;

/* "exact", "line endings", "trailing whitespace", "indentation", "quotes and dashes" */
const char *match_rule_to_string(MatchRule r);
MatchRule match_rule_from_string(const char *s);
/* How the text was found, for the model: "exact match", "matched ignoring
 * indentation; the new text was re-indented to the file's", ... */
const char *match_rule_description(MatchRule r);

/* Past this many lines, a text is matched exactly only: the tolerant rules
 * keep an array entry a line, and the nearest lines are searched a line at
 * a time. */
#define TEXT_LINES_MAX 500000U

/* A text as lines. Line i is text[start[i] .. text_line_end(l, i)), without
 * its line ending ("\n" or "\r\n"); a last line without one counts, the empty
 * rest after a final line ending does not. */
typedef struct TextLineHashes TextLineHashes;

typedef struct TextLines {
        const char *text;
        size_t size, n;
        size_t *start;  /* n + 1 offsets; start[n] == size */
        bool has_eol;   /* at least one line ending */
        bool crlf;      /* most line endings are "\r\n" */
        bool final_eol; /* the text ends with a line ending */
        /* The lines' hashes under each rule, made by the first
         * text_find_block() in this text and kept for the next: a patch's
         * hunks are all looked for in the same file. */
        TextLineHashes *hashes;
} TextLines;

/* -E2BIG past TEXT_LINES_MAX lines. text must stay while ret is used. */
int text_lines_split(const char *text, size_t size, TextLines *ret);
void text_lines_done(TextLines *l);
size_t text_line_end(const TextLines *l, size_t i);

/* Where the lines of needle stand among those of hay under rule, whole
 * lines compared without their endings (MATCH_EXACT and MATCH_LINE_ENDINGS
 * alike), at line from or later; with at_end only a match that ends with
 * hay's last line counts. The first lines of the matches (0-based) in
 * ret->at; the search stops at BLOCK_FOUND_MAX matches and says so in
 * ret->more. Returns the number kept. */
#define BLOCK_FOUND_MAX 64U
typedef struct BlockFound {
        size_t n;
        bool more;
        size_t at[BLOCK_FOUND_MAX];
} BlockFound;
int text_find_block(const TextLines *hay, const TextLines *needle, MatchRule rule, size_t from, bool at_end,
                    BlockFound *ret);

/* The lines of a block that replaces hay's lines at .. at + old->n - 1,
 * which matched old under rule, each ended with hay's line ending (LF when
 * hay has none): where new_from_old[j] >= 0, new line j is that old line
 * unchanged, and hay's own line is kept as it is (a context line the
 * model copied with drifted whitespace or quotes is not rewritten); the
 * other lines are the model's, re-indented to hay's indentation when rule
 * ignores indentation (tabs against spaces, a shifted or dropped
 * indentation). final_eol: whether the last line gets its line ending. */
int text_render_block(const TextLines *hay, size_t at, const TextLines *old, const TextLines *new,
                      const int *new_from_old, MatchRule rule, bool final_eol, Buf *out);

/* Appends what the model needs when needle is not found in hay (from line
 * from on): the lines of hay that resemble it most, numbered as read_file
 * shows them, and the first line that differs. Returns 1 when something
 * resembles it, 0 when nothing does (and nothing is appended). */
int text_nearest(const TextLines *hay, const TextLines *needle, size_t from, Buf *out);

/* read_file's "  12| " prefixes copied into a text. If every line that is
 * not empty carries one (and, with consecutive, their numbers count up one
 * by one), *ret is the text without them and *ret_first the first number;
 * returns 1. Without consecutive, the prefix is taken off every line that
 * carries one, and 1 is returned if any did. Else 0 and nothing set. */
int text_strip_line_numbers(const char *text, bool consecutive, char **ret, unsigned *ret_first);

/* Lines first .. last (1-based, clamped to the text) numbered as read_file
 * shows them, with context lines around; at most max_lines, the middle cut
 * with a note; each line at most 300 bytes. */
int text_snippet(const char *text, size_t size, unsigned first, unsigned last, unsigned context, unsigned max_lines,
                 Buf *out);

/* edit_file's replacement of old_text by new_text in data: exact first,
 * then the rules above (line endings as substrings, the others by whole
 * lines), then, if every line of old_text carries a read_file prefix, all
 * of that again without them (their numbers then pick among several
 * matches). new_text takes the file's line endings. With replace_all,
 * every exact occurrence, and nothing tolerant. The result may be at most
 * max_size bytes. what names the file in messages ("'src/a.c'").
 *
 * Errors, with a message for the model in *ret_error: -ENODATA (not found;
 * the nearest lines are shown), -ENOTUNIQ (several matches under the rule
 * that matched; where), -EFBIG; and -ENOMEM without one. */
typedef struct TextEdit {
        char *text;
        size_t size;
        MatchRule rule;
        bool numbers_stripped;
        unsigned line;      /* 1-based: where the change starts, in the new text */
        unsigned old_lines; /* lines replaced, and the lines that replace them */
        unsigned new_lines;
        unsigned count;     /* replace_all: how many */
        char *lines;        /* replace_all: the lines of the first ones, "3, 9, 12" */
} TextEdit;

int text_edit(const char *data, size_t size, const char *old_text, const char *new_text, bool replace_all,
              size_t max_size, const char *what, TextEdit *ret, char **ret_error);
void text_edit_done(TextEdit *e);
