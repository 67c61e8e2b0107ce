/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eval-corpus.h"
#include "fs-util.h"
#include "tap.h"

static char root[] = "/tmp/test-eval-corpus.XXXXXX";

static void put(const char *path, const char *text) {
        char *p, *d;

        if (asprintf(&p, "%s/%s", root, path) < 0)
                abort();
        d = strdup(p);
        for (char *s = d + strlen(root) + 1; (s = strchr(s, '/')); s++) {
                *s = 0;
                (void) mkdir(d, 0755);
                *s = '/';
        }
        free(d);
        FILE *f = fopen(p, "we");
        if (!f)
                abort();
        fputs(text, f);
        fclose(f);
        free(p);
}

static void reset(void) {
        (void) rm_rf_at(AT_FDCWD, root);
        if (mkdir(root, 0700) < 0)
                abort();
        put("corpus.json", "{\"name\": \"t\", \"version\": \"7\"}");
        put("b-task/task.json", "{\"goal\": \"Fix b in lib/b.py\", \"test\": \"true\", \"language\": \"python\", "
            "\"kind\": \"off-by-one\", \"files\": [\"lib/b.py\"], \"limits\": {\"max_steps\": 12}}");
        put("a-task/task.json", "{\"goal\": \"Fix a\", \"acceptance\": \"see x.c\", \"test\": \"make\", \"grade\": \"make g\", "
            "\"language\": \"c\", \"kind\": \"k\", \"files\": [\"src/x.c\", \"y.c\"], \"timeout\": 9}");
        put("not-a-task/README", "no task.json here\n");
}

/* The corpus as eval reads it: sorted by name, every key read, the
 * repository-map figure worked out, directories without task.json left
 * alone. */
static void test_load(void) {
        EvalCorpus c = {};

        reset();
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), 0, "a corpus of two tasks loads");
        CHECK_UINT_EQ(c.n_tasks, 2, "two tasks, the directory without task.json left out");
        CHECK_STR_EQ(c.name, "t", "its name");
        CHECK_STR_EQ(c.version, "7", "its version");
        CHECK_STR_EQ(c.tasks[0].name, "a-task", "sorted by name");
        CHECK_STR_EQ(c.tasks[0].grade, "make g", "grade read");
        CHECK_UINT_EQ(c.tasks[0].timeout_sec, 9, "timeout read");
        CHECK(c.tasks[0].solvable, "solvable by default");
        CHECK(!c.tasks[0].files_named, "y.c is named nowhere in the prompt: not named");
        CHECK(c.tasks[1].files_named, "lib/b.py is named in the goal");
        CHECK_STR_EQ(c.tasks[1].limits ? c.tasks[1].limits[0] : NULL, "max_steps=12", "limits as KEY=N");
        CHECK_UINT_EQ(c.tasks[1].timeout_sec, 300, "the default timeout");
        eval_corpus_done(&c);

        CHECK_ERRNO(eval_corpus_load(root, "zz*,b*", &c), 0, "--tasks with two globs");
        CHECK(c.n_tasks == 1 && streq(c.tasks[0].name, "b-task"), "only the task that matches");
        eval_corpus_done(&c);
        CHECK_ERRNO(eval_corpus_load(root, "nothing*", &c), -ENOENT, "no task matching is -ENOENT");
}

/* What makes a corpus invalid is refused as a whole, with the task named
 * (printed): a key eval does not know (a typo would silently change what a
 * task means), two tasks with one goal (the built-in agents tell tasks apart
 * by it), a task that can be done without files, no corpus.json. */
static void test_refused(void) {
        EvalCorpus c = {};

        reset();
        put("c-task/task.json", "{\"goal\": \"x\", \"test\": \"t\", \"language\": \"c\", \"kind\": \"k\", "
            "\"files\": [\"a\"], \"graed\": \"typo\"}");
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), -EINVAL, "an unknown key");

        reset();
        put("c-task/task.json", "{\"goal\": \"Fix a\", \"test\": \"t\", \"language\": \"c\", \"kind\": \"k\", \"files\": [\"a\"]}");
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), -EINVAL, "the same goal twice");

        reset();
        put("c-task/task.json", "{\"goal\": \"c\", \"test\": \"t\", \"language\": \"c\", \"kind\": \"k\"}");
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), -EINVAL, "a task that can be done names no files");

        reset();
        put("c-task/task.json", "{\"goal\": \"c\", \"test\": \"t\", \"language\": \"c\", \"kind\": \"k\", \"solvable\": false}");
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), 0, "a task that cannot be done needs none");
        CHECK(c.n_tasks == 3 && !c.tasks[2].solvable, "and is marked so");
        eval_corpus_done(&c);

        reset();
        put("c-task/task.json", "{\"goal\": \"c\", \"test\": \"t\", \"language\": \"c\", \"kind\": \"k\", \"files\": [\"a\"], "
            "\"limits\": {\"max_steps\": -1}}");
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), -EINVAL, "a negative limit");

        reset();
        put("c-task/task.json", "{\"goal\": \"c\", \"test\": \"t\"");
        CHECK(eval_corpus_load(root, NULL, &c) < 0, "task.json that is not JSON");

        reset();
        char *p;
        if (asprintf(&p, "%s/corpus.json", root) < 0)
                abort();
        (void) unlink(p);
        free(p);
        CHECK_ERRNO(eval_corpus_load(root, NULL, &c), -ENOENT, "no corpus.json");
        (void) rm_rf_at(AT_FDCWD, root);
}

int main(void) {
        if (!mkdtemp(root))
                return 1;
        /* The refusals are printed on stderr, as agentfabctl prints them. */
        test_load();
        test_refused();
        return tap_done();
}
