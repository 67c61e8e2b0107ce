# SPDX-License-Identifier: LGPL-2.1-or-later
# Attacks from inside an agentfab sandbox. Run as the sandboxed command:
#   python3 sandbox-probe.py NAME [ARG...]
# Prints "denied NAME: how" when the attack failed as it must, or
# "ESCAPED NAME: what happened" when it did not. The harness side
# (sandbox-attacks.sh) also checks that nothing changed outside.
import ctypes, errno, fcntl, os, socket, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
try:
    seccomp = ctypes.CDLL("libseccomp.so.2")
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
except OSError:
    seccomp = None

# x86_64 numbers of syscalls newer than Debian 12's libseccomp knows by name.
NEWER = {"cachestat": 451, "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454, "futex_wait": 455,
         "futex_requeue": 456, "statmount": 457, "listmount": 458, "lsm_get_self_attr": 459,
         "lsm_set_self_attr": 460, "lsm_list_modules": 461, "mseal": 462, "setxattrat": 463,
         "getxattrat": 464, "listxattrat": 465, "removexattrat": 466, "open_tree_attr": 467,
         "file_getattr": 468, "file_setattr": 469}

name = sys.argv[1]
args = sys.argv[2:]
escaped = []


def report(ok, how):
    print(("denied %s: %s" if ok else "ESCAPED %s: %s") % (name, how), flush=True)
    if not ok:
        escaped.append(how)


def nr_of(n):
    if seccomp is not None:
        v = seccomp.seccomp_syscall_resolve_name(n.encode())
        if v >= 0:
            return v
    return NEWER.get(n)


