"""Give a freshly unshared UTS namespace its node's hostname, then become the given program.

    python -m hvdbench.cluster.nodeinit HOSTNAME PROGRAM [ARGS...]

Run by `hvdbench cluster up` under `ip netns exec NODE unshare --uts --` so that each node's sshd,
and everything started through it, sees its own hostname (Open MPI and Horovod tell nodes apart by
hostname). No shell is involved: the hostname and the program are plain arguments.
"""

import os
import re
import socket
import sys


def main(argv: list[str]) -> None:
    if len(argv) < 2 or not re.fullmatch(r"[a-z][a-z0-9-]{0,62}", argv[0]) or not os.path.isabs(argv[1]):
        sys.exit("usage: python -m hvdbench.cluster.nodeinit HOSTNAME /ABSOLUTE/PROGRAM [ARGS...]")
    socket.sethostname(argv[0])
    os.execv(argv[1], argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
