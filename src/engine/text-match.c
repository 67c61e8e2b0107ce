/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "string-table.h"
#include "string-util.h"
#include "text-match.h"

/* An exact old_text is counted up to this many times (overlapping ones
 * too); past it the message says "at least". */
#define OCCURRENCES_MAX 1000U
/* Of a text not found, this many of its lines are compared with the file's. */
#define NEAREST_LINES_MAX 64U
/* Shown of the nearest lines at most. */
#define NEAREST_SHOWN_MAX 20U
/* Every window of the file is scored when that costs at most this many line
 * comparisons; else only those around the lines most like a few of the
 * text's longest. */
#define NEAREST_EXHAUSTIVE_MAX 50000U
/* The average likeness (0..1) under which nothing in the file resembles the
 * text. */
#define NEAREST_THRESHOLD 0.3
/* A line of a snippet or of the nearest lines is cut past this. */
#define SHOWN_LINE_MAX 300U

static const char *const match_rule_table[_MATCH_RULE_MAX] = {
        [MATCH_EXACT] = "exact",
        [MATCH_LINE_ENDINGS] = "line endings",
        [MATCH_TRAILING_WHITESPACE] = "trailing whitespace",
        [MATCH_INDENTATION] = "indentation",
        [MATCH_PUNCTUATION] = "quotes and dashes",
};

DEFINE_STRING_TABLE_LOOKUP(match_rule, MatchRule);

const char *match_rule_description(MatchRule r) {
        static const char *const d[_MATCH_RULE_MAX] = {
                [MATCH_EXACT] = "exact match",
                [MATCH_LINE_ENDINGS] = "matched ignoring line endings; the file's are kept",
                [MATCH_TRAILING_WHITESPACE] = "matched ignoring trailing whitespace",
                [MATCH_INDENTATION] = "matched ignoring indentation; the new lines were re-indented to the file's",
                [MATCH_PUNCTUATION] = ("matched with curly quotes, dashes and Unicode spaces read as ASCII, ignoring "
                                       "indentation; the new lines were re-indented to the file's"),
        };
        return r >= 0 && r < _MATCH_RULE_MAX ? d[r] : NULL;
}

/* " ignoring indentation": what the count of a refusal was made under. */
static const char *match_rule_clause(MatchRule r) {
        static const char *const d[_MATCH_RULE_MAX] = {
                [MATCH_EXACT] = "",
                [MATCH_LINE_ENDINGS] = " ignoring line endings",
                [MATCH_TRAILING_WHITESPACE] = " ignoring trailing whitespace",
                [MATCH_INDENTATION] = " ignoring indentation",
                [MATCH_PUNCTUATION] = " with quotes and dashes read as ASCII",
        };
        return r >= 0 && r < _MATCH_RULE_MAX ? d[r] : "";
}

/* ---- Lines ---- */

/* How a text indents (indent_stats_add()). */
typedef struct IndentStats {
        unsigned rises[17];
        size_t tab_lines, space_lines;
} IndentStats;

struct TextLineHashes {
        uint64_t *rule[_MATCH_RULE_MAX];
        /* From the second search under a rule on: the line numbers
         * ordered by their hash (then by number), so that a search looks
         * only at the lines that hash as its rarest line does, instead of
         * rolling over the rest of the file (a patch of many hunks over a
         * long file). */
        uint32_t *order[_MATCH_RULE_MAX];
        unsigned searches[_MATCH_RULE_MAX];
        /* How the text indents, once it is asked. */
        bool have_indent;
        IndentStats indent;
};

int text_lines_split(const char *text, size_t size, TextLines *ret) {
        size_t n = 0, allocated = 0, crlf = 0, lf = 0;
        size_t *start = NULL;
        const char *p = text, *end = text + size;

        assert(ret);
        *ret = (TextLines) { .text = text, .size = size };

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));

                if (n >= TEXT_LINES_MAX) {
                        free(start);
                        return -E2BIG;
                }
                if (n + 2 > allocated) {
                        size_t a = MAX(allocated * 2, (size_t) 64);
                        size_t *s = realloc(start, a * sizeof(size_t));
                        if (!s) {
                                free(start);
                                return -ENOMEM;
                        }
                        start = s;
                        allocated = a;
                }
                start[n++] = (size_t) (p - text);
                if (!nl)
                        break;
                if (nl > p && nl[-1] == '\r')
                        crlf++;
                else
                        lf++;
                p = nl + 1;
        }
        if (!start) {
                start = malloc(sizeof(size_t));
                if (!start)
                        return -ENOMEM;
        }
        start[n] = size;
        ret->hashes = calloc(1, sizeof(TextLineHashes));
        if (!ret->hashes) {
                free(start);
                return -ENOMEM;
        }

        ret->n = n;
        ret->start = start;
        ret->has_eol = crlf + lf > 0;
        ret->crlf = crlf > lf;
        ret->final_eol = size > 0 && text[size - 1] == '\n';
        return 0;
}

void text_lines_done(TextLines *l) {
        if (!l)
                return;
        free(l->start);
        l->start = NULL;
        l->n = 0;
        if (l->hashes)
                for (size_t r = 0; r < _MATCH_RULE_MAX; r++) {
                        free(l->hashes->rule[r]);
                        free(l->hashes->order[r]);
                }
        free(l->hashes);
        l->hashes = NULL;
}

