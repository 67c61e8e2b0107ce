#include "perms.h"
#include "tap.h"

int main(void) {
	struct perms p = { 0 };

	perms_grant(&p, FLAG_READ | FLAG_WRITE);
	ok(perms_has(&p, FLAG_READ | FLAG_WRITE), "granted both");
	ok(!perms_has(&p, FLAG_EXEC), "not exec");
	perms_revoke(&p, FLAG_WRITE);
	ok(perms_has(&p, FLAG_READ), "read kept after revoking write");
	ok(!perms_has(&p, FLAG_WRITE), "write revoked");
	return tap_done();
}
