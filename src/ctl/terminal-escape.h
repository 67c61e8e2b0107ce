/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdio.h>

/* agentfabctl prints text that came from repositories, models and other
 * users: file names, plans, commit subjects, reasons, comments. Written
 * through this filter, no control character but newline and tab reaches a
 * terminal (or a file that is shown later) as itself: C0 and DEL become
 * "\x1b", C1 as UTF-8 encodes it (C2 80-9F) "\u009b", so that nothing
 * moves the cursor, clears the screen or sets a title, as journalctl keeps
 * a unit's messages from driving the terminal; and the bidirectional
 * controls (U+202A-202E, U+2066-2069) "\u202e", so that no name shows
 * reordered. JSON stays valid and means the same: json-c escapes C0
 * itself, and "\u009b" is JSON's own escape.
 *
 * Replaces *f (stdout or stderr, writing to fd) by a stream that escapes
 * and writes to fd; line-buffered, or unbuffered if unbuffered. At most
 * two such streams in a process. Returns 0, or a negative errno (*f is
 * left as it was). */
int terminal_escape_stream(FILE **f, int fd, int unbuffered);
