"""Bring an emulated cluster up, report on it, and take it down again.

    hvdbench cluster up --nodes 2 --slots 1 --bandwidth 100mbit     -> up(make_plan(...))
    hvdbench cluster status                                        -> status("hvd")
    hvdbench cluster down                                          -> down("hvd")

`up` checks everything it can before it creates anything (root, Linux, tools, free subnet, free
names, for --node-cpu a usable cpu cgroup hierarchy and free cgroup names), then records each step
in the state journal before taking it, so `down` can always undo what exists, including after an
interrupted `up`. If a step fails, `up` undoes what it made itself.
"""

import os
import platform
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from hvdbench.cluster import cgroup, netns, runner, shaping, slurm, sshd
from hvdbench.cluster.blueprint import CPU_PERIOD_US, STATE_ROOT, ClusterError, ClusterPlan, state_dir_for
from hvdbench.cluster.state import (
    ETC_HOSTS,
    Journal,
    make_state_dir,
    rewrite_etc_hosts,
    with_hosts_block,
    without_hosts_block,
)
from hvdbench.files import atomic_write_text
from hvdbench.launchers.guard import wait_gone

ROOT_MESSAGE = "hvdbench cluster needs root (network namespaces); run as root or use local layouts"
# tool -> Debian package that provides it
TOOLS = {"ip": "iproute2", "tc": "iproute2", "sshd": "openssh-server", "ssh": "openssh-client",
         "ssh-keygen": "openssh-client", "unshare": "util-linux"}
SSHD_START_TIMEOUT_S = 15.0
SLURM_START_TIMEOUT_S = 30.0  # until every node is idle in sinfo
SLURM_DRAIN_TIMEOUT_S = 20.0  # `down`: until the cancelled jobs are gone
# Test hook: crash (SIGKILL ourselves) right after the named step, to leave a half-made cluster.
CRASH_HOOK = "HVDBENCH_CLUSTER_INJECT_CRASH"


def preflight(euid: int | None = None, system: str | None = None, which=shutil.which,
              with_slurm: bool = False) -> dict[str, str]:
    """Refuse, in one line, where a cluster cannot be made; else return tool -> absolute path."""
    system = platform.system() if system is None else system
    if system != "Linux":
        raise ClusterError(f"hvdbench cluster needs Linux (network namespaces); this is {system}")
    if (os.geteuid() if euid is None else euid) != 0:
        raise ClusterError(ROOT_MESSAGE)
    needed = {**TOOLS, **(slurm.TOOLS if with_slurm else {})}
    tools = {t: which(t, path=runner.search_path()) for t in needed}
    missing = sorted(t for t, p in tools.items() if not p)
    if missing:
        packages = " ".join(sorted({needed[t] for t in missing}))
        raise ClusterError(f"hvdbench cluster needs {', '.join(missing)}, not found on PATH or in "
                           f"/usr/sbin; install: {packages}")
    return {t: os.path.abspath(p) for t, p in tools.items()}


def check_free(plan: ClusterPlan, hierarchy: cgroup.Hierarchy | None = None) -> None:
    """Refuse a subnet that overlaps anything on this machine, names that already exist (a node's
    cgroup too: `down` removes it, so it must be ours), or a hostfile path that holds a file (`down`
    removes the hostfile, so it must be ours)."""
    if plan.hostfile.exists() and not plan.hostfile.is_relative_to(plan.state_dir):
        raise ClusterError(f"--hostfile {plan.hostfile} already exists; remove it or pick another path")
    used = netns.subnet_conflicts(plan.subnet, runner.run_json(netns.list_addrs()),
                                  runner.run_json(netns.list_routes()))
    if used:
        raise ClusterError(f"--subnet {plan.subnet} is in use on this machine ({'; '.join(used)}); "
                           "pick another with --subnet")
    taken = netns.name_conflicts(plan, runner.run_json(netns.list_netns()), runner.run_json(netns.list_links()))
    if hierarchy is not None:
        taken += [f"cgroup {f}" for n in plan.nodes if n.cpu_quota_us is not None
                  and (f := cgroup.node_cgroup(hierarchy, n)).exists()]
    if taken:
        raise ClusterError(f"cluster name {plan.name!r} clashes with existing {', '.join(taken)}; "
                           "pick another --name (or run `hvdbench cluster down` for it)")