size_t text_line_end(const TextLines *l, size_t i) {
        size_t b = l->start[i], e = l->start[i + 1];

        if (e > b && l->text[e - 1] == '\n') {
                e--;
                if (e > b && l->text[e - 1] == '\r')
                        e--;
        }
        return e;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* The part of line i that a rule compares. */
static void line_key(const TextLines *l, size_t i, MatchRule rule, const char **ret_b, const char **ret_e) {
        const char *b = l->text + l->start[i], *e = l->text + text_line_end(l, i);

        if (rule >= MATCH_TRAILING_WHITESPACE)
                while (e > b && is_blank(e[-1]))
                        e--;
        if (rule >= MATCH_INDENTATION)
                while (b < e && is_blank(*b))
                        b++;
        *ret_b = b;
        *ret_e = e;
}

/* The next character as the punctuation rule reads it: curly quotes,
 * primes, Unicode dashes and the minus sign, and Unicode spaces as their
 * ASCII kin; any other byte as itself. */
static unsigned char punct_next(const char **p, const char *e) {
        const unsigned char *s = (const unsigned char *) *p;
        size_t left = (size_t) (e - *p);

        if (left >= 2 && s[0] == 0xC2 && s[1] == 0xA0) {        /* U+00A0 no-break space */
                *p += 2;
                return ' ';
        }
        if (left >= 3 && s[0] == 0xE2 && s[1] == 0x80) {        /* U+2000 .. U+203F */
                unsigned char c = s[2], r = 0;
                if (c <= 0x8A || c == 0xAF)                     /* the spaces of U+2000 .. U+200A, U+202F */
                        r = ' ';
                else if (c >= 0x90 && c <= 0x95)                /* hyphens, figure dash, en and em dash, bar */
                        r = '-';
                else if ((c >= 0x98 && c <= 0x9B) || c == 0xB2) /* single quotes, prime */
                        r = '\'';
                else if ((c >= 0x9C && c <= 0x9F) || c == 0xB3) /* double quotes, double prime */
                        r = '"';
                if (r) {
                        *p += 3;
                        return r;
                }
        }
        if (left >= 3 && s[0] == 0xE2 && s[1] == 0x88 && s[2] == 0x92) { /* U+2212 minus sign */
                *p += 3;
                return '-';
        }
        if (left >= 3 && ((s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) ||  /* U+205F */
                          (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80))) { /* U+3000 */
                *p += 3;
                return ' ';
        }
        (*p)++;
        return s[0];
}

static uint64_t fnv_step(uint64_t h, unsigned char c) {
        return (h ^ c) * UINT64_C(0x100000001b3);
}

static uint64_t key_hash(const char *b, const char *e, MatchRule rule) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        if (rule == MATCH_PUNCTUATION)
                while (b < e)
                        h = fnv_step(h, punct_next(&b, e));
        else
                for (; b < e; b++)
                        h = fnv_step(h, (unsigned char) *b);
        return h;
}

static bool key_equal(const char *ab, const char *ae, const char *bb, const char *be, MatchRule rule) {
        if (rule != MATCH_PUNCTUATION)
                return ae - ab == be - bb && memcmp(ab, bb, (size_t) (ae - ab)) == 0;
        while (ab < ae && bb < be)
                if (punct_next(&ab, ae) != punct_next(&bb, be))
                        return false;
        return ab == ae && bb == be;
}

static bool lines_equal(const TextLines *a, size_t i, const TextLines *b, size_t j, MatchRule rule) {
        const char *ab, *ae, *bb, *be;

        line_key(a, i, rule, &ab, &ae);
        line_key(b, j, rule, &bb, &be);
        return key_equal(ab, ae, bb, be, rule);
}

/* ---- Blocks of lines ---- */

/* The hashes of every line's key under rule: kept with the lines. */
static const uint64_t *line_hashes(const TextLines *l, MatchRule rule) {
        uint64_t *h;

        if (l->hashes && l->hashes->rule[rule])
                return l->hashes->rule[rule];
        h = malloc(MAX(l->n, (size_t) 1) * sizeof(uint64_t));
        if (!h)
                return NULL;
        for (size_t i = 0; i < l->n; i++) {
                const char *b, *e;
                line_key(l, i, rule, &b, &e);
                h[i] = key_hash(b, e, rule);
        }
        if (l->hashes)
                l->hashes->rule[rule] = h;
        return h;
}

static int order_cmp(const void *a, const void *b, void *userdata) {
        const uint64_t *h = userdata;
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;

        if (h[x] != h[y])
                return h[x] < h[y] ? -1 : 1;
        return x < y ? -1 : x > y;
}

static const uint32_t *line_order(const TextLines *l, MatchRule rule, const uint64_t *hh) {
        uint32_t *o;

        if (l->hashes->order[rule])
                return l->hashes->order[rule];
        o = malloc(MAX(l->n, (size_t) 1) * sizeof(uint32_t));
        if (!o)
                return NULL;
        for (size_t i = 0; i < l->n; i++)
                o[i] = (uint32_t) i;
        qsort_r(o, l->n, sizeof(uint32_t), order_cmp, (void *) hh);
        l->hashes->order[rule] = o;
        return o;
}

/* The part of order whose lines hash to h: [*ret_lo, *ret_hi). */
static void order_range(const uint32_t *order, const uint64_t *hh, size_t n, uint64_t h, size_t *ret_lo,
                        size_t *ret_hi) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (hh[order[mid]] < h)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_lo = lo;
        hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (hh[order[mid]] <= h)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_hi = lo;
}

static bool block_equal(const TextLines *hay, const uint64_t *hh, size_t i, const TextLines *needle,
                        const uint64_t *hn, MatchRule rule) {
        for (size_t j = 0; j < needle->n; j++)
                if (hh[i + j] != hn[j] || !lines_equal(hay, i + j, needle, j, rule))
                        return false;
        return true;
}

static void found_add(BlockFound *ret, size_t i) {
        if (ret->n >= BLOCK_FOUND_MAX)
                ret->more = true;
        else
                ret->at[ret->n++] = i;
}

