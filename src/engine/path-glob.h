/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Matches a workspace-relative path against a glob: "**" as a whole
 * component matches any number of directories (also none), "*" any run of
 * characters but '/', "?" one character but '/', "[abc]", "[a-z]", "[!x]"
 * (or "[^x]") one character of a set, "\\x" a literal x. A glob without '/'
 * matches at the top only ("*.lock" matches "yarn.lock", not "a/yarn.lock";
 * write "**" "/" "*.lock" for any depth). */
bool path_glob_match(const char *glob, const char *path);
/* The same, ignoring ASCII case when casefold is true. */
bool path_glob_match_full(const char *glob, const char *path, bool casefold);
