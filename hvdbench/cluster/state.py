"""The cluster's record of itself: STATE_DIR/state.json, and the root namespace's /etc/hosts block.

state.json holds the plan (nodes, addresses, names, subnet, shaping) and a journal of everything
`up` created, each entry written *before* the thing is created (sshd entries right after the start,
with the pid). `down` undoes the journal in reverse, so an interrupted `up` is cleaned up the same way
as a complete one, and a thing that is already gone is simply skipped.

The root namespace resolves node names through a marked block in /etc/hosts (horovodrun and mpirun
look the hosts up from there):

    # hvdbench-cluster hvd begin
    10.213.0.2	hvd-node1
    # hvdbench-cluster hvd end

`down` removes exactly that block and leaves every other line as it was.
"""

import errno
import json
import os
from dataclasses import asdict
from pathlib import Path

from hvdbench.cluster.blueprint import ClusterError, ClusterPlan, Node, Shaping
from hvdbench.files import atomic_write_text

STATE_FILE = "state.json"
STATE_VERSION = 1
ETC_HOSTS = Path("/etc/hosts")


def plan_to_dict(plan: ClusterPlan) -> dict:
    d = asdict(plan)
    d["state_dir"], d["hostfile"] = str(plan.state_dir), str(plan.hostfile)
    return d


def plan_from_dict(d: dict) -> ClusterPlan:
    return ClusterPlan(name=d["name"], nodes=tuple(Node(**n) for n in d["nodes"]), slots=d["slots"],
                       subnet=d["subnet"], gateway=d["gateway"], bridge=d["bridge"],
                       shaping=Shaping(**d["shaping"]), state_dir=Path(d["state_dir"]),
                       hostfile=Path(d["hostfile"]), slurm=bool(d.get("slurm", False)))


class Journal:
    """state.json, rewritten atomically after every change so a crash never leaves it half-written."""

    def __init__(self, plan: ClusterPlan, phase: str = "creating", created: list[dict] | None = None):
        self.plan, self.phase, self.created = plan, phase, list(created or [])

    @property
    def path(self) -> Path:
        return self.plan.state_dir / STATE_FILE

    def record(self, kind: str, **fields) -> None:
        self.created.append({"kind": kind, **fields})
        self.save()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.save()

    def save(self) -> None:
        data = {"version": STATE_VERSION, "phase": self.phase, "plan": plan_to_dict(self.plan),
                "created": self.created}
        atomic_write_text(self.path, json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, state_dir: Path) -> "Journal | None":
        """The journal in state_dir, None when there is none (no such cluster)."""
        path = Path(state_dir) / STATE_FILE
        try:
            data = json.loads(path.read_text())
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {STATE_VERSION}")
            return cls(plan_from_dict(data["plan"]), data["phase"], data["created"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as e:
            raise ClusterError(f"{path} is not a cluster state file this hvdbench can read: {e}") from None


def make_state_dir(state_dir: Path) -> None:
    """Create the private state directory; an existing one means the cluster is (partly) up."""
    state_dir.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        state_dir.mkdir(mode=0o700)
    except FileExistsError:
        raise ClusterError(f"cluster {state_dir.name!r} already exists ({state_dir}); "
                           f"run `hvdbench cluster down --name {state_dir.name}` first") from None
    os.chmod(state_dir, 0o700)  # mkdir's mode is filtered by the umask


def _markers(name: str) -> tuple[str, str]:
    return f"# hvdbench-cluster {name} begin", f"# hvdbench-cluster {name} end"


def without_hosts_block(text: str, name: str) -> str:
    begin, end = _markers(name)
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == begin:
            inside = True
        elif inside and line.rstrip("\n") == end:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def with_hosts_block(text: str, plan: ClusterPlan) -> str:
    begin, end = _markers(plan.name)
    text = without_hosts_block(text, plan.name)
    if text and not text.endswith("\n"):
        text += "\n"
    block = [begin] + [f"{n.address}\t{n.name}" for n in plan.nodes] + [end]
    return text + "\n".join(block) + "\n"


def rewrite_etc_hosts(new_text_of, path: Path = ETC_HOSTS) -> None:
    """Replace path's content with new_text_of(old content). Atomic where possible; containers often
    bind-mount /etc/hosts, which cannot be renamed over, and there it is rewritten in place."""
    old = path.read_text()
    new = new_text_of(old)
    if new == old:
        return
    try:
        atomic_write_text(path, new)
        os.chmod(path, 0o644)
    except OSError as e:
        if e.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM):
            raise
        with open(path, "r+") as f:
            f.write(new)
            f.truncate()
