"""One sshd per node, and the ssh client set-up that reaches them, all inside the cluster's state dir.

Nothing here touches the user's ~/.ssh or the system's ssh configuration:
- each node's sshd runs from its own config (state/NODE/sshd_config), listens only on the node's
  address, and accepts only the cluster's client key, only from the cluster's subnet;
- the client side is state/ssh_config (identity, and a known_hosts file pre-seeded with the host keys
  generated here, so host keys are checked, not accepted blindly), used through the wrapper
  state/bin/ssh (`exec /usr/bin/ssh -F state/ssh_config "$@"`). Launchers find that wrapper first on
  PATH: horovodrun (Gloo) runs `ssh HOST ...` and Open MPI's rsh launcher runs `ssh`, and neither can
  be given an ssh config file otherwise.

A node's sshd is started, with its own hostname (a UTS namespace), by

    ip netns exec hvd-node1 unshare --uts -- PYTHON -m hvdbench.cluster.nodeinit hvd-node1 \\
        /usr/sbin/sshd -D -f STATE/hvd-node1/sshd_config -E STATE/hvd-node1/sshd.log

where every step execs the next, so the process id we record is sshd's own.
"""

import shlex
import socket
import sys
from pathlib import Path

from hvdbench.cluster.blueprint import ClusterPlan, Node

SSH_PORT = 22  # each node has its own network namespace, so every sshd can have the usual port
CLIENT_KEY = "id_ed25519"


def keygen_argv(path: Path, comment: str) -> list[str]:
    return ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)]


def node_dir(plan: ClusterPlan, node: Node) -> Path:
    return plan.state_dir / node.name


def sshd_config_text(plan: ClusterPlan, node: Node) -> str:
    d = node_dir(plan, node)
    return "\n".join([
        f"# hvdbench cluster {plan.name}: sshd of node {node.name} (written by `hvdbench cluster up`)",
        f"ListenAddress {node.address}:{SSH_PORT}",
        f"HostKey {d / 'ssh_host_ed25519_key'}",
        f"AuthorizedKeysFile {plan.state_dir / 'authorized_keys'}",
        "PidFile none",
        "AllowUsers root",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PermitUserEnvironment no",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "PermitTunnel no",
        # horovodrun opens one ssh session per slot at once; sshd's default drops some beyond 10.
        "MaxStartups 256",
        "MaxSessions 256",
        "",
    ])


def authorized_keys_text(plan: ClusterPlan, public_key: str) -> str:
    # Only from the cluster's own subnet (the launcher reaches the nodes from the bridge's address).
    return f'from="{plan.subnet}",no-port-forwarding,no-agent-forwarding,no-X11-forwarding {public_key.strip()}\n'


def known_hosts_text(plan: ClusterPlan, host_keys: dict[str, str]) -> str:
    """host_keys: node name -> 'ssh-ed25519 AAAA...' (the .pub file's first two fields)."""
    return "".join(f"{n.name},{n.address} {' '.join(host_keys[n.name].split()[:2])}\n" for n in plan.nodes)


def ssh_config_text(plan: ClusterPlan) -> str:
    hosts = " ".join([n.name for n in plan.nodes] + [n.address for n in plan.nodes])
    return "\n".join([
        f"# hvdbench cluster {plan.name}: ssh client settings, used through {plan.state_dir / 'bin' / 'ssh'}",
        f"Host {hosts}",
        "    User root",
        f"    Port {SSH_PORT}",
        f"    IdentityFile {plan.state_dir / CLIENT_KEY}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {plan.state_dir / 'known_hosts'}",
        "    GlobalKnownHostsFile /dev/null",
        "    StrictHostKeyChecking yes",
        "    BatchMode yes",
        "    ConnectTimeout 10",
        "    LogLevel ERROR",
        "",
    ])


def ssh_wrapper_text(ssh_bin: str, config: Path) -> str:
    # Both paths are ours (an absolute program path and the state dir); quoted all the same.
    return f'#!/bin/sh\nexec {shlex.quote(ssh_bin)} -F {shlex.quote(str(config))} "$@"\n'


def sshd_argv(plan: ClusterPlan, node: Node, sshd_bin: str, python: str = sys.executable) -> list[str]:
    d = node_dir(plan, node)
    return ["ip", "netns", "exec", node.name, "unshare", "--uts", "--",
            python, "-m", "hvdbench.cluster.nodeinit", node.name,
            sshd_bin, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")]


def ssh_banner(address: str, port: int = SSH_PORT, timeout: float = 2.0) -> str | None:
    """The server's identification line ('SSH-2.0-OpenSSH_9.2p1 ...') or None if nothing answers."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            s.settimeout(timeout)
            line = s.recv(256).split(b"\r\n")[0].decode("ascii", "replace")
    except OSError:
        return None
    return line if line.startswith("SSH-") else None
