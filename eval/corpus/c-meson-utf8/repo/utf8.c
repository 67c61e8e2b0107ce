#include "utf8.h"

size_t utf8_length(const char *s) {
        size_t n = 0;

        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                n++;
        return n;
}

size_t utf8_columns(const char *s) {
        size_t n = 0;
        const unsigned char *p = (const unsigned char *) s;

        while (*p) {
                /* U+0300..U+036F is CC 80..CD AF in UTF-8. */
                if (!((p[0] == 0xCC && p[1] >= 0x80) || (p[0] == 0xCD && p[1] <= 0xAF)))
                        n++;
                p++;
                while ((*p & 0xC0) == 0x80)
                        p++;
        }
        return n;
}
