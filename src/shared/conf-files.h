/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The configuration files of agentfab.conf(5): the file itself, then its
 * drop-ins path.d/ *.conf in lexical order, so that later ones win. */

#include <stdbool.h>

#define CONF_FILE_MAX (1024 * 1024)

/* Called with each file's text and the name to show in messages. A
 * negative return stops the walk (and is returned); only -ENOMEM should. */
typedef int (*conf_file_handler_t)(const char *text, const char *display, void *userdata);

/* A missing file or drop-in directory is not an error; a file that cannot
 * be read is warned about and skipped. */
int conf_files_foreach(const char *path, conf_file_handler_t handler, void *userdata);

/* One file's text, line by line: "[Section]" headers and "KEY=VALUE" lines,
 * with white space around keys and values stripped; empty lines and lines
 * beginning with '#' or ';' are skipped. The handler sees each assignment
 * with its section ("" before the first header), each header as key NULL,
 * and the end of the text as section NULL. With warn, malformed lines are
 * warned about (one reader of a file should warn, not every one). A
 * negative return of the handler stops the walk and is returned. */
typedef int (*conf_line_handler_t)(const char *section, const char *key, const char *value, unsigned line,
                                   void *userdata);
int conf_parse_text(const char *text, const char *filename, bool warn, conf_line_handler_t handler, void *userdata);
