/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* apply_patch's parser and the tolerant matching it shares with
 * edit_file, on memory only (the paths are tools-edit.c's and
 * fuzz-tool-call's concern).
 *
 * Input: a first byte, then up to three strings separated by byte 0xff.
 *   bit 0 clear: a file's content, then a patch; the patch is parsed and
 *                every update in it applied to the content;
 *   bit 0 set:   a file's content, old_text and new_text for text_edit()
 *                (bit 1: replace_all).
 *
 * Invariants: a parsed patch names at least one file, at most
 * PATCH_FILES_MAX, every one with a path, and an update has hunks or a
 * move; a refusal says why; an applied update is at most the limit, and
 * says for each hunk a line within the new content; applying is
 * deterministic; a failing one says which hunk; a second search for a
 * hunk's lines (by the index of line hashes) finds what the first (rolling
 * over them) found. An edit's result is at
 * most the limit and free of NUL; an exact match of a one-line new_text
 * is the plain replacement; replace_all of a text that is not there is
 * refused; a refusal says why. */
#include "fuzz.h"
#include "patch.h"
#include "string-util.h"
#include "text-match.h"

#define MAX_SIZE (64U * 1024U)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

FUZZ_UNINSTRUMENTED static unsigned lines_in(const char *s, size_t n) {
        unsigned lines = 0;
        for (const char *p = s; (p = memchr(p, '\n', n - (size_t) (p - s))); p++)
                lines++;
        return lines + (n > 0 && s[n - 1] != '\n');
}

static void check_find_twice(const char *content, size_t content_size, const PatchHunk *h) {
        TextLines hay = {}, needle = {};

        if (text_lines_split(content, content_size, &hay) < 0)
                return;
        if (text_lines_split(h->old_text, h->old_size, &needle) >= 0)
                for (MatchRule rule = MATCH_EXACT; rule < _MATCH_RULE_MAX; rule++) {
                        BlockFound a, b;
                        int r1 = text_find_block(&hay, &needle, rule, 0, h->at_end, &a);
                        int r2 = text_find_block(&hay, &needle, rule, 0, h->at_end, &b);
                        FUZZ_CHECK(r1 == r2 && a.n == b.n && a.more == b.more &&
                                   memcmp(a.at, b.at, a.n * sizeof(size_t)) == 0,
                                   "rule %d: %zu matches rolling, %zu by the index", (int) rule, a.n, b.n);
                }
        text_lines_done(&needle);
        text_lines_done(&hay);
}

static void fuzz_patch(const char *content, size_t content_size, const char *text) {
        _cleanup_free_ char *error = NULL;
        Patch p = {};
        int r;

        r = patch_parse(text, &p, &error);
        if (r < 0) {
                FUZZ_CHECK(r == -ENOMEM || error, "a refused patch says why (%d)", r);
                FUZZ_CHECK(p.n_files == 0 && !p.files, "a refused patch is empty");
                return;
        }
        FUZZ_CHECK(!error, "no message on success");
        FUZZ_CHECK(p.n_files > 0 && p.n_files <= PATCH_FILES_MAX, "%zu files", p.n_files);
        FUZZ_CHECK(p.format == PATCH_FORMAT_CODEX || p.format == PATCH_FORMAT_UNIFIED, "format %d", (int) p.format);

        for (size_t i = 0; i < p.n_files; i++) {
                const PatchFile *f = &p.files[i];

                FUZZ_CHECK(f->path && *f->path, "file %zu has a path", i);
                FUZZ_CHECK(!f->move_to || *f->move_to, "a move has a target");
                switch (f->op) {
                case PATCH_OP_ADD:
                        FUZZ_CHECK(f->content && strlen(f->content) == f->content_size, "an add has its content");
                        break;
                case PATCH_OP_DELETE:
                        break;
                case PATCH_OP_UPDATE: {
                        _cleanup_(buf_done) Buf errors = {}, again = {};
                        _cleanup_free_ char *out = NULL, *out2 = NULL;
                        _cleanup_free_ PatchHunkResult *res = NULL;
                        size_t out_size = 0, out2_size = 0;
                        int r2;

                        FUZZ_CHECK(f->n_hunks > 0 || f->move_to, "an update has hunks or a move");
                        for (size_t k = 0; k < f->n_hunks; k++) {
                                const PatchHunk *h = &f->hunks[k];
                                FUZZ_CHECK(strlen(h->old_text) == h->old_size && strlen(h->new_text) == h->new_size,
                                           "hunk texts are strings");
                                FUZZ_CHECK(h->n_new == lines_in(h->new_text, h->new_size), "n_new counts the new lines");
                                FUZZ_CHECK(h->old_size + h->new_size > 0, "no empty hunk");
                                for (size_t j = 0; j < h->n_new; j++)
                                        FUZZ_CHECK(h->new_from_old[j] < (int) lines_in(h->old_text, h->old_size),
                                                   "context maps into the old lines");
                                if (k == 0)
                                        check_find_twice(content, content_size, h);
                        }
                        if (f->n_hunks == 0)
                                break;
                        res = calloc(f->n_hunks, sizeof(PatchHunkResult));
                        if (!res)
                                abort();
                        r = patch_apply(f, content, content_size, MAX_SIZE, &out, &out_size, res, &errors);
                        r2 = patch_apply(f, content, content_size, MAX_SIZE, &out2, &out2_size, NULL, &again);
                        FUZZ_CHECK(r == r2, "deterministic: %d then %d", r, r2);
                        if (r < 0) {
                                FUZZ_CHECK(r == -ENOMEM || (errors.s && strstr(errors.s, "'")),
                                           "a failing update says which (%d)", r);
                                FUZZ_CHECK(!out, "nothing returned on failure");
                                break;
                        }
                        FUZZ_CHECK(out_size <= MAX_SIZE, "%zu bytes for at most %u", out_size, MAX_SIZE);
                        FUZZ_CHECK(out_size == out2_size && memcmp(out, out2, out_size) == 0, "deterministic content");
                        FUZZ_CHECK(!errors.s, "no message on success");
                        unsigned total = lines_in(out, out_size);
                        for (size_t k = 0; k < f->n_hunks; k++)
                                FUZZ_CHECK(res[k].rule >= 0 && res[k].rule < _MATCH_RULE_MAX &&
                                           res[k].line >= 1 && (res[k].n_lines == 0 || res[k].line <= total + 1),
                                           "hunk %zu at line %u of %u", k, res[k].line, total);
                        break;
                }
                default:
                        FUZZ_CHECK(false, "op %d", (int) f->op);
                }
        }
        patch_done(&p);
}