int text_find_block(const TextLines *hay, const TextLines *needle, MatchRule rule, size_t from, bool at_end,
                    BlockFound *ret) {
        const uint64_t P = UINT64_C(0x9E3779B97F4A7C15) | 1;
        _cleanup_free_ uint64_t *hn = NULL;
        const uint64_t *hh;
        size_t k = needle->n, n = hay->n;
        uint64_t target = 0, window = 0, pk = 1;

        assert(ret);
        *ret = (BlockFound) {};
        if (k == 0 || from > n || n - from < k)
                return 0;
        if (rule == MATCH_LINE_ENDINGS)
                rule = MATCH_EXACT;     /* The keys never hold the line endings. */
        if (at_end)
                from = n - k;

        /* A rolling hash over the hashes of the lines' keys: a window is
         * compared line by line only when its hash is the needle's. */
        hh = line_hashes(hay, rule);
        hn = malloc(k * sizeof(uint64_t));
        if (!hh || !hn) {
                if (hh && !hay->hashes)
                        free((uint64_t *) hh);
                return -ENOMEM;
        }
        for (size_t j = 0; j < k; j++) {
                const char *b, *e;
                line_key(needle, j, rule, &b, &e);
                hn[j] = key_hash(b, e, rule);
                target = target * P + hn[j];
                if (j > 0)
                        pk *= P;
        }

        if (hay->hashes && ++hay->hashes->searches[rule] >= 2) {
                const uint32_t *order = line_order(hay, rule, hh);
                size_t anchor = 0, lo = 0, hi = SIZE_MAX;

                if (!order)
                        return -ENOMEM;
                for (size_t j = 0; j < MIN(k, (size_t) 64); j++) {
                        size_t l, h;
                        order_range(order, hh, n, hn[j], &l, &h);
                        if (h - l < hi - lo) {
                                anchor = j;
                                lo = l;
                                hi = h;
                        }
                }
                for (size_t x = lo; x < hi && !ret->more; x++) {
                        size_t line = order[x], i;
                        if (line < from + anchor)
                                continue;
                        i = line - anchor;
                        if (i + k > n)
                                break;
                        if ((!at_end || i + k == n) && block_equal(hay, hh, i, needle, hn, rule))
                                found_add(ret, i);
                }
                return (int) ret->n;
        }

        for (size_t j = 0; j < k; j++)
                window = window * P + hh[from + j];
        for (size_t i = from; i + k <= n && !ret->more; i++) {
                if (window == target && block_equal(hay, hh, i, needle, hn, rule))
                        found_add(ret, i);
                if (i + k < n)
                        window = (window - hh[i] * pk) * P + hh[i + k];
        }
        if (!hay->hashes)
                free((uint64_t *) hh);
        return (int) ret->n;
}

/* ---- Indentation ---- */

static size_t indent_len(const char *b, const char *e) {
        const char *p = b;
        while (p < e && (*p == ' ' || *p == '\t'))
                p++;
        return (size_t) (p - b);
}

static unsigned indent_width(const char *s, size_t n) {
        unsigned w = 0;
        for (size_t i = 0; i < n && w < 4096; i++)
                w = s[i] == '\t' ? (w / 8 + 1) * 8 : w + 1;
        return w;
}

static bool line_blank(const TextLines *l, size_t i) {
        const char *b = l->text + l->start[i], *e = l->text + text_line_end(l, i);
        while (b < e && is_blank(*b))
                b++;
        return b == e;
}

/* The step of indentation a text uses: the most common rise from one line
 * that is not blank to the next (a continuation line aligned under a
 * parenthesis rises by odd amounts, but rarely most often). Also counts
 * the lines indented with tabs and with spaces. */

static void indent_stats_add(IndentStats *s, const TextLines *l) {
        long prev = -1;

        for (size_t i = 0; i < l->n; i++) {
                const char *b = l->text + l->start[i], *e = l->text + text_line_end(l, i);
                size_t il = indent_len(b, e);
                if (line_blank(l, i))
                        continue;
                long w = indent_width(b, il);
                if (prev >= 0 && w > prev && w - prev <= 16)
                        s->rises[w - prev]++;
                prev = w;
                if (il > 0 && b[0] == '\t')
                        s->tab_lines++;
                else if (il > 0)
                        s->space_lines++;
        }
}

static unsigned indent_stats_unit(const IndentStats *s) {
        unsigned best = 0;
        for (unsigned d = 1; d < ELEMENTSOF(s->rises); d++)
                if (s->rises[d] > (best ? s->rises[best] : 0))
                        best = d;
        if (best)
                return best;
        return s->tab_lines > s->space_lines ? 8 : 4;
}

typedef struct Reindent {
        const TextLines *hay, *old, *new;
        size_t at;
        bool ready;
        size_t anchor;          /* the first old line that is not blank */
        bool have_anchor;
        unsigned hay_unit, model_unit;
        bool tabs;
} Reindent;

static void reindent_prepare(Reindent *x) {
        IndentStats hs = {}, ms = {};

        x->ready = true;
        for (size_t i = 0; i < x->old->n; i++)
                if (!line_blank(x->old, i)) {
                        x->anchor = i;
                        x->have_anchor = true;
                        break;
                }
        if (x->hay->hashes && x->hay->hashes->have_indent)
                hs = x->hay->hashes->indent;
        else {
                indent_stats_add(&hs, x->hay);
                if (x->hay->hashes) {
                        x->hay->hashes->indent = hs;
                        x->hay->hashes->have_indent = true;
                }
        }
        indent_stats_add(&ms, x->old);
        indent_stats_add(&ms, x->new);
        x->hay_unit = indent_stats_unit(&hs);
        x->model_unit = indent_stats_unit(&ms);

        /* The anchor line's own indentation says tabs or spaces; when it
         * has none, the file's habit does. */
        if (x->have_anchor) {
                const TextLines *h = x->hay;
                const char *b = h->text + h->start[x->at + x->anchor], *e = h->text + text_line_end(h, x->at + x->anchor);
                size_t il = indent_len(b, e);
                x->tabs = il > 0 ? memchr(b, '\t', il) != NULL : hs.tab_lines > hs.space_lines;
        }
}

/* New line j's indentation in the file's terms: the file's indentation of
 * an old line with exactly the same indentation, else the anchor's, moved
 * by the model's difference scaled from its step to the file's. */
