#include "mathx.h"
#include "tap.h"

int main(void) {
        is_int(clamp(5, 0, 10), 5, "inside");
        is_int(clamp(-3, 0, 10), 0, "below");
        is_int(clamp(42, 0, 10), 10, "above");
        is_int(lerp_permille(0, 100, 500), 50, "halfway");
        is_int(lerp_permille(0, 100, 2000), 100, "past the end");
        return tap_done();
}
