/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stddef.h>

#include "finding.h"
#include "version.h"

/* What a change does to dependency manifests: which dependencies it adds
 * and which versions it changes, given a manifest's text before and after.
 * No I/O. Removed dependencies are not listed (they add no code).
 *
 * Manifests known (by file name, in any directory):
 *  - package.json: dependencies, devDependencies, optionalDependencies,
 *    peerDependencies (npm);
 *  - package-lock.json, npm-shrinkwrap.json: "packages" (lockfile v2, v3)
 *    or else "dependencies" (v1, nested), one entry per installed path;
 *  - requirements*.txt, requirements/ *.txt, constraints*.txt: PEP 508 lines;
 *    options (-r, -e, --hash), URLs and paths are skipped (PyPI);
 *  - pyproject.toml: [project] dependencies and optional-dependencies,
 *    [tool.poetry] dependencies, dev-dependencies and group.*.dependencies
 *    (but "python") (PyPI);
 *  - go.mod: require lines and blocks (replace and exclude are not read) (Go);
 *  - Cargo.toml: [dependencies], [dev-dependencies], [build-dependencies],
 *    also under [target.*] and [workspace], as strings or tables (crates.io);
 *  - Cargo.lock: every [[package]] (crates.io).
 * PyPI names are normalised as PEP 503 says (lower case, runs of "-_."
 * as "-"), so "Flask_Login" and "flask-login" are one package. */

typedef enum ManifestKind {
        MANIFEST_PACKAGE_JSON,
        MANIFEST_PACKAGE_LOCK,
        MANIFEST_REQUIREMENTS,
        MANIFEST_PYPROJECT,
        MANIFEST_GO_MOD,
        MANIFEST_CARGO_TOML,
        MANIFEST_CARGO_LOCK,
        _MANIFEST_KIND_MAX,
        _MANIFEST_KIND_INVALID = -EINVAL,
} ManifestKind;

#define MANIFEST_SIZE_MAX (64U * 1024U * 1024U)
#define MANIFEST_ENTRIES_MAX 100000U

/* The kind of manifest a workspace path names, or _MANIFEST_KIND_INVALID. */
ManifestKind manifest_kind_from_path(const char *path);
Ecosystem manifest_kind_ecosystem(ManifestKind k);

typedef struct DependencyEntry {
        char *key;              /* what identifies it within the manifest (the name; a lock file's install path) */
        char *name;
        char *version;          /* as written ("^1.2", ">=2,<3", "1.2.3"); NULL: none (a path, a URL, a git source) */
} DependencyEntry;

typedef struct DependencyList {
        DependencyEntry *entries;
        size_t n, allocated;
} DependencyList;

void dependency_list_done(DependencyList *l);

/* Parses one manifest. -EBADMSG with *ret_error (when non-NULL) for text
 * that is not such a manifest; -EFBIG past MANIFEST_SIZE_MAX, -E2BIG past
 * MANIFEST_ENTRIES_MAX entries. */
int manifest_parse(ManifestKind k, const char *text, size_t size, DependencyList *ret, char **ret_error);

typedef struct DependencyChange {
        Ecosystem ecosystem;
        char *manifest;         /* the path */
        char *name;
        char *old_version;      /* NULL: added; several old versions are joined with ", " (the first
                                 * DEPENDENCY_OLD_VERSIONS_MAX, then " and N more") */
        char *new_version;      /* as written; NULL: none */
        char *check_version;    /* the concrete version the vulnerability check looks up; NULL: none */
} DependencyChange;

#define DEPENDENCY_OLD_VERSIONS_MAX 8U

typedef struct DependencyChanges {
        DependencyChange *changes;
        size_t n, allocated;
} DependencyChanges;

void dependency_changes_done(DependencyChanges *c);

/* The version a specification stands for, for a vulnerability look-up:
 * an exact version as it is; a range's lower bound ("^1.2.3", "~1.2",
 * ">=1.2", "~=1.2", "1.2.*", Cargo's bare "1.2") — the lowest version the
 * range admits, which leans towards false alarms over misses; NULL for
 * specifications without a lower bound ("*", "<2", "latest", URLs, tags).
 * Go's "v" is dropped, as osv.dev writes Go versions without it. */
char *dependency_check_version(Ecosystem e, ManifestKind k, const char *spec);

/* Appends what new_text adds or changes compared with old_text (NULL: the
 * manifest is new) to out. */
int dependencies_diff(const char *path, const char *old_text, size_t old_size, const char *new_text, size_t new_size,
                      DependencyChanges *out, char **ret_error);

/* One FINDING_DEPENDENCY note per change: "added NAME VERSION" or
 * "changed NAME OLD -> NEW". */
int dependency_changes_to_findings(const DependencyChanges *c, FindingList *out);
