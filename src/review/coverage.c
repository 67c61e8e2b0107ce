/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coverage.h"
#include "string-util.h"

static const char *skip_bom(const char *buf, size_t *size) {
        if (*size >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) {
                *size -= 3;
                return buf + 3;
        }
        return buf;
}

CoverageFormat coverage_detect(const char *buf, size_t size) {
        size_t i = 0;

        buf = skip_bom(buf, &size);
        while (i < size && isspace((unsigned char) buf[i]))
                i++;
        return i < size && buf[i] == '<' ? COVERAGE_FORMAT_COBERTURA : COVERAGE_FORMAT_LCOV;
}

/* A decimal number of at most 18 digits from s[0..n), all of it (so at
 * most COVERAGE_LINES_MAX). */
static int parse_u64_n(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;

        if (n == 0 || n > 18)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!isdigit((unsigned char) s[i]))
                        return -EINVAL;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

static int set_result(Coverage *ret, uint64_t valid, uint64_t covered) {
        if (valid == 0)
                return -ENODATA;
        *ret = (Coverage) {
                .lines_valid = valid,
                .lines_covered = covered,
                .percent = 100.0 * (double) covered / (double) valid,
        };
        return 0;
}

/* ---- lcov ---- */

typedef struct DaLine {
        uint64_t line;
        bool hit;
} DaLine;

static int da_compare(const void *a, const void *b) {
        const DaLine *x = a, *y = b;
        return x->line < y->line ? -1 : x->line > y->line ? 1 : 0;
}

typedef struct Record {
        bool has_lf, has_lh, any;
        uint64_t lf, lh;
        DaLine *da;
        size_t n_da, allocated;
} Record;

/* Ends a record: its totals, or its DA lines counted, go to the sums.
 * -ERANGE when they would pass COVERAGE_LINES_MAX: a report that claims
 * more is nonsense, and the sums must not wrap around. */
static int record_end(Record *r, uint64_t *valid, uint64_t *covered) {
        int ret = 0;

        if (r->has_lf) {
                uint64_t lh = r->has_lh ? r->lh : 0;
                if (r->lf > COVERAGE_LINES_MAX - *valid || lh > COVERAGE_LINES_MAX - *covered)
                        ret = -ERANGE;
                else {
                        *valid += r->lf;
                        *covered += lh;
                }
        } else if (r->n_da > 0) {
                qsort(r->da, r->n_da, sizeof(DaLine), da_compare);
                for (size_t i = 0; i < r->n_da;) {
                        size_t j = i;
                        bool hit = false;
                        for (; j < r->n_da && r->da[j].line == r->da[i].line; j++)
                                hit = hit || r->da[j].hit;
                        if (*valid >= COVERAGE_LINES_MAX) {
                                ret = -ERANGE;
                                break;
                        }
                        (*valid)++;
                        *covered += hit;
                        i = j;
                }
        }
        r->has_lf = r->has_lh = r->any = false;
        r->lf = r->lh = 0;
        r->n_da = 0;
        return ret;
}

