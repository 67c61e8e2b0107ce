#include "ring.h"
#include "tap.h"

int main(void) {
        Ring r;
        int v = 0;

        ring_init(&r);
        ok(!ring_pop(&r, &v), "empty ring pops nothing");
        for (int i = 1; i <= 3; i++)
                ring_push(&r, i);
        is_int(ring_count(&r), 3, "three pushed, three held");
        ok(ring_pop(&r, &v) && v == 1, "oldest first");

        ring_init(&r);
        for (int i = 1; i <= RING_CAPACITY + 2; i++)
                ring_push(&r, i);
        is_int(ring_count(&r), RING_CAPACITY, "a full ring holds its capacity");
        ok(ring_pop(&r, &v), "pop from a full ring");
        is_int(v, 3, "the two oldest were dropped");
        return tap_done();
}
