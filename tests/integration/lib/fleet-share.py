#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""fleet-share.py PID SOURCE TARGET: mounts the directory SOURCE, as this
shell sees it, at TARGET in the mount namespace of process PID (a system
the harness booted), so that hosts of a fleet in separate namespaces share
one directory (their Remote=). A bind mount cannot cross into another
namespace; a detached copy of the tree (open_tree(2)) moved in with
move_mount(2) can."""
import ctypes
import os
import sys

SYS_open_tree, SYS_move_mount = 428, 429
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
AT_FDCWD = -100
CLONE_NEWNS = 0x00020000

pid, source, target = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def check(r, what):
    if r < 0:
        e = ctypes.get_errno()
        sys.exit("fleet-share: %s: %s" % (what, os.strerror(e)))
    return r


fd = check(libc.syscall(ctypes.c_long(SYS_open_tree), ctypes.c_int(AT_FDCWD), source.encode(),
                        ctypes.c_uint(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)), "open_tree " + source)
ns = os.open("/proc/%s/ns/mnt" % pid, os.O_RDONLY | os.O_CLOEXEC)
check(libc.setns(ns, CLONE_NEWNS), "setns")
check(libc.syscall(ctypes.c_long(SYS_move_mount), ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD), target.encode(),
                   ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)), "move_mount to " + target)
