/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An enum's names in a table, `static const char *const name##_table[]`
 * indexed by the enum, and the two functions over it that every enum with
 * names has (systemd's DEFINE_STRING_TABLE_LOOKUP). The enum's invalid
 * value is -EINVAL (`_FOO_INVALID = -EINVAL`), which is what a lookup of an
 * unknown name returns. */

#include <stddef.h>
#include <sys/types.h>

#include "macro.h"

/* The index of key in table[0..len), or -EINVAL for a key that is NULL or
 * not listed. NULL entries (holes in the table) match nothing. */
ssize_t string_table_lookup(const char *const *table, size_t len, const char *key);

/* NULL for a value outside the table. */
#define DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)                        \
        const char *name##_to_string(type i) {                                  \
                if (i < 0 || (size_t) i >= ELEMENTSOF(name##_table))            \
                        return NULL;                                            \
                return name##_table[i];                                         \
        }

#define DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)                      \
        type name##_from_string(const char *s) {                                \
                return (type) string_table_lookup(name##_table, ELEMENTSOF(name##_table), s); \
        }

#define DEFINE_STRING_TABLE_LOOKUP(name, type)                                  \
        DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)                        \
        DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)
