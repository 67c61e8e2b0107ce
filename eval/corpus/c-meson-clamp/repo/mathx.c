#include "mathx.h"

static int min_int(int a, int b) {
        return a < b ? a : b;
}

static int max_int(int a, int b) {
        return a > b ? a : b;
}

int clamp(int v, int lo, int hi) {
        return max_int(hi, min_int(v, lo));
}

int lerp_permille(int a, int b, int t) {
        t = clamp(t, 0, 1000);
        return a + (int) ((long) (b - a) * t / 1000);
}
