"""Horovod's timeline, read for the user: a few numbers per step instead of thousands of events.

    hvdbench train resnet50 --synthetic --steps 50 --horovod-timeline --out runs/r1
    horovodrun -np 4 -H a:2,b:2 hvdbench train bert --synthetic --steps 50 --horovod-timeline --out runs/r2
    ->  runs/r1/timeline.json (Horovod's own file, for chrome://tracing or Perfetto) and, in the
        record: timeline_negotiate_ms, timeline_allreduce_ms, timeline_cycles_per_step, timeline_fused_mib

    summary = summarise(Path("runs/r1/timeline.json"), steps=50)

(Named --horovod-timeline, not --timeline: horovodrun's argument parser takes any prefix of its
own --timeline-filename anywhere on its command line, the worker's arguments included.)

The worker starts Horovod's dynamic timeline (HOROVOD_TIMELINE=DYNAMIC, hvd.start_timeline with
cycle marks) when the timed window opens and stops it when it closes, so the file holds the timed
steps only. Rank 0's Horovod writes it: a Chrome-trace JSON array where every tensor is a "process"
(pid) whose name is the tensor's, each operation a begin/end pair (NEGOTIATE_ALLREDUCE while the
ranks agree that the tensor is ready everywhere; ALLREDUCE around the fusion-buffer copies and the
MPI/Gloo/NCCL call; the end event carries dtype and shape), and CYCLE_START instants mark Horovod's
background cycles (HOROVOD_CYCLE_TIME apart when idle). Per timed step:

- negotiate_ms: wall time during which some tensor was being negotiated (the union of the
  intervals, not their sum: tensors negotiate side by side);
- allreduce_ms: wall time during which some allreduce ran (fusion copies and the collective);
- cycles_per_step: background cycles that started at least one allreduce (one when every gradient
  is fused into one buffer; more when backward produces them over several cycles or the fusion
  buffer, HOROVOD_FUSION_THRESHOLD, is full);
- fused_mib: the mean bytes those cycles allreduced (MiB): how full the fusion buffer was.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hvdbench.errors import DatasetError

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8, "int16": 2,
               "uint8": 1, "int8": 1, "bool": 1}
COLUMNS = ("timeline_negotiate_ms", "timeline_allreduce_ms", "timeline_cycles_per_step", "timeline_fused_mib")


def read_events(path: Path) -> list[dict]:
    """The timeline's events. A file cut off mid-write (a rank killed) lacks its closing bracket,
    and may end in a comma: what was complete is read."""
    text = Path(path).read_text().strip()
    if not text:
        return []
    if not text.startswith("["):
        raise DatasetError(f"{path}: not a Horovod timeline (a JSON array of trace events)")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Keep the events up to the last complete one: "[{...},{...},{..." -> "[{...},{...}]".
        cut = text.rstrip(",")
        for end in _object_ends(cut):
            try:
                return json.loads(cut[:end] + "]")
            except json.JSONDecodeError:
                continue
        raise DatasetError(f"{path}: not a Horovod timeline (no complete event)") from None


def _object_ends(text: str):
    """Offsets just past each '}' from the last back (candidate ends of the last whole event)."""
    end = len(text)
    while (end := text.rfind("}", 0, end)) >= 0:
        yield end + 1


def operations(events: list[dict]) -> list[dict]:
    """Every completed begin/end pair: {pid, name, start, end (µs), args (of the end event)}."""
    stacks: dict[int, list[dict]] = {}
    done = []
    for e in events:
        ph = e.get("ph")
        if ph == "B":
            stacks.setdefault(e.get("pid", 0), []).append(e)
        elif ph == "E":
            stack = stacks.get(e.get("pid", 0))
            if stack:
                b = stack.pop()
                done.append({"pid": b.get("pid", 0), "name": b.get("name", ""), "start": b["ts"], "end": e["ts"],
                             "args": e.get("args") or {}, "depth": len(stack)})
    return done


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def tensor_bytes(args: dict) -> int:
    """Bytes of an operation's tensor from its end event's dtype and shape ("[64, 3, 7, 7]")."""
    shape = str(args.get("shape", "")).strip("[] ")
    dims = [int(d) for d in shape.replace(" ", "").split(",") if d] if shape else []
    return math.prod(dims) * DTYPE_BYTES.get(str(args.get("dtype", "")), 4)


def summarise(path: Path, steps: int) -> dict[str, float | None]:
    """The COLUMNS for a timeline covering `steps` timed steps (None where it shows no allreduce)."""
    events = read_events(path)
    ops = operations(events)
    top = [op for op in ops if op["depth"] == 0]
    negotiate = [(op["start"], op["end"]) for op in top if op["name"] == "NEGOTIATE_ALLREDUCE"]
    allreduce = [op for op in top if op["name"] == "ALLREDUCE"]
    if not allreduce or steps < 1:
        return dict.fromkeys(COLUMNS)
    cycles = sorted(e["ts"] for e in events if e.get("ph") == "i" and e.get("name") == "CYCLE_START")
    per_cycle: dict[int, int] = {}
    import bisect

    for op in allreduce:
        cycle = bisect.bisect_right(cycles, op["start"]) - 1  # the cycle the op started in (-1: before any mark)
        per_cycle[cycle] = per_cycle.get(cycle, 0) + tensor_bytes(op["args"])
    return {"timeline_negotiate_ms": union_us(negotiate) / 1e3 / steps,
            "timeline_allreduce_ms": union_us([(op["start"], op["end"]) for op in allreduce]) / 1e3 / steps,
            "timeline_cycles_per_step": len(per_cycle) / steps,
            "timeline_fused_mib": sum(per_cycle.values()) / len(per_cycle) / 2**20}
