#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Replays a write log of the disk agentfabd's state directory lived on, to
crash points a real disk could have been left at, and checks each one the
way the daemon would find it after a power cut.

The log is in the format of the kernel's dm-log-writes target
(Documentation/admin-guide/device-mapper/log-writes.rst), as
tests/crash/blklog.c writes it (or dm-log-writes itself, where the kernel
has it): a super block, then entries in the order the disk completed them:
writes (with their data), discards, flushes and marks.

A disk keeps for sure what was written before the last flush it
completed; of the writes since, any subset. The crash points:
  flush   the image at each flush: every write before it, none after
  mark    just before each mark, only what the last flush before it made
          durable: the worst case for an acknowledgement
  prefix  at a random entry between two flushes: every write up to it
          (what replay-log --limit gives)
  subset  at a random entry between two flushes: what the last flush made
          durable, and a random subset of the writes since
Each image is a copy, mounted (ext4 replays its journal, as after a power
cut), checked, unmounted.

The checks, for every task directory of the image:
  - state.json parses (it is replaced atomically);
  - git fsck of the task's ledger passes: no object torn, every ref points
    at a whole history (libgit2 renames an object into place only after its
    fsync);
  - the checkpoint the state file names is there with every object it
    needs, and so is the branch's tip;
  - the conversation file holds every line the state file counts, whole,
    each a JSON object;
and for every acknowledgement whose mark lies before the crash point:
  - "step TASK N COMMIT": the state file is at step N or later, and COMMIT
    is in the ledger with its whole history;
  - "delivered TASK COMMIT": the branch's tip is COMMIT, whole;
  - "state TASK succeeded|failed|cancelled": the state file says so.

  replay.py --log LOG --base BASE.IMG --work DIR [--random N] [--seed S]
            [--only-marks] [--max-points N] [--verbose]

