#include <errno.h>

#include "parse.h"
#include "tap.h"

int main(void) {
        int v = 7;

        is_int(parse_int("42", &v), 0, "a number");
        is_int(v, 42, "its value");
        is_int(parse_int("-17", &v), 0, "a negative number");
        is_int(parse_int("4x", &v), -EINVAL, "trailing junk");
        is_int(parse_int("", &v), -EINVAL, "empty");
        v = 7;
        is_int(parse_int("99999999999", &v), -ERANGE, "too big");
        is_int(v, 7, "too big leaves the result alone");
        is_int(parse_int("-99999999999999999999999", &v), -ERANGE, "too small");
        return tap_done();
}