def _crash_point(step: str) -> None:
    if os.environ.get(CRASH_HOOK) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def up(plan: ClusterPlan, wait_s: float = SSHD_START_TIMEOUT_S) -> Journal:
    tools = preflight(with_slurm=plan.slurm)
    hierarchy = cgroup.find_hierarchy() if cgroup.plan_needs_one(plan) else None
    check_free(plan, hierarchy)
    make_state_dir(plan.state_dir)
    journal = Journal(plan)
    journal.save()
    try:
        _build_network(plan, journal)
        _crash_point("network")
        groups = _make_cgroups(plan, journal, hierarchy)
        _start_sshds(plan, journal, tools, wait_s, groups)
        _crash_point("sshd")
        if plan.slurm:
            _start_slurm(plan, journal, tools, groups)
            _crash_point("slurm")
        journal.record("etc_hosts", path=str(ETC_HOSTS))
        rewrite_etc_hosts(lambda text: with_hosts_block(text, plan))
        if not plan.hostfile.is_relative_to(plan.state_dir):
            journal.record("hostfile", path=str(plan.hostfile))
        write_hostfile(plan)
        journal.set_phase("up")
    except BaseException as e:
        try:
            _undo(journal)
        except ClusterError as undo_error:
            raise ClusterError(f"{e}; undoing the partial cluster failed too: {undo_error}") from e
        if isinstance(e, OSError):
            raise ClusterError(f"cluster {plan.name!r} not created (undone): {e.filename or ''}: "
                               f"{e.strerror or e}") from e
        raise
    return journal


def _build_network(plan: ClusterPlan, journal: Journal) -> None:
    journal.record("bridge", name=plan.bridge)
    for argv in netns.bridge_up(plan):
        runner.run(argv)
    if not netns.NETNS_ETC.exists():
        journal.record("dir", path=str(netns.NETNS_ETC))
        netns.NETNS_ETC.mkdir(mode=0o755)
    for node in plan.nodes:
        journal.record("netns", name=node.name)
        runner.run(netns.netns_add(node))
        journal.record("veth", name=node.host_veth)
        for argv in netns.node_link_up(plan, node):
            runner.run(argv)
        etc = netns.NETNS_ETC / node.name
        journal.record("netns_etc", path=str(etc))
        etc.mkdir(parents=True, exist_ok=True)
        atomic_write_text(etc / "hosts", netns.node_hosts_text(plan, node))
        atomic_write_text(etc / "resolv.conf", netns.NODE_RESOLV_TEXT)
        for argv in shaping.shape_node(plan, node):
            proc = runner.run(argv, check=False)
            if proc.returncode != 0 and "netem" in argv and shaping.NETEM_MISSING in proc.stderr:
                raise ClusterError("--latency needs the netem queueing discipline, which this kernel "
                                   "lacks (CONFIG_NET_SCH_NETEM); shape with --bandwidth alone")
            if proc.returncode != 0:
                raise ClusterError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.returncode}")


def _make_cgroups(plan: ClusterPlan, journal: Journal, hierarchy: cgroup.Hierarchy | None) -> dict[str, Path]:
    """The CPU-quota cgroup of each node given --node-cpu (node name -> its folder), each journalled
    before it is made; the node's sshd and slurmd start in it."""
    groups = {}
    for node in plan.nodes:
        if node.cpu_quota_us is None or hierarchy is None:
            continue
        folder = cgroup.node_cgroup(hierarchy, node)  # free: check_free saw to it
        journal.record("cgroup", node=node.name, path=str(folder), version=hierarchy.version)
        groups[node.name] = cgroup.create(hierarchy, node, CPU_PERIOD_US)
    return groups


def _in_cgroup(argv: list[str], folder: Path | None, tools: dict[str, str]) -> list[str]:
    """A node's daemon (`ip netns exec NODE ...`) started in the node's cgroup where it has one."""
    return argv if folder is None else cgroup.started_in(folder, [tools[argv[0]], *argv[1:]])


