/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A dependency manifest before and after a change, as the review compares
 * them: the first byte picks the kind (package.json, package-lock.json,
 * requirements.txt, pyproject.toml, go.mod, Cargo.toml, Cargo.lock), then
 * the old text, a 0xff byte and the new text (no 0xff: a new manifest).
 * Invariants: every entry has a key and a name, PyPI names are normalised;
 * a version to check parses as a version of the ecosystem and equals
 * itself; a manifest compared with itself changes nothing; each change
 * names a dependency of the new text with its version, "added" exactly when
 * the old text has no entry of that key, at most one change per entry; the
 * findings survive JSON and markdown. */
#include "dependencies.h"
#include "fuzz-review.h"

static const char *const paths[_MANIFEST_KIND_MAX] = {
        [MANIFEST_PACKAGE_JSON] = "web/package.json",
        [MANIFEST_PACKAGE_LOCK] = "package-lock.json",
        [MANIFEST_REQUIREMENTS] = "requirements-dev.txt",
        [MANIFEST_PYPROJECT] = "pyproject.toml",
        [MANIFEST_GO_MOD] = "go.mod",
        [MANIFEST_CARGO_TOML] = "crates/x/Cargo.toml",
        [MANIFEST_CARGO_LOCK] = "Cargo.lock",
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_quiet();
        return 0;
}

FUZZ_UNINSTRUMENTED static bool has_key(const DependencyList *l, const char *key) {
        for (size_t i = 0; l && i < l->n; i++)
                if (streq(l->entries[i].key, key))
                        return true;
        return false;
}

/* An entry of the new text this change can stand for: same name and
 * version, and "added" exactly when the old text has nothing of its key. */
FUZZ_UNINSTRUMENTED static bool change_has_entry(const DependencyChange *c, const DependencyList *new, const DependencyList *old) {
        for (size_t i = 0; i < new->n; i++)
                if (streq(new->entries[i].name, c->name) && fuzz_streq_ptr(new->entries[i].version, c->new_version) &&
                    !c->old_version == !has_key(old, new->entries[i].key))
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(dependency_list_done) DependencyList old = {}, new = {};
        _cleanup_(dependency_changes_done) DependencyChanges same = {}, diff = {};
        _cleanup_free_ char *error = NULL;
        const char *text, *sep, *new_text, *old_text = NULL, *path;
        size_t new_size, old_size = 0;
        FindingList l = {};
        ManifestKind k;
        Ecosystem e;
        int r, r_old = -1;

        if (size < 1 || size > 256 * 1024)
                return 0;
        k = (ManifestKind) (data[0] % _MANIFEST_KIND_MAX);
        e = manifest_kind_ecosystem(k);
        path = paths[k];
        FUZZ_CHECK(manifest_kind_from_path(path) == k, "%s is not of kind %d", path, (int) k);
        text = (const char *) data + 1;
        sep = memchr(text, 0xff, size - 1);
        if (sep) {
                old_text = text;
                old_size = (size_t) (sep - text);
                new_text = sep + 1;
                new_size = size - 1 - old_size - 1;
        } else {
                new_text = text;
                new_size = size - 1;
        }

        r = manifest_parse(k, new_text, new_size, &new, &error);
        FUZZ_CHECK(r >= 0 || r == -EBADMSG || r == -E2BIG, "parse: %d", r);
        FUZZ_CHECK(r != -EBADMSG || error, "refused without a reason");
        if (r < 0)
                dependency_list_done(&new);
        for (size_t i = 0; i < new.n; i++) {
                const DependencyEntry *d = &new.entries[i];
                _cleanup_free_ char *cv = NULL;

                FUZZ_CHECK(d->key && d->name, "an entry without a key or a name");
                if (e == ECOSYSTEM_PYPI)
                        for (const char *c = d->name; *c; c++)
                                FUZZ_CHECK(!(*c >= 'A' && *c <= 'Z') && *c != '_' && *c != '.' && !(c[0] == '-' && c[1] == '-'),
                                           "PyPI name '%s' not normalised", d->name);
                if (!d->version)
                        continue;
                cv = dependency_check_version(e, k, d->version);
                if (cv) {
                        int c = 1;
                        FUZZ_CHECK(version_is_valid(e, cv), "check version '%s' (of '%s') is no version", cv, d->version);
                        FUZZ_CHECK(version_compare(e, cv, cv, &c) >= 0 && c == 0, "'%s' != itself", cv);
                }
        }

        /* A manifest compared with itself. */
        if (r >= 0) {
                FUZZ_CHECK(dependencies_diff(path, new_text, new_size, new_text, new_size, &same, NULL) >= 0, "diff with itself failed");
                FUZZ_CHECK(same.n == 0, "a manifest compared with itself changes %s", same.changes[0].name);
        }

        if (old_text) {
                r_old = manifest_parse(k, old_text, old_size, &old, NULL);
                if (r_old < 0)
                        dependency_list_done(&old);
        }
        error = mfree_ptr(error);
        r = dependencies_diff(path, old_text, old_size, new_text, new_size, &diff, &error);
        if (r < 0) {
                FUZZ_CHECK(r != -EBADMSG || error, "diff refused without a reason");
                return 0;
        }
        FUZZ_CHECK(!old_text || r_old >= 0, "diff accepts an old text that does not parse (%d)", r_old);
        FUZZ_CHECK(diff.n <= new.n, "%zu changes from %zu entries", diff.n, new.n);
        for (size_t i = 0; i < diff.n; i++) {
                const DependencyChange *c = &diff.changes[i];

                FUZZ_CHECK(c->ecosystem == e && fuzz_streq_ptr(c->manifest, path), "change of %s in %s", c->name, c->manifest);
                FUZZ_CHECK(change_has_entry(c, &new, old_text ? &old : NULL), "change of %s from '%s' to '%s' stands for no entry",
                           c->name, fuzz_strna(c->old_version), fuzz_strna(c->new_version));
                if (c->check_version)
                        FUZZ_CHECK(version_is_valid(e, c->check_version), "check version '%s'", c->check_version);
        }
        FUZZ_CHECK(dependency_changes_to_findings(&diff, &l) >= 0, "findings");
        FUZZ_CHECK(l.n + l.n_dropped == diff.n, "%zu findings of %zu changes", l.n, diff.n);
        fuzz_check_findings(&l);
        finding_list_done(&l);
        return 0;
}
