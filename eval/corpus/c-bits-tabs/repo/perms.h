#pragma once
#include <stdbool.h>

enum {
	FLAG_READ	= 1 << 0,
	FLAG_WRITE	= 1 << 1,
	FLAG_EXEC	= 1 << 2,
};

struct perms {
	unsigned int flags;
};

void perms_grant(struct perms *p, unsigned int flags);
void perms_revoke(struct perms *p, unsigned int flags);
bool perms_has(const struct perms *p, unsigned int flags);
