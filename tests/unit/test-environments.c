/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "environments.h"
#include "fs-util.h"
#include "string-util.h"
#include "tap.h"

static int load(Environments *e, const char *text) {
        char dir[] = "/tmp/test-environments-XXXXXX", path[128];
        int r;

        if (!mkdtemp(dir))
                return -errno;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void) write_file_atomic(fd, "agentfab.conf", text, strlen(text), 0644);
        snprintf(path, sizeof(path), "%s/agentfab.conf", dir);
        *e = (Environments) {};
        r = environments_load(e, path, false);
        (void) rm_rf_at(AT_FDCWD, dir);
        return r;
}

static void test_parse(void) {
        Environments e;

        /* Without any section there is exactly the host's system, no network:
         * today's behaviour is the default. */
        CHECK(load(&e, "[Daemon]\nMaxTasks=3\n") >= 0 && e.n == 1, "one environment without configuration");
        CHECK(streq(e.list[0].name, "default") && !e.list[0].image && e.list[0].network == NETWORK_OFF &&
              e.list[0].caches == 0, "it is the host's system without network");
        environments_done(&e);

        CHECK(load(&e, "[Environment]\nImage=/var/lib/machines/node20\nName=node20\nNetwork=allowlist\n"
                       "Allow=registry.npmjs.org *.pythonhosted.org:443 10.0.0.5 [fd00::1]:8080 192.168.0.0/16\n"
                       "Cache=npm pip\nCacheMaxSize=2G\nEnvironment=PATH=/usr/local/bin:/usr/bin\nEnvironment=NODE_ENV=test\n"
                       "MemoryMax=4G\nCPUQuota=200%\n") >= 0, "an environment parsed");
        const Environment *n = environments_find(&e, "node20");
        CHECK(n && streq_ptr(n->image, "/var/lib/machines/node20"), "Name= may come after other keys");
        CHECK(n && n->network == NETWORK_ALLOWLIST && strv_length(n->allow) == 5, "network mode and five allow entries");
        CHECK(n && n->caches == ((1U << CACHE_NPM) | (1U << CACHE_PIP)) && n->cache_max_bytes == 2ULL << 30, "caches and their cap");
        CHECK(n && strv_length(n->vars) == 2 && n->memory_max == 4ULL << 30 && n->cpu_quota_percent == 200, "variables and limits");
        CHECK(environments_find(&e, "default") && e.list[0].name && streq(e.list[0].name, "default"), "the default is still there, listed first");
        _cleanup_free_ char *names = environments_names(&e);
        CHECK(streq_ptr(names, "default, node20"), "names for an error message: '%s'", strempty(names));
        environments_done(&e);

        /* Invalid values are skipped one by one; the section stays. */
        CHECK(load(&e, "[Environment]\nName=x\nImage=relative/path\nNetwork=everything\nAllow=bad_host! ok.example\n"
                       "Cache=maven\nEnvironment=LD_PRELOAD=/x.so\nEnvironment=1X=y\n") >= 0, "broken values read");
        n = environments_find(&e, "x");
        CHECK(n && !n->image && n->network == NETWORK_OFF && n->caches == 0 && !n->vars,
              "relative image, unknown mode and cache, LD_ and invalid variables refused");
        environments_done(&e);

        static const char *const bad_images[] = { "/", "/var/../etc", "/var//lib", "/var/lib/", "/./x", "x/y" };
        for (size_t i = 0; i < ELEMENTSOF(bad_images); i++) {
                char text[256];
                snprintf(text, sizeof(text), "[Environment]\nName=i\nImage=%s\n", bad_images[i]);
                CHECK(load(&e, text) >= 0 && environments_find(&e, "i") && !environments_find(&e, "i")->image,
                      "image path refused: '%s'", bad_images[i]);
                environments_done(&e);
        }

        /* A section without a name is not an environment; one of the same
         * name replaces an earlier one as a whole. */
        CHECK(load(&e, "[Environment]\nImage=/x\n[Environment]\nName=a\nNetwork=audited\nCache=go\n"
                       "[Environment]\nName=a\nImage=/srv/a\n") >= 0 && e.n == 2, "nameless section ignored");
        n = environments_find(&e, "a");
        CHECK(n && streq_ptr(n->image, "/srv/a") && n->network == NETWORK_OFF && n->caches == 0, "a later section replaces");
        environments_done(&e);

        /* An administrator may redefine the default. */
        CHECK(load(&e, "[Environment]\nName=default\nCache=pip\n") >= 0 && e.n == 1 && e.list[0].caches == 1U << CACHE_PIP,
              "the default redefined");
        environments_done(&e);

        CHECK(!environment_name_is_valid("") && !environment_name_is_valid("../x") && !environment_name_is_valid(".x") &&
              !environment_name_is_valid("a b") && environment_name_is_valid("node-20.x_1"), "environment names");
}

