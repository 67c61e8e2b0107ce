#pragma once
#include <stddef.h>

/* Names are kept up to NAME_MAX_LEN bytes, plus the terminating NUL. */
#define NAME_MAX_LEN 31

typedef struct Person {
        char name[NAME_MAX_LEN + 1];
        int age;
} Person;

/* Copies name into p, cut at NAME_MAX_LEN bytes. Returns 1 if it was cut. */
int person_set_name(Person *p, const char *name);