static int reindent_line(Reindent *x, const char *b, const char *e, Buf *out) {
        size_t il = indent_len(b, e);
        const TextLines *h = x->hay, *o = x->old;

        if (!x->ready)
                reindent_prepare(x);
        if (!x->have_anchor)
                return buf_append(out, b, (size_t) (e - b));

        for (size_t i = 0; i < o->n; i++) {
                const char *ob = o->text + o->start[i], *oe = o->text + text_line_end(o, i);
                size_t ol = indent_len(ob, oe);
                if (ol == il && !line_blank(o, i) && memcmp(ob, b, il) == 0) {
                        const char *hb = h->text + h->start[x->at + i], *he = h->text + text_line_end(h, x->at + i);
                        if (buf_append(out, hb, indent_len(hb, he)) < 0)
                                return -ENOMEM;
                        return buf_append(out, b + il, (size_t) (e - b - il));
                }
        }

        const char *ab = o->text + o->start[x->anchor], *ae = o->text + text_line_end(o, x->anchor);
        const char *hb = h->text + h->start[x->at + x->anchor], *he = h->text + text_line_end(h, x->at + x->anchor);
        long wo = indent_width(ab, indent_len(ab, ae)), wh = indent_width(hb, indent_len(hb, he));
        long wn = indent_width(b, il);
        long cols = wh + (wn - wo) * (long) x->hay_unit / (long) x->model_unit;

        if (cols < 0)
                cols = 0;
        for (long i = 0; x->tabs && i < cols / 8; i++)
                if (buf_append(out, "\t", 1) < 0)
                        return -ENOMEM;
        for (long i = 0; i < (x->tabs ? cols % 8 : cols); i++)
                if (buf_append(out, " ", 1) < 0)
                        return -ENOMEM;
        return buf_append(out, b + il, (size_t) (e - b - il));
}

int text_render_block(const TextLines *hay, size_t at, const TextLines *old, const TextLines *new,
                      const int *new_from_old, MatchRule rule, bool final_eol, Buf *out) {
        const char *eol = hay->has_eol ? (hay->crlf ? "\r\n" : "\n") : (new->crlf ? "\r\n" : "\n");
        Reindent x = { .hay = hay, .old = old, .new = new, .at = at };
        int r;

        for (size_t j = 0; j < new->n; j++) {
                const char *b = new->text + new->start[j], *e = new->text + text_line_end(new, j);
                int from = new_from_old ? new_from_old[j] : -1;

                if (from >= 0 && (size_t) from < old->n) {
                        size_t i = at + (size_t) from;
                        r = buf_append(out, hay->text + hay->start[i], text_line_end(hay, i) - hay->start[i]);
                } else if (rule >= MATCH_INDENTATION) {
                        const char *t = b;
                        while (t < e && is_blank(*t))
                                t++;
                        /* A blank line stays blank, without stray indentation. */
                        r = t == e ? 0 : reindent_line(&x, b, e, out);
                } else
                        r = buf_append(out, b, (size_t) (e - b));
                if (r < 0)
                        return -ENOMEM;
                if ((j + 1 < new->n || final_eol) && buf_puts(out, eol) < 0)
                        return -ENOMEM;
        }
        if (!out->s && buf_append(out, "", 0) < 0)
                return -ENOMEM;
        return 0;
}

/* ---- The nearest lines ---- */

/* A line's likeness fingerprint: the set of its character pairs (256 bits)
 * after trimming, reading punctuation as ASCII and folding runs of blanks;
 * and a hash of that text, so that equal lines count as equal. */
typedef struct LineSig {
        uint64_t bits[4];
        uint64_t hash;
        unsigned len;
} LineSig;

static void line_sig(const TextLines *l, size_t i, LineSig *s) {
        const char *b, *e;
        unsigned char prev = 0;
        bool have_prev = false, blank = false;

        *s = (LineSig) { .hash = UINT64_C(0xcbf29ce484222325) };
        line_key(l, i, MATCH_INDENTATION, &b, &e);
        if (e - b > 400)
                e = b + 400;
        while (b < e) {
                unsigned char c = punct_next(&b, e);
                if (c == ' ' || c == '\t') {
                        blank = true;
                        continue;
                }
                if (blank) {
                        blank = false;
                        if (have_prev) {
                                unsigned h = ((unsigned) prev << 8 | ' ') * 2654435761U >> 24;
                                s->bits[h / 64] |= UINT64_C(1) << (h % 64);
                        }
                        prev = ' ';
                        have_prev = true;
                        s->hash = fnv_step(s->hash, ' ');
                        s->len++;
                }
                if (have_prev) {
                        unsigned h = ((unsigned) prev << 8 | c) * 2654435761U >> 24;
                        s->bits[h / 64] |= UINT64_C(1) << (h % 64);
                }
                prev = c;
                have_prev = true;
                s->hash = fnv_step(s->hash, c);
                s->len++;
        }
}

static double sig_likeness(const LineSig *a, const LineSig *b) {
        unsigned pa = 0, pb = 0, both = 0;

        if (a->len == b->len && a->hash == b->hash)
                return 1.0;
        for (size_t i = 0; i < 4; i++) {
                pa += (unsigned) __builtin_popcountll(a->bits[i]);
                pb += (unsigned) __builtin_popcountll(b->bits[i]);
                both += (unsigned) __builtin_popcountll(a->bits[i] & b->bits[i]);
        }
        if (pa + pb == 0)
                return 0.0;
        return 2.0 * both / (pa + pb);
}

static double window_score(const TextLines *hay, size_t i, const LineSig *ns, size_t kk) {
        double sum = 0;
        for (size_t j = 0; j < kk && i + j < hay->n; j++) {
                LineSig hs;
                line_sig(hay, i + j, &hs);
                sum += sig_likeness(&hs, &ns[j]);
        }
        return sum / (double) kk;
}

static int append_numbered(Buf *out, const TextLines *l, size_t i) {
        size_t b = l->start[i], e = text_line_end(l, i), n = e - b;
        bool cut = n > SHOWN_LINE_MAX;

        if (cut) {
                n = SHOWN_LINE_MAX;
                while (n > 0 && ((unsigned char) l->text[b + n] & 0xC0) == 0x80)
                        n--;
        }
        if (buf_printf(out, "%4zu| ", i + 1) < 0 || buf_append(out, l->text + b, n) < 0 ||
            buf_puts(out, cut ? " [... the rest of the line is cut ...]\n" : "\n") < 0)
                return -ENOMEM;
        return 0;
}

