/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A systemd credential of the service (LoadCredential=, SetCredential=):
 * $CREDENTIALS_DIRECTORY/NAME. NAME must be a plain file name
 * ([A-Za-z0-9_.-], not "." or ".."); no path leads out of the directory.
 * A trailing newline is dropped. The result is for one line of a protocol
 * (an HTTP header, say): empty (-ENODATA), or with a NUL, a control
 * character or (without allow_space) a space in it (-EBADMSG), it is
 * refused. -ENXIO without $CREDENTIALS_DIRECTORY. Free with
 * credential_free(), which wipes it. Never log it. */
int credential_read_line(const char *name, size_t max, bool allow_space, char **ret);

/* The same for a credential of several lines (a private key, a list of
 * known hosts): only empty (-ENODATA) and NUL bytes (-EBADMSG) are refused. */
int credential_read_text(const char *name, size_t max, char **ret);

char *credential_free(char *secret);