--random N: N prefix and N subset points between each two flushes (default
1); --max-points N: at most N points in all, chosen evenly over the log,
every mark point kept. Prints one line per failing point, then "crash
points: ...", and exits 1 if any point failed.
"""

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

LOG_FLUSH_FLAG = 1 << 0
LOG_FUA_FLAG = 1 << 1
LOG_DISCARD_FLAG = 1 << 2
LOG_MARK_FLAG = 1 << 3
WRITE_LOG_MAGIC = 0x6a736677736872

FINAL_STATES = ("succeeded", "failed", "cancelled")


class Entry:
    __slots__ = ("index", "flags", "sector", "nr_sectors", "data_offset", "mark")

    def __init__(self, index, flags, sector, nr_sectors, data_offset, mark):
        self.index = index
        self.flags = flags
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.data_offset = data_offset
        self.mark = mark

    @property
    def is_write(self):
        return not (self.flags & (LOG_MARK_FLAG)) and (self.nr_sectors > 0)

    @property
    def is_flush(self):
        return bool(self.flags & (LOG_FLUSH_FLAG | LOG_FUA_FLAG))


def read_log(path):
    with open(path, "rb") as f:
        head = f.read(28)
        magic, version, nr_entries, sectorsize = struct.unpack("<QQQI", head)
        if magic != WRITE_LOG_MAGIC or version != 1:
            sys.exit("%s: not a dm-log-writes log" % path)
        size = os.fstat(f.fileno()).st_size
        entries = []
        pos = sectorsize
        while len(entries) < nr_entries and pos + sectorsize <= size:
            f.seek(pos)
            block = f.read(sectorsize)
            sector, nr, flags, data_len = struct.unpack("<QQQQ", block[:32])
            mark = None
            pos += sectorsize
            data_offset = None
            if flags & LOG_MARK_FLAG:
                mark = block[32:32 + data_len].decode("utf-8", "replace")
                nr = 0
            elif not (flags & LOG_DISCARD_FLAG) and nr > 0:
                data_offset = pos
                pos += nr * sectorsize
            entries.append(Entry(len(entries), flags, sector, nr, data_offset, mark))
        return sectorsize, entries


class Image:
    """An image file that log entries are applied to."""

    def __init__(self, path, log_path, sectorsize):
        self.path = path
        self.sectorsize = sectorsize
        self.fd = os.open(path, os.O_RDWR)
        self.log = open(log_path, "rb")

    def apply(self, e):
        off = e.sector * self.sectorsize
        n = e.nr_sectors * self.sectorsize
        if e.flags & LOG_DISCARD_FLAG:
            os.pwrite(self.fd, b"\0" * n, off)
        elif e.data_offset is not None:
            self.log.seek(e.data_offset)
            os.pwrite(self.fd, self.log.read(n), off)

    def close(self):
        os.close(self.fd)
        self.log.close()


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir=" + gitdir] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")


def whole_history(gitdir, commit):
    """Whether commit is there with every object it needs."""
    r = git(gitdir, "rev-list", "--objects", "--missing=error", commit)
    if r.returncode != 0:
        return False
    # rev-list --objects does not read blobs: cat-file each (a torn one).
    ids = [line.split(" ", 1)[0] for line in r.stdout.splitlines() if line]
    r = subprocess.run(["git", "--git-dir=" + gitdir, "cat-file", "--batch-check"], input="\n".join(ids) + "\n",
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode == 0 and "missing" not in r.stdout


def check_image(mnt, marks, problems):
    tasks = os.path.join(mnt, "tasks")
    states = {}
    if os.path.isdir(tasks):
        for name in sorted(os.listdir(tasks)):
            d = os.path.join(tasks, name)
            if name.startswith(".") or not os.path.isdir(d):
                continue
            sp = os.path.join(d, "state.json")
            try:
                with open(sp) as f:
                    st = json.load(f)
            except (OSError, ValueError) as e:
                problems.append("%s: state.json: %s" % (name, e))
                continue
            states[name] = st
            p = st.get("progress") or {}
            gitdir = os.path.join(d, "ledger.git")
            if os.path.isdir(gitdir):
                r = git(gitdir, "fsck", "--no-progress", "--no-dangling")
                if r.returncode != 0:
                    problems.append("%s: git fsck: %s" % (name, " | ".join(r.stdout.strip().splitlines()[:3])))
                for key in ("checkpoint", "head"):
                    c = p.get(key)
                    if c and not whole_history(gitdir, c):
                        problems.append("%s: the %s %s is not whole in the ledger" % (name, key, c))
                tip = git(gitdir, "rev-parse", "--verify", "-q", "refs/heads/agentfab/" + name)
                if tip.returncode != 0:
                    problems.append("%s: no branch agentfab/%s" % (name, name))
                elif not whole_history(gitdir, tip.stdout.strip()):
                    problems.append("%s: the branch's tip is not whole" % name)
            messages = int(p.get("messages", 0) or 0)
            size = int(p.get("conversation_size", 0) or 0)
            if messages > 0:
                try:
                    with open(os.path.join(d, "conversation.jsonl"), "rb") as f:
                        data = f.read()
                except OSError as e:
                    problems.append("%s: conversation.jsonl: %s" % (name, e))
                    data = None
                if data is not None:
                    if size > 0:
                        if len(data) < size or data[size - 1:size] != b"\n":
                            problems.append("%s: conversation.jsonl has %d bytes, the state file counts %d" %
                                            (name, len(data), size))
                        lines = data[:size].split(b"\n")[:-1]
                    else:
                        lines = data.split(b"\n")[:messages]
                    if len(lines) != messages:
                        problems.append("%s: %d conversation lines, the state file counts %d" %
                                        (name, len(lines), messages))
                    for n, line in enumerate(lines, 1):
                        try:
                            if not isinstance(json.loads(line), dict):
                                raise ValueError("not an object")
                        except ValueError:
                            problems.append("%s: conversation line %d is not a JSON object" % (name, n))
                            break

    for m in marks:
        words = m.split()
        if len(words) < 3:
            continue
        kind, task = words[0], words[1]
        st = states.get(task)
        d = os.path.join(tasks, task)
        gitdir = os.path.join(d, "ledger.git")
        if kind == "step":
            step = int(words[2])
            commit = words[3] if len(words) > 3 else None
            if st is None:
                problems.append("step %d of %s was announced, its state file is gone" % (step, task))
                continue
            have = int((st.get("progress") or {}).get("step", 0))
            if have < step:
                problems.append("step %d of %s was announced, the state file says step %d" % (step, task, have))
            if commit and not whole_history(gitdir, commit):
                problems.append("step %d of %s was announced with commit %s, which is not whole" % (step, task, commit))
        elif kind == "delivered":
            commit = words[2]
            tip = git(gitdir, "rev-parse", "--verify", "-q", "refs/heads/agentfab/" + task)
            if tip.returncode != 0 or tip.stdout.strip() != commit or not whole_history(gitdir, commit):
                problems.append("%s was delivered at %s, the branch is at %s" %
                                (task, commit, tip.stdout.strip() or "nothing"))
        elif kind == "state" and words[2] in FINAL_STATES:
            if st is None or st.get("state") != words[2]:
                problems.append("%s was announced %s, the state file says %s" %
                                (task, words[2], st.get("state") if st else "nothing"))


def mount_and_check(img, mnt, marks):
    """Mounts img (a new file each time: mount -o loop would reuse a loop
    device still bound to an earlier image of the same name, and read its
    stale cache) on a loop device of its own, checks, and lets go."""
    problems = []
    r = subprocess.run(["losetup", "--find", "--show", img], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        return ["no loop device: " + r.stdout.strip()]
    dev = r.stdout.strip()
    try:
        r = subprocess.run(["mount", "-t", "ext4", dev, mnt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode != 0:
            return ["the file system does not mount: " + r.stdout.strip()]
        try:
            check_image(mnt, marks, problems)
        finally:
            if subprocess.run(["umount", mnt]).returncode != 0:
                subprocess.run(["umount", "-l", mnt])
    finally:
        subprocess.run(["losetup", "-d", dev])
    return problems


def copy_image(src, dst):
    if os.path.exists(dst):
        os.unlink(dst)
    subprocess.run(["cp", "--sparse=always", src, dst], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--random", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-points", type=int, default=0)
    ap.add_argument("--only-marks", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--control", action="store_true")
    a = ap.parse_args()

    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    sectorsize, entries = read_log(a.log)
    flushes = [e.index for e in entries if e.is_flush]
    marks = [e for e in entries if e.mark is not None]

    # A crash point: (position, base flush, kept writes after it, kind).
    # The image holds every write before the flush at `base` (or before
    # nothing: -1), and those of `kept`; the marks that count lie before
    # `position`.
    points = []
    bounds = [-1] + flushes + [len(entries)]

    def last_flush_before(i):
        f = -1
        for x in flushes:
            if x < i:
                f = x
            else:
                break
        return f

    for m in marks:
        points.append((m.index, last_flush_before(m.index), (), "mark"))
    if not a.only_marks:
        for f in flushes:
            points.append((f, f, (), "flush"))
        for lo, hi in zip(bounds, bounds[1:]):
            writes = [i for i in range(lo + 1, hi) if entries[i].is_write or entries[i].flags & LOG_DISCARD_FLAG]
            if not writes:
                continue
            for _ in range(a.random):
                j = rnd.choice(writes)
                points.append((j + 1, lo, tuple(i for i in writes if i <= j), "prefix"))
                kept = tuple(i for i in writes if rnd.random() < 0.5)
                points.append((hi, lo, kept, "subset"))

    # The same image twice is checked once.
    seen = set()
    unique = []
    for p in sorted(points, key=lambda p: (p[0], p[1], p[3] != "mark")):
        key = (p[1], p[2])
        if p[3] != "mark" and key in seen:
            continue
        seen.add(key)
        unique.append(p)
    if a.max_points and len(unique) > a.max_points:
        keep = [p for p in unique if p[3] == "mark"]
        rest = [p for p in unique if p[3] != "mark"]
        room = max(a.max_points - len(keep), 0)
        if room and rest:
            step = len(rest) / room
            keep += [rest[int(k * step)] for k in range(min(room, len(rest)))]
        unique = sorted(keep, key=lambda p: (p[0], p[1], p[3] != "mark"))

    os.makedirs(a.work, exist_ok=True)
    durable = os.path.join(a.work, "durable.img")
    scratch = os.path.join(a.work, "scratch.img")
    mnt = tempfile.mkdtemp(prefix="mnt.", dir=a.work)
    subprocess.run(["cp", "--sparse=always", a.base, durable], check=True)
    image = Image(durable, a.log, sectorsize)
    applied = -1      # every write up to and including this index is in durable.img

    failed = 0
    counts = {}
    acks = set()
    for pos, base, kept, kind in unique:
        while applied < base:
            applied += 1
            e = entries[applied]
            if e.is_write or e.flags & LOG_DISCARD_FLAG:
                image.apply(e)
        os.fsync(image.fd)
        copy_image(durable, scratch)
        s = Image(scratch, a.log, sectorsize)
        for i in kept:
            s.apply(entries[i])
        s.close()
        known = [m.mark for m in marks if m.index < pos]
        for m in known:
            acks.add(m)
        problems = mount_and_check(scratch, mnt, known)
        counts[kind] = counts.get(kind, 0) + 1
        if problems:
            failed += 1
            print("crash point at entry %d (%s, after flush %d, %d later writes kept), %d announcements before it:" %
                  (pos, kind, base, len(kept), len(known)))
            for p in problems[:8]:
                print("    " + p)
        elif a.verbose:
            print("crash point at entry %d (%s): whole, %d announcements before it" % (pos, kind, len(known)))
    image.close()
    control_failed = False

    # The control: the image at the announcement of the step before the
    # last one, as if the last one had been announced already. The check
    # must find it missing, or it could not find anything.
    step_marks = [m for m in marks if m.mark.startswith("step ")]
    if a.control and len(step_marks) >= 2:
        before, claimed = step_marks[-2], step_marks[-1]
        base = last_flush_before(before.index)
        copy_image(a.base, scratch)
        s = Image(scratch, a.log, sectorsize)
        for e in entries[:base + 1]:
            if e.is_write or e.flags & LOG_DISCARD_FLAG:
                s.apply(e)
        s.close()
        problems = mount_and_check(scratch, mnt, [m.mark for m in marks if m.index <= claimed.index])
        print("control: %s (the image at '%s', claiming '%s'%s)" %
              ("caught" if problems else "NOT caught", before.mark, claimed.mark,
               ": " + problems[0] if problems else ""))
        control_failed = not problems
    elif a.control:
        print("control: NOT made (fewer than two steps announced)")
        control_failed = True
    os.unlink(scratch)
    os.unlink(durable)
    os.rmdir(mnt)

    steps = sum(1 for m in marks if m.mark.startswith("step "))
    print("log: %d entries, %d flushes, %d marks (%d steps announced)" % (len(entries), len(flushes), len(marks), steps))
    print("crash points: %d checked (%s), %d with an acknowledgement lost or a file not whole; seed %d" %
          (len(unique), ", ".join("%d %s" % (v, k) for k, v in sorted(counts.items())), failed, seed))
    return 1 if failed or control_failed else 0


if __name__ == "__main__":
    sys.exit(main())
