#include "perms.h"

void perms_grant(struct perms *p, unsigned int flags)
{
	p->flags |= flags;
}

void perms_revoke(struct perms *p, unsigned int flags)
{
	p->flags &= flags;
}

/* Whether p has every one of flags. */
bool perms_has(const struct perms *p, unsigned int flags)
{
	return (p->flags & flags) == flags;
}
