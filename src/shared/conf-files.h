/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The configuration files of agentfab.conf(5): the file itself, then its
 * drop-ins path.d/ *.conf in lexical order, so that later ones win. */

#define CONF_FILE_MAX (1024 * 1024)

/* Called with each file's text and the name to show in messages. A
 * negative return stops the walk (and is returned); only -ENOMEM should. */
typedef int (*conf_file_handler_t)(const char *text, const char *display, void *userdata);

/* A missing file or drop-in directory is not an error; a file that cannot
 * be read is warned about and skipped. */
int conf_files_foreach(const char *path, conf_file_handler_t handler, void *userdata);
