#include "tap.h"
#include "utf8.h"

int main(void) {
        is_int(utf8_length(""), 0, "empty");
        is_int(utf8_length("abc"), 3, "ASCII");
        is_int(utf8_length("h\xc3\xa9llo"), 5, "an e with acute accent is one code point");
        is_int(utf8_length("\xe2\x82\xac"), 1, "the euro sign");
        is_int(utf8_length("\xf0\x9f\x98\x80!"), 2, "an emoji and a mark");
        is_int(utf8_columns("e\xcc\x81"), 1, "e and a combining acute take one column");
        return tap_done();
}