int coverage_parse_lcov(const char *buf, size_t size, Coverage *ret, char **ret_error) {
        Record rec = {};
        uint64_t valid = 0, covered = 0;
        unsigned line = 0;
        const char *end;
        int r = 0;

        assert(buf || size == 0);
        assert(ret);

        if (size > COVERAGE_REPORT_MAX)
                return error_set(ret_error, -EFBIG, "The report is larger than %u bytes.", COVERAGE_REPORT_MAX);
        buf = skip_bom(buf, &size);
        end = buf + size;
        for (const char *s = buf; s < end && r >= 0;) {
                const char *nl = memchr(s, '\n', (size_t) (end - s)), *e = nl ?: end, *colon;
                uint64_t a = 0, b = 0;

                line++;
                if (e > s && e[-1] == '\r')
                        e--;
                if (memchr(s, '\0', (size_t) (e - s)))
                        r = error_set(ret_error, -EBADMSG, "line %u: a NUL byte.", line);
                else if (e == s || (e - s == 13 && strneq(s, "end_of_record", 13))) {
                        if (record_end(&rec, &valid, &covered) < 0)
                                r = error_set(ret_error, -EBADMSG, "line %u: more than %" PRIu64 " lines in all.", line,
                                              (uint64_t) COVERAGE_LINES_MAX);
                }
                else if (!(colon = memchr(s, ':', (size_t) (e - s))) || colon == s)
                        r = error_set(ret_error, -EBADMSG, "line %u: not an lcov line (KEY:VALUE).", line);
                else if (colon - s == 2 && strneq(s, "LF", 2)) {
                        if (parse_u64_n(colon + 1, (size_t) (e - colon - 1), &a) < 0)
                                r = error_set(ret_error, -EBADMSG, "line %u: LF is not a number.", line);
                        rec.lf = a;
                        rec.has_lf = rec.any = true;
                } else if (colon - s == 2 && strneq(s, "LH", 2)) {
                        if (parse_u64_n(colon + 1, (size_t) (e - colon - 1), &a) < 0)
                                r = error_set(ret_error, -EBADMSG, "line %u: LH is not a number.", line);
                        rec.lh = a;
                        rec.has_lh = rec.any = true;
                } else if (colon - s == 2 && strneq(s, "DA", 2)) {
                        /* DA:LINE,HITS[,CHECKSUM]; hits may be negative in some gcov versions (-1: not executable). */
                        const char *p = colon + 1, *comma = memchr(p, ',', (size_t) (e - p)), *h, *he;
                        if (!comma || parse_u64_n(p, (size_t) (comma - p), &a) < 0)
                                r = error_set(ret_error, -EBADMSG, "line %u: DA without a line number.", line);
                        else {
                                h = comma + 1;
                                he = memchr(h, ',', (size_t) (e - h)) ?: e;
                                bool negative = h < he && *h == '-';
                                if (parse_u64_n(h + negative, (size_t) (he - h - negative), &b) < 0)
                                        r = error_set(ret_error, -EBADMSG, "line %u: DA without a hit count.", line);
                                else if (!negative) {
                                        if (rec.n_da >= rec.allocated) {
                                                size_t k = MAX(rec.allocated * 2, (size_t) 64);
                                                DaLine *t = realloc(rec.da, k * sizeof(DaLine));
                                                if (!t)
                                                        r = -ENOMEM;
                                                else {
                                                        rec.da = t;
                                                        rec.allocated = k;
                                                }
                                        }
                                        if (r >= 0)
                                                rec.da[rec.n_da++] = (DaLine) { .line = a, .hit = b > 0 };
                                        rec.any = true;
                                }
                        }
                }
                /* Other keys (TN, SF, FN, FNDA, FNF, FNH, BRDA, BRF, BRH, VER) say nothing about lines. */
                if (r >= 0 && rec.has_lf && rec.has_lh && rec.lh > rec.lf)
                        r = error_set(ret_error, -EBADMSG, "line %u: LH is larger than LF.", line);
                s = nl ? nl + 1 : end;
        }
        if (r >= 0 && record_end(&rec, &valid, &covered) < 0)
                r = error_set(ret_error, -EBADMSG, "More than %" PRIu64 " lines in all.", (uint64_t) COVERAGE_LINES_MAX);
        free(rec.da);
        if (r < 0)
                return r;
        if (covered > valid)
                return error_set(ret_error, -EBADMSG, "More lines hit than found.");
        r = set_result(ret, valid, covered);
        if (r < 0)
                return error_set(ret_error, r, "The report has no line data (no LF: or DA: lines).");
        return 0;
}

/* ---- Cobertura ---- */

typedef struct Xml {
        const char *p, *end;
        char *stack[COVERAGE_XML_DEPTH_MAX];
        size_t depth;
        size_t in_method;               /* depth at which a <method> opened; 0: none */
        bool root_seen;
        bool have_valid, have_covered, have_rate;
        uint64_t valid, covered, lines, hit;
        double rate;
        char **ret_error;
} Xml;

static bool xml_skip_past(Xml *x, const char *token) {
        const char *f = memmem(x->p, (size_t) (x->end - x->p), token, strlen(token));
        if (!f)
                return false;
        x->p = f + strlen(token);
        return true;
}

static bool is_name_char(char c) {
        return isalnum((unsigned char) c) || c == '_' || c == '-' || c == '.' || c == ':' || (unsigned char) c >= 0x80;
}

