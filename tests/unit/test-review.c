/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tap.h"
int main(void) { return tap_done(); }
