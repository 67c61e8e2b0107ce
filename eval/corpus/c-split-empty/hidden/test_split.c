#include "split.h"
#include "tap.h"

int main(void) {
        char buf[64], *f[8];

        is_int(split("a,b,c", ',', buf, sizeof buf, f, 8), 3, "three fields");
        is_str(f[2], "c", "the last one");
        is_int(split("a,,b", ',', buf, sizeof buf, f, 8), 3, "an empty field in the middle counts");
        is_str(f[1], "", "and is empty");
        is_int(split("a,b,", ',', buf, sizeof buf, f, 8), 3, "a trailing empty field counts");
        is_str(f[2], "", "and is empty");
        is_int(split("", ',', buf, sizeof buf, f, 8), 1, "the empty string is one empty field");
        is_int(split("a,b,c", ',', buf, sizeof buf, f, 2), -1, "too many fields");
        return tap_done();
}