static char *line_quoted(const TextLines *l, size_t i) {
        _cleanup_free_ char *s = strndup(l->text + l->start[i], text_line_end(l, i) - l->start[i]);
        return s ? strshorten_line(s, 200) : NULL;
}

int text_nearest(const TextLines *hay, const TextLines *needle, size_t from, Buf *out) {
        LineSig ns[NEAREST_LINES_MAX];
        size_t kk = MIN(needle->n, (size_t) NEAREST_LINES_MAX), span, last, best = SIZE_MAX;
        double best_score = -1;

        if (from >= hay->n || kk == 0)
                return 0;
        span = hay->n - from;
        last = from + (span >= kk ? span - kk : 0);
        for (size_t j = 0; j < kk; j++)
                line_sig(needle, j, &ns[j]);

        if ((last - from + 1) * kk <= NEAREST_EXHAUSTIVE_MAX) {
                for (size_t i = from; i <= last; i++) {
                        double s = window_score(hay, i, ns, kk);
                        if (s > best_score) {
                                best_score = s;
                                best = i;
                        }
                }
        } else {
                /* Anchored: the lines of the file most like each of the
                 * text's three longest lines, and the windows they stand in. */
                size_t anchors[3], n_anchors = 0;
                struct { size_t at; double s; } top[3][8] = {};

                for (size_t a = 0; a < 3; a++) {
                        size_t pick = SIZE_MAX;
                        for (size_t j = 0; j < kk; j++) {
                                bool used = false;
                                for (size_t u = 0; u < n_anchors; u++)
                                        used = used || anchors[u] == j;
                                if (!used && ns[j].len > 0 && (pick == SIZE_MAX || ns[j].len > ns[pick].len))
                                        pick = j;
                        }
                        if (pick == SIZE_MAX)
                                break;
                        anchors[n_anchors++] = pick;
                }
                if (n_anchors == 0)
                        return 0;
                for (size_t a = 0; a < n_anchors; a++)
                        for (size_t t = 0; t < 8; t++)
                                top[a][t].s = -1;
                for (size_t x = from; x < hay->n; x++) {
                        LineSig hs;
                        line_sig(hay, x, &hs);
                        for (size_t a = 0; a < n_anchors; a++) {
                                double s = sig_likeness(&hs, &ns[anchors[a]]);
                                if (s <= top[a][7].s)
                                        continue;
                                size_t t = 7;
                                for (; t > 0 && top[a][t - 1].s < s; t--)
                                        top[a][t] = top[a][t - 1];
                                top[a][t].at = x;
                                top[a][t].s = s;
                        }
                }
                for (size_t a = 0; a < n_anchors; a++)
                        for (size_t t = 0; t < 8 && top[a][t].s >= 0; t++) {
                                size_t i = top[a][t].at >= from + anchors[a] ? top[a][t].at - anchors[a] : from;
                                i = MIN(i, last);
                                double s = window_score(hay, i, ns, kk);
                                if (s > best_score) {
                                        best_score = s;
                                        best = i;
                                }
                        }
        }

        if (best == SIZE_MAX || best_score < NEAREST_THRESHOLD)
                return 0;

        size_t shown = MIN(needle->n, hay->n - best), cut = MIN(shown, (size_t) NEAREST_SHOWN_MAX);
        if (buf_printf(out, "The nearest lines of the file (lines %zu-%zu, the closest fuzzy match):\n",
                       best + 1, best + shown) < 0)
                return -ENOMEM;
        for (size_t i = best; i < best + cut; i++)
                if (append_numbered(out, hay, i) < 0)
                        return -ENOMEM;
        if (cut < shown && buf_printf(out, "[... %zu more lines ...]\n", shown - cut) < 0)
                return -ENOMEM;

        for (size_t j = 0; j < shown; j++) {
                if (lines_equal(hay, best + j, needle, j, MATCH_PUNCTUATION))
                        continue;
                _cleanup_free_ char *h = line_quoted(hay, best + j), *o = line_quoted(needle, j);
                if (!h || !o)
                        return -ENOMEM;
                if (buf_printf(out, "The first difference: line %zu of the file is '%s' where yours is '%s'.\n",
                               best + j + 1, h, o) < 0)
                        return -ENOMEM;
                break;
        }
        if (needle->n > hay->n - best &&
            buf_printf(out, "Yours has %zu lines; the file ends after %zu of them.\n", needle->n, hay->n - best) < 0)
                return -ENOMEM;
        return 1;
}

/* ---- read_file's prefixes ---- */

static bool line_number_prefix(const char *b, const char *e, unsigned *ret_number, size_t *ret_len) {
        const char *p = b, *digits;
        unsigned v = 0;

        while (p < e && (*p == ' ' || *p == '\t'))
                p++;
        digits = p;
        while (p < e && *p >= '0' && *p <= '9' && p - digits < 9)
                v = v * 10 + (unsigned) (*p++ - '0');
        if (p == digits || p >= e || *p != '|')
                return false;
        p++;
        if (p < e && (*p == ' ' || *p == '\t'))
                p++;
        *ret_number = v;
        *ret_len = (size_t) (p - b);
        return true;
}

int text_strip_line_numbers(const char *text, bool consecutive, char **ret, unsigned *ret_first) {
        _cleanup_(buf_done) Buf b = {};
        const char *p = text, *end = text + strlen(text);
        unsigned expected = 0, first = 0;
        bool any = false;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p)), *e = nl ?: end, *le = e;
                unsigned number;
                size_t pl;

                if (le > p && le[-1] == '\r')
                        le--;
                if (line_number_prefix(p, le, &number, &pl)) {
                        if (consecutive && any && number != expected)
                                return 0;
                        if (!any)
                                first = number;
                        any = true;
                        expected = number + 1;
                        p += pl;
                } else if (le == p) {
                        /* An empty line whose prefix the model left off. */
                        expected++;
                } else if (consecutive)
                        return 0;
                if (buf_append(&b, p, (size_t) (e - p) + (nl ? 1 : 0)) < 0)
                        return -ENOMEM;
                p = nl ? nl + 1 : end;
        }
        if (!any)
                return 0;
        if (!b.s && buf_append(&b, "", 0) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(b.s);
        if (ret_first)
                *ret_first = first;
        return 1;
}