static int xml_attribute(Xml *x, const char *element, const char *name, size_t name_len, const char *v, size_t vn) {
        uint64_t u;

        if (x->depth == 1 && streq(element, "coverage")) {
                if (name_len == 11 && strneq(name, "lines-valid", 11) && parse_u64_n(v, vn, &u) >= 0) {
                        x->valid = u;
                        x->have_valid = true;
                } else if (name_len == 13 && strneq(name, "lines-covered", 13) && parse_u64_n(v, vn, &u) >= 0) {
                        x->covered = u;
                        x->have_covered = true;
                } else if (name_len == 9 && strneq(name, "line-rate", 9) && vn > 0 && vn < 32) {
                        char tmp[32], *e;
                        double d;
                        memcpy(tmp, v, vn);
                        tmp[vn] = '\0';
                        d = strtod(tmp, &e);
                        if (*e == '\0' && isfinite(d) && d >= 0 && d <= 1) {
                                x->rate = d;
                                x->have_rate = true;
                        }
                }
        } else if (streq(element, "line") && x->in_method == 0 && name_len == 4 && strneq(name, "hits", 4)) {
                if (parse_u64_n(v, vn, &u) < 0)
                        return error_set(x->ret_error, -EBADMSG, "A <line> with hits=\"%.*s\", not a number.", (int) MIN(vn, (size_t) 32), v);
                x->lines++;
                x->hit += u > 0;
        }
        return 0;
}

static int xml_element(Xml *x) {
        const char *name = x->p;
        char *copy;
        size_t n;
        int r;

        while (x->p < x->end && is_name_char(*x->p))
                x->p++;
        n = (size_t) (x->p - name);
        if (n == 0 || n > 256)
                return error_set(x->ret_error, -EBADMSG, "An element without a name.");
        if (x->depth >= COVERAGE_XML_DEPTH_MAX)
                return error_set(x->ret_error, -EBADMSG, "Elements nested deeper than %u.", COVERAGE_XML_DEPTH_MAX);
        if (x->depth == 0 && x->root_seen)
                return error_set(x->ret_error, -EBADMSG, "A second root element.");
        copy = strndup(name, n);
        if (!copy)
                return -ENOMEM;
        x->stack[x->depth++] = copy;
        x->root_seen = true;
        if (x->depth == 1 && !streq(copy, "coverage"))
                return error_set(x->ret_error, -EBADMSG, "The root element is <%s>, not <coverage>.", copy);
        if (streq(copy, "method") && x->in_method == 0)
                x->in_method = x->depth;

        for (;;) {
                const char *an, *v;
                size_t anl;
                char q;

                while (x->p < x->end && isspace((unsigned char) *x->p))
                        x->p++;
                if (x->p >= x->end)
                        return error_set(x->ret_error, -EBADMSG, "The report ends inside <%s>.", copy);
                if (*x->p == '>') {
                        x->p++;
                        return 0;
                }
                if (*x->p == '/' && x->p + 1 < x->end && x->p[1] == '>') {
                        x->p += 2;
                        if (x->in_method == x->depth)
                                x->in_method = 0;
                        free(x->stack[--x->depth]);
                        return 0;
                }
                an = x->p;
                while (x->p < x->end && is_name_char(*x->p))
                        x->p++;
                anl = (size_t) (x->p - an);
                while (x->p < x->end && isspace((unsigned char) *x->p))
                        x->p++;
                if (anl == 0 || x->p >= x->end || *x->p != '=')
                        return error_set(x->ret_error, -EBADMSG, "A malformed attribute in <%s>.", copy);
                x->p++;
                while (x->p < x->end && isspace((unsigned char) *x->p))
                        x->p++;
                if (x->p >= x->end || (*x->p != '"' && *x->p != '\''))
                        return error_set(x->ret_error, -EBADMSG, "An unquoted attribute value in <%s>.", copy);
                q = *x->p++;
                v = x->p;
                x->p = memchr(x->p, q, (size_t) (x->end - x->p));
                if (!x->p)
                        return error_set(x->ret_error, -EBADMSG, "An unterminated attribute value in <%s>.", copy);
                r = xml_attribute(x, copy, an, anl, v, (size_t) (x->p - v));
                if (r < 0)
                        return r;
                x->p++;
        }
}

static int xml_end_element(Xml *x) {
        const char *name = x->p;
        size_t n;

        while (x->p < x->end && is_name_char(*x->p))
                x->p++;
        n = (size_t) (x->p - name);
        while (x->p < x->end && isspace((unsigned char) *x->p))
                x->p++;
        if (x->p >= x->end || *x->p != '>')
                return error_set(x->ret_error, -EBADMSG, "A malformed end tag.");
        x->p++;
        if (x->depth == 0 || strlen(x->stack[x->depth - 1]) != n || memcmp(x->stack[x->depth - 1], name, n) != 0)
                return error_set(x->ret_error, -EBADMSG, "An end tag </%.*s> that closes nothing open.", (int) MIN(n, (size_t) 64), name);
        if (x->in_method == x->depth)
                x->in_method = 0;
        free(x->stack[--x->depth]);
        return 0;
}

