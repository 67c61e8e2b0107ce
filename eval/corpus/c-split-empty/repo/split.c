#include <string.h>

#include "split.h"

int split(const char *s, char sep, char *buf, size_t bufsize, char **fields, int max) {
        size_t len = strlen(s);
        int n = 0;

        if (len + 1 > bufsize || max < 1)
                return -1;
        memcpy(buf, s, len + 1);
        char *p = buf;
        while (*p) {
                if (n == max)
                        return -1;
                fields[n++] = p;
                char *e = strchr(p, sep);
                if (!e)
                        break;
                *e = 0;
                p = e + 1;
        }
        return n;
}