/* ---- Snippets ---- */

int text_snippet(const char *text, size_t size, unsigned first, unsigned last, unsigned context, unsigned max_lines,
                 Buf *out) {
        _cleanup_(text_lines_done) TextLines l = {};
        size_t from, to;
        int r;

        r = text_lines_split(text, size, &l);
        if (r == -E2BIG)
                return 0;       /* Too long to show a part of by lines. */
        if (r < 0)
                return r;
        if (l.n == 0)
                return 0;
        if (last < first)
                last = first;
        from = first > context + 1 ? first - context - 1 : 0;
        to = MIN((size_t) last + context, l.n);
        if (from >= to)
                return 0;
        if (max_lines < 2)
                max_lines = 2;

        size_t head = to - from, tail = 0;
        if (to - from > max_lines) {
                head = max_lines / 2;
                tail = max_lines - head;
        }
        for (size_t i = from; i < from + head; i++)
                if (append_numbered(out, &l, i) < 0)
                        return -ENOMEM;
        if (tail > 0) {
                if (buf_printf(out, "[... %zu lines ...]\n", to - from - head - tail) < 0)
                        return -ENOMEM;
                for (size_t i = to - tail; i < to; i++)
                        if (append_numbered(out, &l, i) < 0)
                                return -ENOMEM;
        }
        return 0;
}

/* ---- edit_file ---- */

void text_edit_done(TextEdit *e) {
        if (!e)
                return;
        free(e->text);
        free(e->lines);
        *e = (TextEdit) {};
}

static unsigned count_lines(const char *s, size_t n) {
        unsigned lines = 0;

        for (const char *p = s; (p = memchr(p, '\n', n - (size_t) (p - s))); p++)
                lines++;
        if (n > 0 && s[n - 1] != '\n')
                lines++;
        return lines;
}

/* s with every line ending made "\r\n" (crlf) or "\n"; a lone "\r" stays. */
static char *convert_eol(const char *s, bool crlf, size_t *ret_size) {
        Buf b = {};

        for (const char *p = s; *p; p++) {
                int r;
                if (p[0] == '\r' && p[1] == '\n')
                        continue;
                if (*p == '\n')
                        r = buf_puts(&b, crlf ? "\r\n" : "\n");
                else
                        r = buf_append(&b, p, 1);
                if (r < 0) {
                        buf_done(&b);
                        return NULL;
                }
        }
        if (!b.s && buf_append(&b, "", 0) < 0)
                return NULL;
        *ret_size = b.n;
        return b.s;
}

/* Whether s has a line ending other than the file's. */
static bool eol_differs(const char *s, const TextLines *file) {
        for (const char *p = strchr(s, '\n'); p; p = strchr(p + 1, '\n')) {
                bool cr = p > s && p[-1] == '\r';
                if (cr != file->crlf)
                        return true;
        }
        return false;
}

typedef struct Occurrences {
        size_t count;
        bool more;
        size_t first, hinted;   /* offsets */
        unsigned n_hinted;
        unsigned lines[8];
} Occurrences;

/* Every occurrence, overlapping ones too ("aa" in "aaa" is ambiguous). */
static void find_occurrences(const char *data, size_t size, const char *needle, size_t nl, unsigned hint,
                             Occurrences *o) {
        const char *last = data;
        unsigned line = 1;

        *o = (Occurrences) {};
        for (const char *p = data; (size_t) (p - data) < size;) {
                p = memmem(p, size - (size_t) (p - data), needle, nl);
                if (!p)
                        break;
                for (const char *q = last; (q = memchr(q, '\n', (size_t) (p - q))); q++)
                        line++;
                last = p;
                if (o->count >= OCCURRENCES_MAX) {
                        o->more = true;
                        break;
                }
                if (o->count < ELEMENTSOF(o->lines))
                        o->lines[o->count] = line;
                if (o->count == 0)
                        o->first = (size_t) (p - data);
                if (hint > 0 && line == hint) {
                        o->n_hinted++;
                        o->hinted = (size_t) (p - data);
                }
                o->count++;
                p++;
        }
}

static int ambiguous(char **ret_error, const char *what, MatchRule rule, size_t count, bool more,
                     const unsigned *lines, size_t n_lines) {
        _cleanup_(buf_done) Buf where = {};

        for (size_t i = 0; i < n_lines; i++)
                if (buf_printf(&where, "%s%u", i > 0 ? ", " : "", lines[i]) < 0)
                        return -ENOMEM;
        return error_set(ret_error, -ENOTUNIQ, "edit_file: old_text occurs %s%zu times in %s%s (at lines %s%s); it "
                         "must occur exactly once: include more of the surrounding lines, or set replace_all to "
                         "true to replace every exact occurrence", more ? "at least " : "", count, what,
                         match_rule_clause(rule), strempty(where.s), more || count > n_lines ? ", ..." : "");
}

static int too_big(char **ret_error, const char *what, size_t new_size, size_t max_size) {
        return error_set(ret_error, -EFBIG, "edit_file: %s would become %zu bytes, more than the limit of %zu", what,
                         new_size, max_size);
}

static int edit_splice(const char *data, size_t size, size_t offset, size_t old_size, const char *new, size_t new_size,
                       size_t max_size, const char *what, TextEdit *ret, char **ret_error) {
        size_t total = size - old_size + new_size;
        char *out;

        if (total > max_size)
                return too_big(ret_error, what, total, max_size);
        out = malloc(total + 1);
        if (!out)
                return -ENOMEM;
        memcpy(out, data, offset);
        memcpy(out + offset, new, new_size);
        memcpy(out + offset + new_size, data + offset + old_size, size - offset - old_size);
        out[total] = '\0';
        ret->text = out;
        ret->size = total;
        ret->line = count_lines(data, offset) + (offset == 0 || data[offset - 1] == '\n' ? 1 : 0);
        ret->new_lines = count_lines(new, new_size);
        return 1;
}