static void fuzz_edit(const char *content, size_t content_size, const char *old, const char *new, bool replace_all) {
        _cleanup_free_ char *error = NULL;
        TextEdit e = {};
        int r;

        r = text_edit(content, content_size, old, new, replace_all, MAX_SIZE, "'f'", &e, &error);
        if (r < 0) {
                FUZZ_CHECK(r == -ENOMEM || error, "a refused edit says why (%d)", r);
                FUZZ_CHECK(IN_SET(r, -ENOMEM, -EINVAL, -ENODATA, -ENOTUNIQ, -EFBIG), "error %d", r);
                FUZZ_CHECK(!e.text, "nothing returned on failure");
                return;
        }
        FUZZ_CHECK(e.text && e.size <= MAX_SIZE && strlen(e.text) == e.size, "%zu bytes, no NUL", e.size);
        FUZZ_CHECK(e.rule >= 0 && e.rule < _MATCH_RULE_MAX, "rule %d", (int) e.rule);

        /* Found once exactly, a new_text without line breaks goes in as it is. */
        const char *at = memmem(content, content_size, old, strlen(old));
        if (!replace_all && e.rule == MATCH_EXACT && !e.numbers_stripped && at && !strpbrk(new, "\r\n")) {
                size_t off = (size_t) (at - content), ol = strlen(old), nl = strlen(new);
                FUZZ_CHECK(e.size == content_size - ol + nl && memcmp(e.text, content, off) == 0 &&
                           memcmp(e.text + off, new, nl) == 0 &&
                           memcmp(e.text + off + nl, content + off + ol, content_size - off - ol) == 0,
                           "an exact edit is the plain replacement");
        }
        if (replace_all)
                FUZZ_CHECK(at && e.count >= 1, "replace_all replaced what is there");
        text_edit_done(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        FuzzInput in = { .data = data, .size = size };
        _cleanup_free_ char *content = NULL, *a = NULL, *b = NULL;
        size_t content_size;
        uint8_t mode;

        if (size > 256 * 1024)
                return 0;
        mode = fuzz_u8(&in);
        content = fuzz_string(&in, &content_size);
        /* What the tools refuse before matching: binary files. */
        if (memchr(content, '\0', content_size))
                return 0;
        a = fuzz_string(&in, NULL);
        if (mode & 1) {
                b = fuzz_string(&in, NULL);
                if (*a)
                        fuzz_edit(content, content_size, a, b, mode & 2);
        } else
                fuzz_patch(content, content_size, a);
        return 0;
}
