#include "person.h"
#include "tap.h"

int main(void) {
        Person p;

        is_int(person_set_name(&p, "Ada"), 0, "a short name is not cut");
        is_str(p.name, "Ada", "and kept whole");
        is_int(person_set_name(&p, "Maria Salomea Sklodowska"), 0, "24 bytes fit in NAME_MAX_LEN");
        is_str(p.name, "Maria Salomea Sklodowska", "and are kept");
        is_int(person_set_name(&p, "Hubert Blaine Wolfeschlegelsteinhausen"), 1, "a longer one is cut");
        is_int((long) strlen(p.name), NAME_MAX_LEN, "at NAME_MAX_LEN");
        return tap_done();
}