int coverage_parse_cobertura(const char *buf, size_t size, Coverage *ret, char **ret_error) {
        Xml x = { .ret_error = ret_error };
        int r = 0;

        assert(buf || size == 0);
        assert(ret);

        if (size > COVERAGE_REPORT_MAX)
                return error_set(ret_error, -EFBIG, "The report is larger than %u bytes.", COVERAGE_REPORT_MAX);
        buf = skip_bom(buf, &size);
        if (memchr(buf, '\0', size))
                return error_set(ret_error, -EBADMSG, "The report holds a NUL byte.");
        x.p = buf;
        x.end = buf + size;

        while (r >= 0) {
                x.p = memchr(x.p, '<', (size_t) (x.end - x.p));
                if (!x.p)
                        break;
                x.p++;
                if (x.p >= x.end)
                        r = error_set(ret_error, -EBADMSG, "The report ends with '<'.");
                else if (*x.p == '?') {
                        if (!xml_skip_past(&x, "?>"))
                                r = error_set(ret_error, -EBADMSG, "An unterminated processing instruction.");
                } else if ((size_t) (x.end - x.p) >= 3 && strneq(x.p, "!--", 3)) {
                        if (!xml_skip_past(&x, "-->"))
                                r = error_set(ret_error, -EBADMSG, "An unterminated comment.");
                } else if ((size_t) (x.end - x.p) >= 8 && strneq(x.p, "![CDATA[", 8)) {
                        if (!xml_skip_past(&x, "]]>"))
                                r = error_set(ret_error, -EBADMSG, "An unterminated CDATA section.");
                } else if (*x.p == '!') {
                        /* <!DOCTYPE ...> with an optional [internal subset]: skipped
                         * whole; SECURITY: no entity it declares is ever expanded. */
                        unsigned brackets = 0;
                        for (; x.p < x.end; x.p++) {
                                if (*x.p == '[')
                                        brackets++;
                                else if (*x.p == ']' && brackets > 0)
                                        brackets--;
                                else if (*x.p == '>' && brackets == 0)
                                        break;
                        }
                        if (x.p >= x.end)
                                r = error_set(ret_error, -EBADMSG, "An unterminated declaration.");
                        else
                                x.p++;
                } else if (*x.p == '/') {
                        x.p++;
                        r = xml_end_element(&x);
                } else
                        r = xml_element(&x);
        }
        if (r >= 0 && x.depth > 0)
                r = error_set(ret_error, -EBADMSG, "The report ends with <%s> open.", x.stack[x.depth - 1]);
        if (r >= 0 && !x.root_seen)
                r = error_set(ret_error, -EBADMSG, "No <coverage> element.");
        while (x.depth > 0)
                free(x.stack[--x.depth]);
        if (r < 0)
                return r;

        if (x.have_valid && x.have_covered && x.valid > 0) {
                if (x.covered > x.valid)
                        return error_set(ret_error, -EBADMSG, "lines-covered is larger than lines-valid.");
                return set_result(ret, x.valid, x.covered);
        }
        if (x.have_rate) {
                *ret = (Coverage) { .percent = 100.0 * x.rate };
                return 0;
        }
        r = set_result(ret, x.lines, x.hit);
        if (r < 0)
                return error_set(ret_error, r, "The report has no line data (no lines-valid, line-rate or <line hits=...>).");
        return 0;
}

int coverage_parse(const char *buf, size_t size, Coverage *ret, char **ret_error) {
        if (coverage_detect(buf, size) == COVERAGE_FORMAT_COBERTURA)
                return coverage_parse_cobertura(buf, size, ret, ret_error);
        return coverage_parse_lcov(buf, size, ret, ret_error);
}

int coverage_compare(const Coverage *base, const Coverage *final, double tolerance, const char *report, FindingList *out) {
        int r;

        assert(base);
        assert(final);
        assert(out);

        if (!(tolerance >= 0))
                tolerance = 0;
        if (final->percent < base->percent - tolerance) {
                r = finding_list_add(out, FINDING_COVERAGE, FINDING_ERROR, report, 0, "coverage-dropped",
                                     "Line coverage dropped from %.2f%% to %.2f%% (%.2f points; tolerance %.2f).",
                                     base->percent, final->percent, base->percent - final->percent, tolerance);
                return r < 0 ? r : 1;
        }
        r = finding_list_add(out, FINDING_COVERAGE, FINDING_NOTE, report, 0, NULL,
                             "Line coverage %.2f%% (base %.2f%%).", final->percent, base->percent);
        return r < 0 ? r : 0;
}
