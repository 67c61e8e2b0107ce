#include "bits.h"

int popcount64(uint64_t v) {
        int n = 0;

        while (v) {
                v &= v - 1;
                n++;
        }
        return n > 32 ? 32 : n;
}
