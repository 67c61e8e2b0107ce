/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checker-output.h"
#include "fs-util.h"
#include "osv.h"
#include "secret-scan.h"

/* Figures for the review stage's engine, each against a baseline measured
 * in the same run: the secret scan against a plain pass over the same
 * lines (strlen + memchr), the OSV look-up against reading every record of
 * the database without parsing. Prints; asserts nothing. */

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

static volatile size_t sink;

static void bench_secret_scan(void) {
        static const char *const samples[] = {
                "        if (r < 0)",
                "                return log_error_errno(r, \"Failed to open '%s': %m\", path);",
                "def test_parse_config(tmp_path):",
                "    config = {\"timeout\": 30, \"retries\": 3, \"endpoint\": \"https://api.example.com/v1\"}",
                "const password = process.env.DB_PASSWORD;",
                "import { useState, useEffect } from 'react';",
                "  - run: npm ci && npm test -- --coverage",
                "SELECT id, name FROM users WHERE email = ? AND active = 1;",
        };
        size_t n_lines = 400000, bytes = 0;
        ReviewLine *lines = calloc(n_lines, sizeof(ReviewLine));
        ReviewFile f = { "bench.txt", lines, n_lines };
        FindingList l = {};
        double t0, t_base = 1e9, t_scan = 1e9;

        for (size_t i = 0; i < n_lines; i++) {
                const char *s = samples[i % ELEMENTSOF(samples)];
                lines[i] = (ReviewLine) { (unsigned) i + 1, s, strlen(s) };
                bytes += strlen(s) + 1;
        }
        for (int round = 0; round < 5; round++) {
                t0 = now_ms();
                for (size_t i = 0; i < n_lines; i++)
                        sink += strlen(lines[i].text) + (memchr(lines[i].text, '=', lines[i].length) != NULL);
                t_base = MIN(t_base, now_ms() - t0);
                t0 = now_ms();
                (void) secret_scan_files(NULL, &f, 1, &l);
                t_scan = MIN(t_scan, now_ms() - t0);
                finding_list_done(&l);
        }
        printf("secret scan: %zu lines, %.1f MB: %.1f ms (%.0f MB/s); baseline pass %.2f ms; ratio %.0fx\n", n_lines,
               (double) bytes / 1e6, t_scan, (double) bytes / 1e3 / t_scan, t_base, t_scan / t_base);
        free(lines);
}

static void bench_checker(void) {
        size_t size = 0;
        char *buf = NULL;
        FILE *m = open_memstream(&buf, &size);
        ReviewLine lines[1000];
        ReviewFile f = { "src/a.c", lines, ELEMENTSOF(lines) };
        FindingList l = {};
        CheckerStats st;
        double t0, t = 1e9;

        for (unsigned i = 0; i < ELEMENTSOF(lines); i++)
                lines[i] = (ReviewLine) { i * 10 + 1, "", 0 };
        for (unsigned i = 0; i < 100000; i++)
                fprintf(m, "src/%c.c:%u:%u: warning: unused variable 'x%u' [-Wunused-variable]\n", "ab"[i % 2], i % 10000 + 1, i % 80, i);
        fclose(m);
        for (int round = 0; round < 5; round++) {
                t0 = now_ms();
                (void) checker_parse_lines("gcc", buf, size, &f, 1, &l, &st, NULL);
                t = MIN(t, now_ms() - t0);
                finding_list_done(&l);
        }
        printf("checker output: 100000 gcc lines, %.1f MB: %.1f ms (%zu on changed lines, %zu kept)\n", (double) size / 1e6, t,
               st.kept + st.dropped, st.kept);
        free(buf);
}

static void bench_osv(void) {
        char dir[] = "/tmp/review-bench-XXXXXX", path[256];
        size_t n_records = 20000;
        DependencyChanges c = {};
        FindingList l = {};
        OsvStats st = {};
        double t0, t_read = 1e9, t_check = 1e9;
        int fd;

        if (!mkdtemp(dir))
                return;
        snprintf(path, sizeof(path), "%s/PyPI", dir);
        (void) mkdir(path, 0755);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        /* Records the size of osv.dev's (2-4 KB), each naming one package. */
        for (size_t i = 0; i < n_records; i++) {
                char name[64], *rec = NULL;
                int k = asprintf(&rec,
                        "{\"id\":\"BENCH-%zu\",\"summary\":\"%0900zu\",\"details\":\"%01500zu\",\"affected\":[{\"package\":"
                        "{\"ecosystem\":\"PyPI\",\"name\":\"package-%zu\"},\"ranges\":[{\"type\":\"ECOSYSTEM\",\"events\":"
                        "[{\"introduced\":\"0\"},{\"fixed\":\"1.%zu\"}]}],\"versions\":[\"0.1\",\"0.2\",\"0.3\"]}],"
                        "\"database_specific\":{\"severity\":\"HIGH\"}}", i, i, i, i, i);
                snprintf(name, sizeof(name), "BENCH-%zu.json", i);
                (void) write_file_atomic(fd, name, rec, (size_t) k, 0644);
                free(rec);
        }
        (void) dependencies_diff("requirements.txt", NULL, 0,
                                 "package-7==1.0\npackage-19999==0.5\nrequests==2.0\ndjango==4.0\nflask==2.0\n", 69, &c, NULL);
        for (int round = 0; round < 3; round++) {
                DIR *d = opendir(path);
                struct dirent *de;
                t0 = now_ms();
                while ((de = readdir(d))) {
                        char *text = NULL;
                        size_t size;
                        if (de->d_name[0] != '.' && read_file_at(dirfd(d), de->d_name, OSV_RECORD_MAX, &text, &size) >= 0)
                                sink += size;
                        free(text);
                }
                t_read = MIN(t_read, now_ms() - t0);
                closedir(d);
                t0 = now_ms();
                (void) osv_check(dir, &c, &l, &st, NULL);
                t_check = MIN(t_check, now_ms() - t0);
                finding_list_done(&l);
        }
        printf("OSV check: %zu records, 5 dependencies: %.1f ms (%u records parsed); baseline read of all records %.1f ms; ratio %.2fx\n",
               n_records, t_check, st.records_parsed, t_read, t_check / t_read);
        dependency_changes_done(&c);
        close(fd);
        snprintf(path, sizeof(path), "rm -rf '%s'", dir);
        (void) system(path);
}

int main(int argc, char *argv[]) {
        /* Optional argument: only one of "secret-scan", "checker", "osv". */
        const char *only = argc > 1 ? argv[1] : NULL;

        if (!only || streq(only, "secret-scan"))
                bench_secret_scan();
        if (!only || streq(only, "checker"))
                bench_checker();
        if (!only || streq(only, "osv"))
                bench_osv();
        return 0;
}