/* The substring rules: old_text exactly, or with the file's line endings. */
static int edit_substring(const char *data, size_t size, const TextLines *file, const char *old, const char *new,
                          MatchRule rule, unsigned hint, size_t max_size, const char *what, TextEdit *ret,
                          char **ret_error) {
        _cleanup_free_ char *old_conv = NULL, *new_conv = NULL;
        size_t ol = strlen(old), nl = strlen(new);
        Occurrences o;

        if (rule == MATCH_LINE_ENDINGS) {
                if (!file->has_eol || !eol_differs(old, file))
                        return 0;
                old_conv = convert_eol(old, file->crlf, &ol);
                if (!old_conv)
                        return -ENOMEM;
                old = old_conv;
        }
        /* new_text takes the file's line endings, whatever matched. */
        if (file->has_eol && eol_differs(new, file)) {
                new_conv = convert_eol(new, file->crlf, &nl);
                if (!new_conv)
                        return -ENOMEM;
                new = new_conv;
        }

        find_occurrences(data, size, old, ol, hint, &o);
        if (o.count == 0)
                return 0;
        size_t at = o.first;
        if (o.count > 1) {
                if (o.n_hinted != 1)
                        return ambiguous(ret_error, what, rule, o.count, o.more, o.lines,
                                         MIN(o.count, ELEMENTSOF(o.lines)));
                at = o.hinted;
        }
        ret->rule = rule;
        ret->old_lines = count_lines(old, ol);
        return edit_splice(data, size, at, ol, new, nl, max_size, what, ret, ret_error);
}

/* new line j is old line new_from_old[j] unchanged: the lines both begin
 * and end with. */
static int *context_map(const TextLines *old, const TextLines *new) {
        size_t p = 0, s = 0;
        int *m = malloc(MAX(new->n, (size_t) 1) * sizeof(int));

        if (!m)
                return NULL;
        while (p < old->n && p < new->n && lines_equal(old, p, new, p, MATCH_EXACT))
                p++;
        while (s < old->n - p && s < new->n - p && lines_equal(old, old->n - 1 - s, new, new->n - 1 - s, MATCH_EXACT))
                s++;
        for (size_t j = 0; j < new->n; j++)
                m[j] = j < p ? (int) j : j >= new->n - s ? (int) (old->n - (new->n - j)) : -1;
        return m;
}

static int edit_block(const char *data, size_t size, const TextLines *file, const TextLines *old,
                      const TextLines *new, size_t at, MatchRule rule, size_t max_size, const char *what,
                      TextEdit *ret, char **ret_error) {
        _cleanup_(buf_done) Buf b = {};
        _cleanup_free_ int *map = NULL;
        size_t last = at + old->n - 1, line_end = text_line_end(file, last);
        size_t region_start = file->start[at], region_end = old->final_eol ? file->start[last + 1] : line_end;
        bool final_eol = new->final_eol;

        /* old_text ended with a line ending the file's last line lacks: so
         * does the new text's end. */
        if (old->final_eol && file->start[last + 1] == line_end)
                final_eol = false;

        map = context_map(old, new);
        if (!map)
                return -ENOMEM;
        if (buf_append(&b, data, region_start) < 0)
                return -ENOMEM;
        size_t change = b.n;
        if (text_render_block(file, at, old, new, map, rule, final_eol, &b) < 0)
                return -ENOMEM;
        size_t total = b.n + size - region_end;
        if (total > max_size)
                return too_big(ret_error, what, total, max_size);
        if (buf_append(&b, data + region_end, size - region_end) < 0)
                return -ENOMEM;

        ret->rule = rule;
        ret->line = (unsigned) at + 1;
        ret->old_lines = (unsigned) old->n;
        ret->new_lines = count_lines(b.s + change, b.n - (size - region_end) - change);
        ret->size = b.n;
        ret->text = TAKE_PTR(b.s);
        return 1;
}

/* One pass of the rules over old_text. 1: edited; 0: not found; else the
 * error, with its message. */
static int edit_ladder(const char *data, size_t size, const TextLines *file, bool lines_ok, const char *old,
                       const char *new, unsigned hint, size_t max_size, const char *what, TextEdit *ret,
                       char **ret_error) {
        _cleanup_(text_lines_done) TextLines ol = {}, nl = {};
        int r;

        r = edit_substring(data, size, file, old, new, MATCH_EXACT, hint, max_size, what, ret, ret_error);
        if (r != 0)
                return r;
        r = edit_substring(data, size, file, old, new, MATCH_LINE_ENDINGS, hint, max_size, what, ret, ret_error);
        if (r != 0)
                return r;
        if (!lines_ok)
                return 0;

        r = text_lines_split(old, strlen(old), &ol);
        if (r == -E2BIG)
                return 0;
        if (r >= 0)
                r = text_lines_split(new, strlen(new), &nl);
        if (r == -E2BIG)
                return 0;
        if (r < 0)
                return r;

        for (MatchRule rule = MATCH_TRAILING_WHITESPACE; rule < _MATCH_RULE_MAX; rule++) {
                BlockFound found;
                size_t at;

                r = text_find_block(file, &ol, rule, 0, false, &found);
                if (r < 0)
                        return r;
                if (found.n == 0)
                        continue;
                at = found.at[0];
                if (found.n > 1 || found.more) {
                        unsigned lines[8];
                        size_t n_hinted = 0;
                        for (size_t i = 0; i < found.n; i++) {
                                if (i < ELEMENTSOF(lines))
                                        lines[i] = (unsigned) found.at[i] + 1;
                                if (hint > 0 && found.at[i] + 1 == hint) {
                                        at = found.at[i];
                                        n_hinted++;
                                }
                        }
                        if (n_hinted != 1)
                                return ambiguous(ret_error, what, rule, found.n, found.more, lines,
                                                 MIN(found.n, ELEMENTSOF(lines)));
                }
                return edit_block(data, size, file, &ol, &nl, at, rule, max_size, what, ret, ret_error);
        }
        return 0;
}