static void test_cache_vars(void) {
        _cleanup_strv_free_ char **v = NULL;

        CHECK(environment_cache_vars((1U << CACHE_PIP) | (1U << CACHE_GO), &v) >= 0 && strv_length(v) == 3,
              "pip gets one variable, go two");
        _cleanup_free_ char *all = strv_join(v, " ");
        CHECK(all && strstr(all, "PIP_CACHE_DIR=/cache/pip") && strstr(all, "GOMODCACHE=/cache/go/mod") &&
              strstr(all, "GOCACHE=/cache/go/build"), "the variables point below /cache: %s", strempty(all));
}

/* The image checks need root-owned directories: only as root. */
static void test_image_check(void) {
        char dir[] = "/tmp/test-env-image-XXXXXX", sub[256];
        _cleanup_free_ char *why = NULL;

        if (geteuid() != 0) {
                SKIP("the image checks need root");
                return;
        }
        CHECK(environment_image_check("/nonexistent/image", &why) == -ENOENT && why && strstr(why, "does not exist"),
              "a missing image: %s", strempty(why));
        why = mfree_ptr(why);
        if (!mkdtemp(dir))
                return;
        CHECK(environment_image_check(dir, &why) == -ENOENT && why && strstr(why, "no usr/"), "no usr/: %s", strempty(why));
        why = mfree_ptr(why);
        snprintf(sub, sizeof(sub), "%s/usr", dir);
        (void) mkdir(sub, 0755);
        snprintf(sub, sizeof(sub), "%s/usr/bin", dir);
        (void) mkdir(sub, 0755);
        (void) chmod(dir, 0755);
        CHECK_ERRNO(environment_image_check(dir, &why), 0, "a root-owned image below sticky /tmp: %s", strempty(why));
        why = mfree_ptr(why);

        (void) chmod(sub, 0777);
        CHECK(environment_image_check(dir, &why) == -EPERM && why && strstr(why, "usr/bin"), "a world-writable usr/bin: %s",
              strempty(why));
        why = mfree_ptr(why);
        (void) chmod(sub, 0755);
        (void) chown(sub, 65534, 65534);
        CHECK(environment_image_check(dir, &why) == -EPERM && why && strstr(why, "usr/bin"), "usr/bin not root's: %s",
              strempty(why));
        why = mfree_ptr(why);
        (void) chown(sub, 0, 0);
        (void) chmod(dir, 0777);
        CHECK_ERRNO(environment_image_check(dir, &why), -EPERM, "a world-writable image root: %s", strempty(why));
        why = mfree_ptr(why);
        (void) chmod(dir, 0755);

        snprintf(sub, sizeof(sub), "%s-link", dir);
        (void) symlink(dir, sub);
        CHECK(environment_image_check(sub, &why) < 0 && why && strstr(why, "symlink"), "an image reached through a symlink: %s",
              strempty(why));
        why = mfree_ptr(why);
        (void) unlink(sub);
        (void) rm_rf_at(AT_FDCWD, dir);
}

int main(void) {
        test_parse();
        test_cache_vars();
        test_image_check();
        return tap_done();
}
