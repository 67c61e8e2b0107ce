/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>

/* Package ecosystems the dependency check knows, named as osv.dev names
 * them (and as the directories of its per-ecosystem export are named). */
typedef enum Ecosystem {
        ECOSYSTEM_NPM,          /* "npm" */
        ECOSYSTEM_PYPI,         /* "PyPI" */
        ECOSYSTEM_GO,           /* "Go" */
        ECOSYSTEM_CRATES_IO,    /* "crates.io" */
        _ECOSYSTEM_MAX,
        _ECOSYSTEM_INVALID = -EINVAL,
} Ecosystem;

const char *ecosystem_to_string(Ecosystem e);
Ecosystem ecosystem_from_string(const char *s);

/* Compares two versions of an ecosystem: *ret < 0, 0 or > 0. -EINVAL when
 * either is not a version of the forms below; -ERANGE for a number of more
 * than 19 digits.
 *
 * npm, crates.io and Go: Semantic Versioning 2.0 — MAJOR[.MINOR[.PATCH]]
 * (missing parts are 0, a fourth part is allowed), an optional leading 'v'
 * or '=', "-PRERELEASE" (identifiers compared numerically when all digits,
 * else in ASCII order, numeric before alphanumeric; a prerelease sorts
 * before its release), "+BUILD" ignored. Go's pseudo-versions
 * (v0.0.0-20191109021931-daa7c04131f5) and "+incompatible" are semver
 * forms and compare as such.
 *
 * PyPI: PEP 440 public versions, normalised as PEP 440 says — an epoch
 * "N!", the release N(.N)* (trailing zeros do not count: 1.0 == 1.0.0),
 * pre-releases (a, alpha, b, beta, c, rc, pre, preview, with or without
 * a separator and a number), post-releases (.postN, -N, rev, r), dev
 * releases (.devN), case-insensitive, an optional leading 'v'. A local
 * version label ("+ubuntu1") is ignored. Legacy (non-PEP 440) versions are
 * -EINVAL: the caller treats them as unknown. */
int version_compare(Ecosystem e, const char *a, const char *b, int *ret);

/* True when s parses as a version of the ecosystem. */
int version_is_valid(Ecosystem e, const char *s);
