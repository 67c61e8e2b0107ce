/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "dependencies.h"
#include "string-util.h"
#include "tap.h"
#include "toml-walk.h"
#include "version.h"

static int cmp(Ecosystem e, const char *a, const char *b) {
        int c = 99;
        if (version_compare(e, a, b, &c) < 0)
                return 99;
        return c;
}

static void test_semver(void) {
        /* Semantic Versioning 2.0's own examples of precedence. */
        const char *order[] = { "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
                                "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0" };
        bool ok = true;
        for (size_t i = 0; i + 1 < ELEMENTSOF(order); i++)
                ok = ok && cmp(ECOSYSTEM_NPM, order[i], order[i + 1]) == -1 && cmp(ECOSYSTEM_NPM, order[i + 1], order[i]) == 1;
        CHECK(ok, "semver precedence of the specification's examples");
        CHECK(cmp(ECOSYSTEM_NPM, "1.2", "1.2.0") == 0 && cmp(ECOSYSTEM_NPM, "v1.2.3", "1.2.3") == 0 &&
              cmp(ECOSYSTEM_NPM, "1.2.3+build.5", "1.2.3") == 0, "missing parts, v, build metadata");
        CHECK(cmp(ECOSYSTEM_GO, "v0.0.0-20191109021931-daa7c04131f5", "0.0.0") == -1 &&
              cmp(ECOSYSTEM_GO, "v2.0.0+incompatible", "2.0.0") == 0, "Go pseudo-versions and +incompatible");
        CHECK(cmp(ECOSYSTEM_CRATES_IO, "99999999999999999999.0.0", "1.0.0") == 99 && cmp(ECOSYSTEM_NPM, "1.x", "1.0") == 99 &&
              cmp(ECOSYSTEM_NPM, "", "1") == 99 && cmp(ECOSYSTEM_NPM, "1.2.3-", "1") == 99, "not versions");
}

static void test_pep440(void) {
        /* PEP 440's own ordering example. */
        const char *order[] = { "1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12", "1.0b1.dev456", "1.0b2",
                                "1.0b2.post345.dev456", "1.0b2.post345", "1.0rc1.dev456", "1.0rc1", "1.0", "1.0+abc.5",
                                "1.0.post456.dev34", "1.0.post456", "1.1.dev1" };
        bool ok = true;
        for (size_t i = 0; i + 1 < ELEMENTSOF(order); i++) {
                int c = cmp(ECOSYSTEM_PYPI, order[i], order[i + 1]);
                /* 1.0 and 1.0+abc.5 are equal here (local labels ignored). */
                if (!(c == -1 || (c == 0 && streq(order[i + 1], "1.0+abc.5")))) {
                        ok = false;
                        printf("# %s vs %s: %d\n", order[i], order[i + 1], c);
                }
        }
        CHECK(ok, "PEP 440's ordering example");
        CHECK(cmp(ECOSYSTEM_PYPI, "1.0", "1.0.0") == 0 && cmp(ECOSYSTEM_PYPI, "1.0RC1", "1.0rc1") == 0 &&
              cmp(ECOSYSTEM_PYPI, "1.0-1", "1.0.post1") == 0 && cmp(ECOSYSTEM_PYPI, "1!0.1", "2.0") == 1 &&
              cmp(ECOSYSTEM_PYPI, "2.0.0a", "2.0.0a0") == 0 && cmp(ECOSYSTEM_PYPI, "v1.0", "1.0") == 0, "normal forms");
        CHECK(cmp(ECOSYSTEM_PYPI, "1.0-foo", "1.0") == 99 && cmp(ECOSYSTEM_PYPI, "latest", "1.0") == 99, "legacy versions refused");
}

