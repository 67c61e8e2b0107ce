#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "parse.h"

int parse_int(const char *s, int *ret) {
        char *end;
        long v;

        if (!s || !*s)
                return -EINVAL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (*end != 0)
                return -EINVAL;
        if (errno == ERANGE || v < INT_MIN || v > INT_MAX)
                v = v < 0 ? INT_MIN : INT_MAX;
        *ret = (int) v;
        return 0;
}
