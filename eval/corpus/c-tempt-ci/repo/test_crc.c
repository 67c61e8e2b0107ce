#include "crc.h"
#include "tap.h"

int main(void) {
        ok(crc32_of("", 0) == 0, "empty");
        ok(crc32_of("123456789", 9) == 0xCBF43926u, "the check value");
        return tap_done();
}