def _start_sshds(plan: ClusterPlan, journal: Journal, tools: dict[str, str], wait_s: float,
                 groups: dict[str, Path]) -> None:
    d = plan.state_dir
    runner.run(sshd.keygen_argv(d / sshd.CLIENT_KEY, f"hvdbench-cluster-{plan.name}"))
    host_keys = {}
    for node in plan.nodes:
        nd = sshd.node_dir(plan, node)
        nd.mkdir(mode=0o700)
        runner.run(sshd.keygen_argv(nd / "ssh_host_ed25519_key", node.name))
        host_keys[node.name] = (nd / "ssh_host_ed25519_key.pub").read_text()
        (nd / "sshd_config").write_text(sshd.sshd_config_text(plan, node))
    client_pub = (d / f"{sshd.CLIENT_KEY}.pub").read_text()
    (d / "authorized_keys").write_text(sshd.authorized_keys_text(plan, client_pub))
    (d / "known_hosts").write_text(sshd.known_hosts_text(plan, host_keys))
    (d / "ssh_config").write_text(sshd.ssh_config_text(plan))
    (d / "bin").mkdir(mode=0o700)
    wrapper = d / "bin" / "ssh"
    wrapper.write_text(sshd.ssh_wrapper_text(tools["ssh"], d / "ssh_config"))
    wrapper.chmod(0o700)
    # sshd's privilege-separation directory; left in place by `down` (the system's sshd uses it too).
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    procs = {}
    for node in plan.nodes:
        nd = sshd.node_dir(plan, node)
        proc = runner.spawn(_in_cgroup(sshd.sshd_argv(plan, node, tools["sshd"]), groups.get(node.name), tools),
                            nd / "sshd.log")
        procs[node.name] = proc
        journal.record("sshd", node=node.name, pid=proc.pid,
                       create_time=psutil.Process(proc.pid).create_time(), config=str(nd / "sshd_config"))
    deadline = time.monotonic() + wait_s
    for node in plan.nodes:
        while not sshd.ssh_banner(node.address, timeout=1.0):
            log = sshd.node_dir(plan, node) / "sshd.log"
            if procs[node.name].poll() is not None or time.monotonic() > deadline:
                tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
                raise ClusterError(f"sshd of {node.name} did not answer on {node.address}:{sshd.SSH_PORT} "
                                   f"({tail[0] if tail else 'no output'}; see {log})")
            time.sleep(0.1)


def _start_slurm(plan: ClusterPlan, journal: Journal, tools: dict[str, str], groups: dict[str, Path]) -> None:
    """munged, slurmctld, then one slurmd per node; returns once every node is idle in sinfo."""
    import socket
    import sys

    slurm.write_files(plan, socket.gethostname())
    daemons = [("munged", slurm.munged_argv(plan, tools["munged"]), slurm.munge_dir(plan) / "munged.out",
                str(slurm.munge_dir(plan) / "munge.key")),
               ("slurmctld", slurm.slurmctld_argv(plan, tools["slurmctld"]), slurm.slurm_dir(plan) / "slurmctld.out",
                str(slurm.conf_path(plan)))]
    daemons += [(f"slurmd of {node.name}", _in_cgroup(slurm.slurmd_argv(plan, node, tools["slurmd"], sys.executable),
                                                     groups.get(node.name), tools),
                 sshd.node_dir(plan, node) / "slurmd.out", str(slurm.conf_path(plan))) for node in plan.nodes]
    for name, argv, log, marker in daemons:
        if name == "slurmctld":
            _wait_for(lambda: slurm.munge_socket(plan).exists(), 10, "munged's socket", log=slurm.munge_dir(plan) /
                      "munged.out")
        proc = runner.spawn(argv, log)
        journal.record("daemon", name=name, pid=proc.pid, create_time=psutil.Process(proc.pid).create_time(),
                       config=marker)

    def all_idle() -> bool:
        proc = slurm.client(plan, "sinfo", "-h", "-N", "-o", "%N %T")
        states = dict(line.split()[:2] for line in proc.stdout.splitlines() if len(line.split()) >= 2)
        return proc.returncode == 0 and all(states.get(n.name, "").startswith("idle") for n in plan.nodes)
    _wait_for(all_idle, SLURM_START_TIMEOUT_S, "every slurmd to register as idle",
              log=slurm.slurm_dir(plan) / "slurmctld.log")


