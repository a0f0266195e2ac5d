#!/usr/bin/python3
"""no_io_uring.py PROGRAM [ARGS...]: runs PROGRAM with io_uring refused.

Loads a seccomp filter that fails io_uring_setup, io_uring_enter and
io_uring_register with EPERM (what the default profiles of containerd >= 2.0
and Docker >= 25 do), then execs PROGRAM. The filter stays on PROGRAM, its
threads and every process it starts. Needs Debian's python3-seccomp (hence
/usr/bin/python3: another python3 on PATH may lack the module).
"""

import errno
import os
import sys

try:
    import seccomp
except ImportError:
    sys.exit("no_io_uring.py: Python module seccomp missing (Debian: apt-get install python3-seccomp)")

REFUSED = ("io_uring_setup", "io_uring_enter", "io_uring_register")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: no_io_uring.py PROGRAM [ARGS...]")
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in REFUSED:
        f.add_rule(seccomp.ERRNO(errno.EPERM), name)
    f.load()
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
