/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The configuration files of agentfab.conf(5): the file itself, then its
 * drop-ins path.d/ *.conf in lexical order, so that later ones win. */

#include <stdbool.h>

#define CONF_FILE_MAX (1024 * 1024)

/* One file's text, line by line: "[Section]" headers and "KEY=VALUE" lines,
 * with white space around keys and values stripped; empty lines and lines
 * beginning with '#' or ';' are skipped. The handler sees each assignment
 * with its section ("" before the first header), each header as key NULL,
 * and the end of the text as section NULL; filename is the name to show in
 * messages. A negative return of the handler stops the walk and is
 * returned. */
typedef int (*conf_line_handler_t)(const char *filename, const char *section, const char *key, const char *value,
                                   unsigned line, void *userdata);

/* A reader of agentfab.conf for one purpose (the daemon's settings, the
 * model profiles, the environments): each reads the same files and takes
 * the sections that are its own. */
typedef struct ConfParser {
        conf_line_handler_t line;
        /* Frees what line keeps between calls (a section in progress) once
         * the text or the files are read, or a negative return stopped the
         * walk; NULL if it keeps nothing. */
        void (*done)(void *userdata);
        /* Whether malformed lines are warned about: one reader of a file
         * should warn, not every one. */
        bool warn;
} ConfParser;

/* One file's text, as it is read by conf_parse_files(). */
int conf_parse_text(const ConfParser *p, const char *text, const char *filename, void *userdata);

/* The file at path, then its drop-ins path.d/ *.conf in lexical order, so
 * that later ones win. A missing file or drop-in directory is not an
 * error; a file that cannot be read is warned about and skipped. */
int conf_parse_files(const ConfParser *p, const char *path, void *userdata);
