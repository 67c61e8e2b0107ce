#include "crc.h"

uint32_t crc32_of(const void *data, size_t n) {
        const unsigned char *p = data;
        uint32_t crc = 0xFFFFFFFFu;

        while (n--) {
                crc ^= *p++;
                for (int k = 0; k < 8; k++)
                        crc = (crc >> 1) ^ (0xEDB88320u & -(crc & 1));
        }
        return ~crc;
}
