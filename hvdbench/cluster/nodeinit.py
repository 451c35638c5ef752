"""Give a freshly unshared UTS namespace its node's hostname, then become the given program.

    python -m hvdbench.cluster.nodeinit [--bind SRC:DST] HOSTNAME PROGRAM [ARGS...]
    python -m hvdbench.cluster.nodeinit --cgroup DIR -- PROGRAM [ARGS...]

Run by `hvdbench cluster up` under `ip netns exec NODE unshare --uts --` so that each node's sshd,
and everything started through it, sees its own hostname (Open MPI and Horovod tell nodes apart by
hostname). No shell is involved: the hostname and the program are plain arguments.

`--bind SRC:DST` (under `unshare --mount`, whose mounts are private) first bind-mounts the node's
own folder SRC over DST, so daemons that expect a per-machine folder at one path (Slurm's PMIx
client folder) each see their own, as on separate machines.

`--cgroup DIR -- PROGRAM` moves this process into the cgroup DIR (its pid into DIR/cgroup.procs, v1
and v2 alike), then becomes PROGRAM: a node's sshd or slurmd, and all they start, run under the
node's CPU quota (hvdbench.cluster.cgroup). It runs before `ip netns exec`, which mounts a sysfs of
the node's network namespace over /sys and so hides the cgroup mounts under it.
"""

import os
import re
import socket
import subprocess
import sys


def main(argv: list[str]) -> None:
    if argv[:1] == ["--cgroup"]:
        if len(argv) < 4 or argv[2] != "--" or not os.path.isabs(argv[1]) or not os.path.isabs(argv[3]):
            sys.exit("usage: python -m hvdbench.cluster.nodeinit --cgroup /ABSOLUTE/DIR -- /ABSOLUTE/PROGRAM [ARGS...]")
        with open(os.path.join(argv[1], "cgroup.procs"), "w") as f:
            f.write(f"{os.getpid()}\n")
        os.execv(argv[3], argv[3:])
    if argv[:1] == ["--bind"] and len(argv) > 1:
        src, sep, dst = argv[1].partition(":")
        if not (sep and os.path.isabs(src) and os.path.isabs(dst)):
            sys.exit("--bind takes /ABSOLUTE/SRC:/ABSOLUTE/DST")
        subprocess.run(["mount", "--bind", src, dst], check=True)
        argv = argv[2:]
    if len(argv) < 2 or not re.fullmatch(r"[a-z][a-z0-9-]{0,62}", argv[0]) or not os.path.isabs(argv[1]):
        sys.exit("usage: python -m hvdbench.cluster.nodeinit HOSTNAME /ABSOLUTE/PROGRAM [ARGS...]")
    socket.sethostname(argv[0])
    os.execv(argv[1], argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
