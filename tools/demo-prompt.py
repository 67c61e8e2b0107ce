#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs a command on a terminal of its own and types a password at its prompts.

    demo-prompt.py COMMAND [ARG...] < PASSWORD-LINE

For the demo: agentfabctl starts pkttyagent only when it sits on a terminal,
and pkttyagent reads the password from that terminal, never from a pipe.
So the command gets a pseudo-terminal; everything it prints is copied to
our standard output as it comes (the prompt text polkit shows included),
and the password, read from our standard input, is typed at each
"Password:" prompt. pkttyagent prints the prompt and then turns echo off
with TCSAFLUSH, which discards what was typed before: the password goes in
only once echo is off (or 5 s after the prompt, whatever the terminal
says), so it is never echoed. Exits with the command's exit status; 124
when it did not end within 60 s.
"""

import os
import pty
import select
import sys
import termios
import time

PROMPTS_MAX = 4
TIMEOUT_SEC = 60


def echo_off(fd):
    try:
        return not (termios.tcgetattr(fd)[3] & termios.ECHO)
    except termios.error:
        return False


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: demo-prompt.py COMMAND [ARG...] < PASSWORD-LINE\n")
        return 2
    password = sys.stdin.readline().rstrip("\n").encode()

    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        finally:
            os._exit(127)

    deadline = time.time() + TIMEOUT_SEC
    pending = b""           # output since the last answer, to find the next prompt
    prompt_at = None
    answered = 0
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:         # EIO: the command and its agent closed the terminal
                break
            if not data:
                break
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            pending += data
        if prompt_at is None and b"assword:" in pending:
            prompt_at = time.time()
        if prompt_at is not None and (echo_off(fd) or time.time() - prompt_at > 5):
            if answered >= PROMPTS_MAX:     # asked again and again: a wrong password
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return 1
            time.sleep(0.1)
            os.write(fd, password + b"\n")
            answered += 1
            pending, prompt_at = b"", None
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        return 124

    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
