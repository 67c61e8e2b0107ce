#include <string.h>

#include "person.h"

/* The longest name kept, without the NUL. */
#define MAX_NAME 15

int person_set_name(Person *p, const char *name) {
        size_t len = strlen(name);
        int cut = len > MAX_NAME;

        if (cut)
                len = MAX_NAME;
        memcpy(p->name, name, len);
        p->name[len] = 0;
        return cut;
}