static int count_cb(const TomlValue *v, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static void test_toml(void) {
        const char *ok = "a = \"\"\"x\ny\"\"\" # c\nb = '''lit'''\n[t.'q.k'.\"r\"]\nc = [1, [2, 3], {d = 'e', f.g = \"\\u00e9\"},]\n"
                         "[[arr]]\nh = 2021-01-01T00:00:00Z\n";
        unsigned n = 0;
        _cleanup_free_ char *error = NULL;

        CHECK(toml_walk(ok, strlen(ok), count_cb, &n, &error) == 0 && n == 8, "TOML subset: %u values", n);
        CHECK(toml_walk("a = \"unterminated\n", 18, count_cb, &n, &error) == -EBADMSG && strstr(error, "line 1"),
              "unterminated string: %s", error);
        CHECK_ERRNO(toml_walk("[a\nb = 1\n", 9, count_cb, &n, &error), -EBADMSG, "unterminated header");
        CHECK_ERRNO(toml_walk("a = 1 b = 2\n", 12, count_cb, &n, &error), -EBADMSG, "two values on a line");
        char deep[200];
        memset(deep, '[', sizeof(deep));
        memcpy(deep, "a = ", 4);
        CHECK_ERRNO(toml_walk(deep, sizeof(deep), count_cb, &n, &error), -EBADMSG, "nesting bounded: %s", error);
}

static const DependencyChange *find(const DependencyChanges *c, const char *name) {
        for (size_t i = 0; i < c->n; i++)
                if (streq(c->changes[i].name, name))
                        return &c->changes[i];
        return NULL;
}

static size_t len(const char *s) {
        return s ? strlen(s) : 0;
}

#define DIFF(path, old, new) dependencies_diff(path, old, len(old), new, strlen(new), &c, &error)

static void test_npm(void) {
        DependencyChanges c = {};
        _cleanup_free_ char *error = NULL;
        const DependencyChange *d;

        CHECK_INT_EQ(DIFF("web/package.json",
                          "{\"dependencies\":{\"lodash\":\"^4.17.20\",\"react\":\"18.2.0\"}}",
                          "{\"name\":\"x\",\"dependencies\":{\"lodash\":\"^4.17.21\",\"react\":\"18.2.0\",\"left-pad\":\"1.3.0\"},"
                          "\"devDependencies\":{\"jest\":\"~29.1\",\"local\":\"file:../local\"}}"), 0, "package.json");
        CHECK_INT_EQ(c.n, 4, "4 changes: %zu", c.n);
        d = find(&c, "lodash");
        CHECK(d && streq(d->old_version, "^4.17.20") && streq(d->new_version, "^4.17.21") && streq(d->check_version, "4.17.21") &&
              d->ecosystem == ECOSYSTEM_NPM && streq(d->manifest, "web/package.json"), "changed, range's lower bound checked");
        d = find(&c, "left-pad");
        CHECK(d && !d->old_version && streq(d->check_version, "1.3.0"), "added, exact");
        d = find(&c, "jest");
        CHECK(d && streq(d->check_version, "29.1"), "~29.1");
        d = find(&c, "local");
        CHECK(d && !d->check_version, "file: has no version to check");
        dependency_changes_done(&c);

        CHECK(DIFF("package-lock.json",
                   "{\"lockfileVersion\":3,\"packages\":{\"\":{\"name\":\"x\"},\"node_modules/minimist\":{\"version\":\"1.2.5\"}}}",
                   "{\"lockfileVersion\":3,\"packages\":{\"\":{\"name\":\"x\"},\"node_modules/minimist\":{\"version\":\"1.2.6\"},"
                   "\"node_modules/a/node_modules/@scope/b\":{\"version\":\"2.0.0\"},\"node_modules/c\":{\"link\":true}}}") == 0 &&
              c.n == 2, "lock v3: %zu", c.n);
        d = find(&c, "@scope/b");
        CHECK(d && streq(d->check_version, "2.0.0") && find(&c, "minimist") && streq(find(&c, "minimist")->old_version, "1.2.5"),
              "nested scoped package, changed version");
        dependency_changes_done(&c);

        CHECK(DIFF("npm-shrinkwrap.json", NULL,
                   "{\"lockfileVersion\":1,\"dependencies\":{\"a\":{\"version\":\"1.0.0\",\"dependencies\":{\"b\":{\"version\":\"0.1.0\"}}}}}") == 0 &&
              c.n == 2 && find(&c, "b"), "lock v1, nested");
        dependency_changes_done(&c);

        CHECK(DIFF("package.json", NULL, "{\"dependencies\":") == -EBADMSG && error, "malformed JSON: %s", error);
        CHECK_ERRNO(DIFF("package.json", NULL, "[]"), -EBADMSG, "not an object");
}

static void test_python(void) {
        DependencyChanges c = {};
        _cleanup_free_ char *error = NULL;
        const DependencyChange *d;

        CHECK_INT_EQ(DIFF("requirements-dev.txt",
                          "Django==3.2.0\nrequests>=2.0\n",
                          "# comment\nDjango==3.2.1 # pinned\nrequests>=2.0\nFlask_Login[extra] >=0.6, <1 ; python_version>'3'\n"
                          "-r other.txt\n-e git+https://x/y#egg=z\n./local\nhttps://x/y.whl\nurllib3==1.26.4 --hash=sha256:abc\n"
                          "pkg @ https://example.com/pkg.whl\nnumpy\n"), 0, "requirements");
        CHECK_INT_EQ(c.n, 5, "5 changes: %zu", c.n);
        d = find(&c, "django");
        CHECK(d && streq(d->old_version, "==3.2.0") && streq(d->check_version, "3.2.1"), "names normalised, == pinned");
        d = find(&c, "flask-login");
        CHECK(d && streq(d->new_version, ">=0.6, <1") && streq(d->check_version, "0.6"), "extras and markers skipped");
        d = find(&c, "urllib3");
        CHECK(d && streq(d->check_version, "1.26.4"), "--hash options skipped");
        CHECK(find(&c, "pkg") && !find(&c, "pkg")->check_version && find(&c, "numpy") && !find(&c, "numpy")->new_version,
              "direct references and bare names");
        dependency_changes_done(&c);

        CHECK_INT_EQ(DIFF("pyproject.toml",
                          "[project]\nname = \"x\"\ndependencies = [\"httpx>=0.23\"]\n",
                          "[project]\nname = \"x\"\ndependencies = [\n  \"httpx>=0.24\",  # newer\n  'pyyaml==5.3.1',\n]\n"
                          "[project.optional-dependencies]\ntest = [\"pytest~=7.0\"]\n"
                          "[tool.poetry.dependencies]\npython = \"^3.8\"\naiohttp = \"^3.8.1\"\njinja2 = { version = \"2.11.2\", optional = true }\n"
                          "[tool.poetry.group.dev.dependencies]\nblack = \"22.3.0\"\n"), 0, "pyproject.toml: %s", strempty(error));
        CHECK(c.n == 6 && !find(&c, "python"), "6 changes, python not one: %zu", c.n);
        CHECK(find(&c, "httpx") && streq(find(&c, "httpx")->old_version, ">=0.23") &&
              find(&c, "pyyaml") && streq(find(&c, "pyyaml")->check_version, "5.3.1") &&
              find(&c, "pytest") && streq(find(&c, "pytest")->check_version, "7.0") &&
              find(&c, "aiohttp") && streq(find(&c, "aiohttp")->check_version, "3.8.1") &&
              find(&c, "jinja2") && streq(find(&c, "jinja2")->check_version, "2.11.2") &&
              find(&c, "black") && streq(find(&c, "black")->check_version, "22.3.0"), "PEP 621 and poetry");
        dependency_changes_done(&c);
}

static void test_go_cargo(void) {
        DependencyChanges c = {};
        _cleanup_free_ char *error = NULL;
        const DependencyChange *d;

        CHECK(DIFF("go.mod",
                   "module x\n\ngo 1.21\n\nrequire golang.org/x/net v0.7.0\n",
                   "module x\n\ngo 1.21\n\nrequire (\n\tgolang.org/x/net v0.17.0\n\tgithub.com/a/b v1.2.3 // indirect\n)\n"
                   "replace github.com/a/b => ../b\n") == 0 && c.n == 2, "go.mod: %zu", c.n);
        d = find(&c, "golang.org/x/net");
        CHECK(d && streq(d->old_version, "v0.7.0") && streq(d->check_version, "0.17.0") && d->ecosystem == ECOSYSTEM_GO,
              "Go versions without v for OSV");
        dependency_changes_done(&c);
        CHECK_ERRNO(DIFF("go.mod", NULL, "require (\n a v1\n"), -EBADMSG, "unclosed block: %s", strempty(error));

        CHECK_INT_EQ(DIFF("Cargo.toml",
                          "[package]\nname = \"x\"\n[dependencies]\nserde = \"1.0\"\n",
                          "[package]\nname = \"x\"\nversion = \"0.1.0\"\n[dependencies]\nserde = { version = \"1.0.188\", features = [\"derive\"] }\n"
                          "tokio.version = \"=1.28.0\"\nlocal = { path = \"../local\" }\n[dev-dependencies.smallvec]\nversion = \"0.6.9\"\n"
                          "[target.'cfg(unix)'.dependencies]\nnix = \"0.26\"\n"), 0, "Cargo.toml: %s", strempty(error));
        CHECK_INT_EQ(c.n, 5, "5 changes: %zu", c.n);
        CHECK(find(&c, "serde") && streq(find(&c, "serde")->check_version, "1.0.188") &&
              find(&c, "tokio") && streq(find(&c, "tokio")->check_version, "1.28.0") &&
              find(&c, "local") && !find(&c, "local")->new_version &&
              find(&c, "smallvec") && streq(find(&c, "smallvec")->check_version, "0.6.9") &&
              find(&c, "nix") && streq(find(&c, "nix")->check_version, "0.26"), "inline tables, dotted keys, [dependencies.x], targets");
        dependency_changes_done(&c);

        CHECK(DIFF("Cargo.lock",
                   "version = 3\n[[package]]\nname = \"smallvec\"\nversion = \"0.6.9\"\n",
                   "version = 3\n[[package]]\nname = \"smallvec\"\nversion = \"0.6.9\"\n\n[[package]]\nname = \"smallvec\"\nversion = \"1.11.0\"\n"
                   "source = \"registry+https://github.com/rust-lang/crates.io-index\"\n[[package]]\nversion = \"0.2.0\"\nname = \"libc\"\n") == 0 &&
              c.n == 2, "Cargo.lock: %zu", c.n);
        CHECK(find(&c, "libc") && streq(find(&c, "libc")->check_version, "0.2.0"), "a package's keys in any order");
        dependency_changes_done(&c);
}

static void test_kinds(void) {
        CHECK(manifest_kind_from_path("a/b/requirements-test.txt") == MANIFEST_REQUIREMENTS &&
              manifest_kind_from_path("requirements/base.txt") == MANIFEST_REQUIREMENTS &&
              manifest_kind_from_path("x/Cargo.lock") == MANIFEST_CARGO_LOCK &&
              manifest_kind_from_path("README.md") == _MANIFEST_KIND_INVALID &&
              manifest_kind_from_path("package.json.bak") == _MANIFEST_KIND_INVALID, "manifests by name");
}

/* A key listed many times (a requirements or lock file) on both sides: the
 * old versions are found by bisection and listed a few, not all joined for
 * every new entry (20,000 x 20,000 such lines once took time cubic in the
 * count). */
static void test_many_versions(void) {
        _cleanup_free_ char *old = malloc(20000 * 16), *new = malloc(20000 * 16);
        DependencyChanges c = {};
        size_t o = 0, n = 0;

        for (unsigned i = 0; i < 20000; i++) {
                o += (size_t) sprintf(old + o, "a==1.%u\n", i);
                n += (size_t) sprintf(new + n, "a==2.%u\n", i);
        }
        CHECK(dependencies_diff("requirements.txt", old, o, new, n, &c, NULL) == 0 && c.n == 20000, "20,000 changes: %zu", c.n);
        CHECK(c.n > 0 && streq(c.changes[0].old_version, "==1.0, ==1.1, ==1.10, ==1.100, ==1.1000, ==1.10000, ==1.10001, ==1.10002 and 19992 more"),
              "the first old versions listed: %s", c.n > 0 ? c.changes[0].old_version : "");
        dependency_changes_done(&c);
        CHECK(dependencies_diff("requirements.txt", old, o, old, o, &c, NULL) == 0 && c.n == 0, "the same 20,000 lines: no change");
        dependency_changes_done(&c);
}

int main(void) {
        test_semver();
        test_pep440();
        test_toml();
        test_npm();
        test_python();
        test_go_cargo();
        test_kinds();
        test_many_versions();
        return tap_done();
}