def sys_call(nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return r, ctypes.get_errno()


def expect_denied_syscall(n, *a):
    nr = nr_of(n)
    if nr is None:
        report(True, "%s: unknown to libseccomp and to this probe; unknown numbers fail with ENOSYS" % n)
        return
    r, e = sys_call(nr, *a)
    report(r == -1 and e in (errno.EPERM, errno.ENOSYS), "%s(...) = %d, errno %s" % (n, r, errno.errorcode.get(e, e)))


def expect_oserror(fn, what, allowed=(errno.EACCES, errno.EPERM, errno.ENOENT, errno.EROFS)):
    try:
        fn()
    except OSError as e:
        report(e.errno in allowed, "%s: %s" % (what, errno.errorcode.get(e.errno, e.errno)))
        return
    report(False, "%s succeeded" % what)


def read_file(p):
    with open(p, "rb") as f:
        return f.read(1)


def write_file(p, data=b"x"):
    with open(p, "wb") as f:
        f.write(data)


if name == "read":
    expect_oserror(lambda: read_file(args[0]), "read " + args[0])
elif name == "write":
    expect_oserror(lambda: write_file(args[0]), "write " + args[0])
elif name == "mkdir":
    expect_oserror(lambda: os.mkdir(args[0]), "mkdir " + args[0])
elif name == "absent":
    report(not os.path.lexists(args[0]), "%s is %s" % (args[0], "there" if os.path.lexists(args[0]) else "absent"))
elif name == "symlink-escape":
    # A link in the workspace to a host path resolves inside the sandbox.
    link = "/workspace/escape-link"
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(args[0], link)
    expect_oserror(lambda: read_file(link), "read through link to " + args[0])
elif name == "hardlink-escape":
    expect_oserror(lambda: os.link(args[0], "/workspace/escape-hardlink"), "hard link to " + args[0],
                   allowed=(errno.EXDEV, errno.EPERM, errno.EACCES, errno.ENOENT, errno.EROFS))
elif name == "dotdot":
    p = "/workspace/" + "../" * 30 + args[0].lstrip("/")
    expect_oserror(lambda: read_file(p), "read " + p)
elif name == "connect-tcp":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    expect_oserror(lambda: s.connect((args[0], int(args[1]))), "connect %s:%s" % (args[0], args[1]),
                   allowed=(errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ETIMEDOUT, errno.EACCES))
elif name == "connect-abstract":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    expect_oserror(lambda: s.connect("\0" + args[0]), "connect @" + args[0],
                   allowed=(errno.ECONNREFUSED, errno.ENOENT))
elif name == "connect-unix":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    expect_oserror(lambda: s.connect(args[0]), "connect " + args[0], allowed=(errno.ECONNREFUSED, errno.ENOENT, errno.EACCES))
elif name == "dns":
    try:
        socket.getaddrinfo(args[0], 80)
        report(False, "resolved " + args[0])
    except socket.gaierror as e:
        report(True, "getaddrinfo: %s" % e)
elif name == "udp-out":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    expect_oserror(lambda: s.sendto(b"x", (args[0], int(args[1]))), "send to %s:%s" % (args[0], args[1]),
                   allowed=(errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EPERM))
elif name == "socket-family":
    expect_oserror(lambda: socket.socket(int(args[0]), socket.SOCK_RAW if int(args[0]) == 17 else socket.SOCK_SEQPACKET, 0),
                   "socket(family %s)" % args[0], allowed=(errno.EPERM, errno.EAFNOSUPPORT, errno.EACCES))
elif name == "syscall":
    expect_denied_syscall(args[0], *[int(x, 0) for x in args[1:]])
elif name == "docker-list":
    for line in open(args[0]):
        n = line.strip()
        if n and not n.startswith("#"):
            expect_denied_syscall(n)
elif name == "clone-newuser":
    r, e = sys_call(nr_of("clone"), 0x10000000 | 17, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    report(r == -1 and e == errno.EPERM, "clone(CLONE_NEWUSER) = %d %s" % (r, errno.errorcode.get(e, e)))
elif name == "x32":
    r, e = sys_call(0x40000000 | 39)  # x32 getpid
    report(r == -1, "x32 getpid = %d %s" % (r, errno.errorcode.get(e, e)))
elif name == "tiocsti":
    fd = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    expect_oserror(lambda: fcntl.ioctl(fd, 0x5412, b"x"), "ioctl(TIOCSTI)", allowed=(errno.EPERM,))
elif name == "tioclinux":
    fd = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    expect_oserror(lambda: fcntl.ioctl(fd, 0x541C, b"\x06"), "ioctl(TIOCLINUX)", allowed=(errno.EPERM,))
elif name == "personality":
    r, e = sys_call(nr_of("personality"), 0x0040000)  # ADDR_NO_RANDOMIZE
    q, _ = sys_call(nr_of("personality"), 0xffffffff)
    report(r == -1 and e == errno.EPERM and q >= 0, "ADDR_NO_RANDOMIZE: %d %s; query: %d" % (r, errno.errorcode.get(e, e), q))
elif name == "mknod":
    expect_oserror(lambda: os.mknod("/workspace/sda", 0o600 | 0o060000, os.makedev(8, 0)), "mknod block device")
elif name == "dev-nodes":
    present = sorted(os.listdir("/dev"))
    extra = [d for d in present if d not in ("null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx",
                                             "shm", "fd", "stdin", "stdout", "stderr")]
    report(not extra, "/dev holds %s" % present)
elif name == "no-caps":
    st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
    ok = all(int(st[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")) and st["NoNewPrivs"].strip() == "1"
    report(ok, "caps %s, NoNewPrivs %s, Seccomp %s" % ([st[k].strip() for k in ("CapEff", "CapBnd")], st["NoNewPrivs"].strip(), st["Seccomp"].strip()))
elif name == "not-root":
    report(os.getuid() != 0 and os.geteuid() != 0 and os.getgroups() in ([], [os.getgid()]), "uid %d euid %d groups %s" % (os.getuid(), os.geteuid(), os.getgroups()))
elif name == "fds":
    fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    report(all(f <= 3 for f in fds), "open fds %s" % fds)
elif name == "env":
    report(args[0] not in os.environ, "environment %s" % sorted(os.environ))
elif name == "kill":
    expect_oserror(lambda: os.kill(int(args[0]), 9), "kill %s" % args[0], allowed=(errno.ESRCH, errno.EPERM))
elif name == "sethostname":
    expect_oserror(lambda: libc.sethostname(b"evil", 4) == 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), "")), "sethostname",
                   allowed=(errno.EPERM,))
elif name == "setuid-binary":
    # su is setuid root on the host; here nosuid and no_new_privs make it a plain program.
    r = os.system("su -c 'id -u > /workspace/su-ran' root </dev/null >/dev/null 2>&1")
    report(not os.path.exists("/workspace/su-ran"), "su exit %d" % r)
else:
    print("unknown probe " + name)
    sys.exit(2)

sys.exit(1 if escaped else 0)