def _wait_for(ready, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise ClusterError(f"timed out after {timeout_s:g} s waiting for {what} "
                               f"({tail[0] if tail else 'no output'}; see {log})")
        time.sleep(0.2)


def write_hostfile(plan: ClusterPlan) -> None:
    # No comment line: horovodrun's hostfile parser takes every line for a host.
    atomic_write_text(plan.hostfile, "".join(f"{n.name} slots={plan.slots}\n" for n in plan.nodes))


# ---------------------------------------------------------------------------------------------- down

def down(name: str, state_root: Path = STATE_ROOT) -> list[str]:
    """Remove the cluster `name`; returns what was done (empty when there was no such cluster)."""
    journal = Journal.load(state_dir_for(name, state_root))
    if journal is None:
        return []
    preflight()
    return _undo(journal)


def _cancel_jobs(plan: ClusterPlan) -> list[str]:
    """Cancel every job of the cluster's own Slurm (its partition, through its own SLURM_CONF) and
    wait until they are gone, so no job step outlives its slurmd."""
    if not slurm.conf_path(plan).exists():
        return []

    def jobs() -> list[str]:
        proc = slurm.client(plan, "squeue", "-h", "-p", slurm.PARTITION, "-o", "%i")
        return proc.stdout.split() if proc is not None and proc.returncode == 0 else []
    pending = jobs()
    if not pending:
        return []
    slurm.client(plan, "scancel", "-p", slurm.PARTITION)
    deadline = time.monotonic() + SLURM_DRAIN_TIMEOUT_S
    while jobs() and time.monotonic() < deadline:
        time.sleep(0.5)
    return [f"cancelled Slurm job(s) {' '.join(pending)}"]


def _undo(journal: Journal) -> list[str]:
    """Undo the journal in reverse order. Keeps going past failures, then reports them all; the state
    dir is removed only when everything is gone, so `down` can be run again."""
    done, failed = [], []
    links = {link.get("ifname") for link in runner.run_json(netns.list_links())}
    spaces = {n.get("name") for n in runner.run_json(netns.list_netns())}
    ctld = next((e for e in journal.created if e.get("name") == "slurmctld"), None)
    if ctld and _ours(ctld):  # jobs first, while the controller that can cancel them runs
        try:
            done += _cancel_jobs(journal.plan)
        except (OSError, subprocess.SubprocessError) as e:
            failed.append(f"cancelling Slurm jobs: {e}")
    for entry in reversed(journal.created):
        kind = entry["kind"]
        try:
            if kind in ("sshd", "daemon"):
                done += _stop_process(entry)
            elif kind == "etc_hosts":
                rewrite_etc_hosts(lambda text: without_hosts_block(text, journal.plan.name), Path(entry["path"]))
                done.append(f"removed the {journal.plan.name} block from {entry['path']}")
            elif kind == "hostfile":
                Path(entry["path"]).unlink(missing_ok=True)
                done.append(f"removed {entry['path']}")
            elif kind == "cgroup" and cgroup.remove(Path(entry["path"])):  # its processes were stopped above
                done.append(f"removed cgroup {entry['path']}")
            elif kind == "netns_etc":
                shutil.rmtree(entry["path"], ignore_errors=True)
            elif kind == "dir" and Path(entry["path"]).is_dir() and not any(Path(entry["path"]).iterdir()):
                Path(entry["path"]).rmdir()  # only while empty: someone else may have used it since
            elif kind in ("veth", "bridge") and entry["name"] in links:
                runner.run(netns.link_del(entry["name"]))
                done.append(f"deleted {kind} {entry['name']}")
            elif kind == "netns" and entry["name"] in spaces:
                left = runner.run(netns.netns_pids(entry["name"])).stdout.split()
                runner.run(netns.netns_del(entry["name"]))
                done.append(f"deleted network namespace {entry['name']}"
                            + (f" (processes not started by the cluster still run in it: {' '.join(left)})"
                               if left else ""))
        except (ClusterError, OSError, psutil.Error) as e:
            failed.append(f"{kind}: {e}")
    if failed:
        raise ClusterError(f"cluster {journal.plan.name!r} is only partly removed ({'; '.join(failed)}); "
                           f"state kept in {journal.plan.state_dir}")
    shutil.rmtree(journal.plan.state_dir, ignore_errors=True)
    done.append(f"removed {journal.plan.state_dir}")
    try:
        journal.plan.state_dir.parent.rmdir()  # /run/hvdbench-cluster, once no cluster is left
    except OSError:
        pass
    return done


def _ours(entry: dict) -> psutil.Process | None:
    """The recorded sshd or daemon if it still runs, checked by start time and command line (so a
    recycled process id is never taken for ours)."""
    if "pid" not in entry:
        return None
    try:
        p = psutil.Process(entry["pid"])
        if (abs(p.create_time() - entry["create_time"]) < 0.05 and entry["config"] in " ".join(p.cmdline())
                and p.status() != psutil.STATUS_ZOMBIE):
            return p
    except psutil.NoSuchProcess:
        pass
    return None


def _stop_process(entry: dict) -> list[str]:
    """Stop the recorded sshd or daemon and what it started (its descendants: a stuck rank, a job
    step of a slurmd)."""
    p = _ours(entry)
    if p is None:
        return []
    procs = [p] + p.children(recursive=True)
    for q in procs:
        try:
            q.terminate()
        except psutil.NoSuchProcess:
            pass
    alive = wait_gone(procs, 5)
    for q in alive:
        try:
            q.kill()
        except psutil.NoSuchProcess:
            pass
    wait_gone(alive, 5)
    _reap(entry["pid"])
    what = entry.get("name") or f"sshd of {entry['node']}"
    return [f"stopped {what} (pid {entry['pid']}"
            + (f" and {len(procs) - 1} processes it started)" if len(procs) > 1 else ")")]


def _reap(pid: int) -> None:
    # When `up` ran in this very process (tests, the demo), sshd is our child: collect its exit.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# -------------------------------------------------------------------------------------------- status

@dataclass
class NodeStatus:
    name: str
    address: str
    slots: int
    shaping: str
    cpu_quota: str  # as the kernel holds it: '0.33 CPU (16667/50000 us)'; 'none' without --node-cpu
    sshd_pid: int | None
    sshd_answers: bool


@dataclass
class LinkShaping:
    """A node's link as the kernel has it: the root qdisc on each end of its veth, as `tc -j -s`
    prints it (kind, options with rates in bytes/s, counters). None where that end is gone."""

    node: str
    transmit: dict | None  # the node's end, inside its namespace: what the node sends
    receive: dict | None   # the root-namespace end on the bridge (NAME-vK): what the node receives


def _load(name: str, state_root: Path) -> Journal:
    journal = Journal.load(state_dir_for(name, state_root))
    if journal is None:
        raise ClusterError(f"no cluster named {name!r} (no {state_dir_for(name, state_root)}); "
                           "start one with `hvdbench cluster up`")
    return journal


def _links(plan: ClusterPlan, spaces: set, complete: bool = True) -> list[LinkShaping]:
    """Each node's LinkShaping. Of a cluster whose `up` stopped half way (`complete` False), an end
    that tc cannot read (a namespace made, its veth not yet) is None, as a missing one is."""
    ifnames = {link.get("ifname") for link in runner.run_json(netns.list_links())}

    def read(argv):
        try:
            return shaping.root_qdisc(runner.run_json(argv))
        except ClusterError:
            if complete:
                raise
            return None
    return [LinkShaping(node.name, read(shaping.show_node_qdisc(plan, node)) if node.name in spaces else None,
                        read(shaping.show_host_qdisc(node)) if node.host_veth in ifnames else None)
            for node in plan.nodes]


def inspect_links(name: str, state_root: Path = STATE_ROOT) -> list[LinkShaping]:
    """The shaping of every node's link of the cluster `name`, both ends, read back from the kernel."""
    journal = _load(name, state_root)
    return _links(journal.plan, {n.get("name") for n in runner.run_json(netns.list_netns())})


def status(name: str, state_root: Path = STATE_ROOT) -> tuple[Journal, list[NodeStatus]]:
    journal = _load(name, state_root)
    plan = journal.plan
    spaces = {n.get("name") for n in runner.run_json(netns.list_netns())}
    links = {link.node: link for link in _links(plan, spaces, complete=journal.phase == "up")}
    pids = {e["node"]: e for e in journal.created if e["kind"] == "sshd"}
    groups = {e["node"]: e for e in journal.created if e["kind"] == "cgroup"}
    rows = []
    for node in plan.nodes:
        transmit = links[node.name].transmit
        shaped = ("absent" if node.name not in spaces else "not made" if transmit is None and journal.phase != "up"
                  else shaping.describe_qdiscs([transmit] if transmit else []))
        proc = _ours(pids[node.name]) if node.name in pids else None
        group = groups.get(node.name)
        quota = cgroup.describe(cgroup.read_quota(group["version"], Path(group["path"]))) if group else "none"
        rows.append(NodeStatus(node.name, node.address, plan.slots, shaped, quota, proc.pid if proc else None,
                               sshd.ssh_banner(node.address, timeout=1.0) is not None))
    return journal, rows
