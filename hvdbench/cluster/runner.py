"""The one place the cluster code runs commands: argv lists only, never a shell."""

import json
import os
import shutil
import subprocess
from pathlib import Path

from hvdbench.cluster.blueprint import ClusterError
from hvdbench.files import open_no_link


def search_path() -> str:
    """PATH plus the system directories: ip, tc and sshd live in /usr/sbin, which a user's PATH
    (or sudo's secure_path) may leave out."""
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])


def _resolved(argv: list[str]) -> list[str]:
    return [shutil.which(argv[0], path=search_path()) or argv[0], *argv[1:]]


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """Run argv; on failure raise ClusterError quoting the command and its last error line."""
    proc = subprocess.run(_resolved(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}").splitlines()
        raise ClusterError(f"`{' '.join(argv)}` failed: {lines[-1]}")
    return proc


def run_json(argv: list[str]):
    """Run an `ip -j` / `tc -j` command and parse its JSON (empty output is an empty list)."""
    out = run(argv).stdout.strip()
    return json.loads(out) if out else []


def spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """Start a long-lived daemon in its own session (it outlives this command); output goes to log."""
    with open_no_link(log, "ab") as out:
        return subprocess.Popen(_resolved(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
