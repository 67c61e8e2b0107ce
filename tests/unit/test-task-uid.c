/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "task-uid.h"
#include "tap.h"

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        if (f) {
                fputs(text, f);
                fclose(f);
        }
}

int main(void) {
        char dir[] = "/tmp/test-task-uid-XXXXXX", subuid[64], subgid[64], text[256];
        uid_t first, uid;
        int fd;

        if (!mkdtemp(dir))
                return 1;
        snprintf(subuid, sizeof(subuid), "%s/subuid", dir);
        snprintf(subgid, sizeof(subgid), "%s/subgid", dir);

        /* Where the task's hash points when no subordinate range is in the way. */
        const char *const none[] = { NULL };
        fd = task_uid_acquire_full(dir, none, "0123456789ab", &first);
        CHECK(fd >= 0 && task_uid_in_range(first), "an id without subordinate ranges: %u", (unsigned) first);
        safe_close(fd);

        /* A user's /etc/subuid range is theirs to map into their own
         * namespace (newuidmap): a task uid in it would let that user's
         * processes signal and ptrace the task's commands. */
        snprintf(text, sizeof(text), "# comment\nbroken line\nalice:%u:100\n", (unsigned) first - 10);
        write_text(subuid, text);
        const char *const files[] = { subuid, subgid, NULL };
        fd = task_uid_acquire_full(dir, files, "0123456789ab", &uid);
        CHECK(fd >= 0 && task_uid_in_range(uid) && (uid < first - 10 || uid >= first + 90),
              "an id in a subuid range is skipped: %u (range %u+100)", (unsigned) uid, (unsigned) first - 10);
        safe_close(fd);

        /* The same for /etc/subgid: the task's gid is its uid. */
        unlink(subuid);
        snprintf(text, sizeof(text), "bob:%u:1\n", (unsigned) first);
        write_text(subgid, text);
        fd = task_uid_acquire_full(dir, files, "0123456789ab", &uid);
        CHECK(fd >= 0 && uid != first, "an id in a subgid range is skipped: %u", (unsigned) uid);
        safe_close(fd);

        /* A range over all our ids leaves none. */
        write_text(subgid, "carol:0:4294967295\n");
        fd = task_uid_acquire_full(dir, files, "0123456789ab", &uid);
        CHECK_ERRNO(fd, -EBUSY, "every id in a subordinate range: %d", fd);
        if (fd >= 0)
                safe_close(fd);

        /* An unreadable file fails the allocation instead of being ignored. */
        unlink(subgid);
        (void) mkdir(subgid, 0700);
        fd = task_uid_acquire_full(dir, files, "0123456789ab", &uid);
        CHECK(fd < 0 && fd != -EBUSY, "an unreadable subordinate id file is an error: %d", fd);
        if (fd >= 0)
                safe_close(fd);

        (void) rmdir(subgid);
        snprintf(text, sizeof(text), "%s/" TASK_UID_LOCK_FILE, dir);
        (void) unlink(text);
        (void) rmdir(dir);
        return tap_done();
}
