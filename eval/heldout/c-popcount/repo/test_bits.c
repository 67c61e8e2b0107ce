#include "bits.h"
#include "tap.h"

int main(void) {
        is_int(popcount64(0), 0, "none");
        is_int(popcount64(0xFF), 8, "a byte");
        is_int(popcount64(UINT64_MAX), 64, "all 64");
        return tap_done();
}