static int not_found(char **ret_error, const char *what, const TextLines *file, bool lines_ok, const char *old,
                     bool replace_all, bool stripped) {
        _cleanup_(text_lines_done) TextLines ol = {};
        _cleanup_(buf_done) Buf b = {}, near = {};
        int r, n = 0;

        if (replace_all)
                r = buf_printf(&b, "edit_file: old_text was not found in %s; with replace_all only exact occurrences "
                               "are replaced (whitespace, indentation and line breaks as in the file, without the "
                               "line numbers read_file shows).", what);
        else
                r = buf_printf(&b, "edit_file: old_text was not found in %s, not even with line endings, trailing "
                               "whitespace, indentation, quotes and dashes let differ%s.", what,
                               stripped ? ", and without the read_file line numbers" : "");
        if (r < 0)
                return -ENOMEM;

        if (lines_ok) {
                r = text_lines_split(old, strlen(old), &ol);
                if (r < 0 && r != -E2BIG)
                        return r;
                n = r >= 0 ? text_nearest(file, &ol, 0, &near) : 0;
                if (n < 0)
                        return n;
        }
        if (!lines_ok)
                r = buf_printf(&b, " (The file has more than %u lines: only exact matches were tried.)", TEXT_LINES_MAX);
        else if (n > 0)
                r = buf_printf(&b, "\n%sCopy the lines from the file as they are (without the line numbers) and try "
                               "again.", near.s);
        else
                r = buf_puts(&b, " Nothing in the file resembles it: read the file again and copy the text from it.");
        if (r < 0)
                return -ENOMEM;
        *ret_error = TAKE_PTR(b.s);
        return -ENODATA;
}

static int edit_all(const char *data, size_t size, const TextLines *file, bool lines_ok, const char *old,
                    const char *new, size_t max_size, const char *what, TextEdit *ret, char **ret_error) {
        _cleanup_free_ char *new_conv = NULL;
        _cleanup_(buf_done) Buf b = {}, where = {};
        size_t ol = strlen(old), nl = strlen(new);
        const char *p = data, *end = data + size, *last = data;
        unsigned line = 1;

        if (file->has_eol && eol_differs(new, file)) {
                new_conv = convert_eol(new, file->crlf, &nl);
                if (!new_conv)
                        return -ENOMEM;
                new = new_conv;
        }

        for (const char *q; p < end && (q = memmem(p, (size_t) (end - p), old, ol)); p = q + ol) {
                for (const char *c = last; (c = memchr(c, '\n', (size_t) (q - c))); c++)
                        line++;
                last = q;
                if (ret->count == 0)
                        ret->line = line;
                if (ret->count < 8 && buf_printf(&where, "%s%u", ret->count > 0 ? ", " : "", line) < 0)
                        return -ENOMEM;
                ret->count++;
                if (b.n + (size_t) (q - p) + nl > max_size)
                        return too_big(ret_error, what, b.n + (size_t) (q - p) + nl + (size_t) (end - q - ol), max_size);
                if (buf_append(&b, p, (size_t) (q - p)) < 0 || buf_append(&b, new, nl) < 0)
                        return -ENOMEM;
        }
        if (ret->count == 0)
                return not_found(ret_error, what, file, lines_ok, old, true, false);
        if (b.n + (size_t) (end - p) > max_size)
                return too_big(ret_error, what, b.n + (size_t) (end - p), max_size);
        if (buf_append(&b, p, (size_t) (end - p)) < 0)
                return -ENOMEM;
        if (ret->count > 8 && buf_puts(&where, ", ...") < 0)
                return -ENOMEM;

        ret->rule = MATCH_EXACT;
        ret->old_lines = count_lines(old, ol);
        ret->new_lines = count_lines(new, nl);
        ret->lines = TAKE_PTR(where.s);
        ret->size = b.n;
        ret->text = TAKE_PTR(b.s);
        return 0;
}

int text_edit(const char *data, size_t size, const char *old_text, const char *new_text, bool replace_all,
              size_t max_size, const char *what, TextEdit *ret, char **ret_error) {
        _cleanup_(text_lines_done) TextLines file = {};
        _cleanup_free_ char *old2 = NULL, *new2 = NULL;
        _cleanup_(text_edit_done) TextEdit e = {};
        unsigned first = 0;
        bool lines_ok = true;
        int r;

        assert(data);
        assert(ret);
        assert(ret_error);

        *ret = (TextEdit) {};
        *ret_error = NULL;
        if (isempty(old_text))
                return error_set(ret_error, -EINVAL, "edit_file: 'old_text' must not be empty");
        new_text = strempty(new_text);
        what = strempty(what);

        r = text_lines_split(data, size, &file);
        if (r == -E2BIG) {
                lines_ok = false;
                /* Line endings are still known, for new_text. */
                file = (TextLines) {
                        .text = data, .size = size, .has_eol = memchr(data, '\n', size) != NULL,
                        .crlf = memmem(data, size, "\r\n", 2) != NULL,
                };
        } else if (r < 0)
                return r;

        if (replace_all) {
                r = edit_all(data, size, &file, lines_ok, old_text, new_text, max_size, what, &e, ret_error);
                if (r < 0)
                        return r;
                *ret = e;
                e = (TextEdit) {};
                return 0;
        }

        r = edit_ladder(data, size, &file, lines_ok, old_text, new_text, 0, max_size, what, &e, ret_error);
        if (r < 0)
                return r;
        if (r == 0) {
                r = text_strip_line_numbers(old_text, true, &old2, &first);
                if (r < 0)
                        return r;
                if (r > 0 && !isempty(old2)) {
                        r = text_strip_line_numbers(new_text, false, &new2, NULL);
                        if (r < 0)
                                return r;
                        r = edit_ladder(data, size, &file, lines_ok, old2, new2 ?: new_text, first, max_size, what,
                                        &e, ret_error);
                        if (r < 0)
                                return r;
                        e.numbers_stripped = r > 0;
                        if (r == 0)
                                return not_found(ret_error, what, &file, lines_ok, old2, false, true);
                } else
                        return not_found(ret_error, what, &file, lines_ok, old_text, false, false);
        }

        e.count = 1;
        *ret = e;
        e = (TextEdit) {};
        return 0;
}
