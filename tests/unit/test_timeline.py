"""Horovod's timeline summarised (hvdbench/train/timeline.py) on a small hand-made timeline whose
answers are known: negotiation and allreduce as wall-time unions, cycles that carried allreduces
and their fused bytes."""

import json

import pytest

from hvdbench.errors import DatasetError
from hvdbench.train import timeline as T


def op(pid, name, start, end, args=None, inner=()):
    events = [{"ph": "B", "name": name, "ts": start, "pid": pid}]
    for iname, istart, iend in inner:
        events += [{"ph": "B", "name": iname, "ts": istart, "pid": pid}, {"ph": "E", "ts": iend, "pid": pid}]
    return events + [{"ph": "E", "ts": end, "pid": pid, **({"args": args} if args else {})}]


def two_steps():
    cycle = lambda ts: {"ph": "i", "name": "CYCLE_START", "ts": ts, "s": "g"}  # noqa: E731
    a = {"dtype": "float32", "shape": "[256, 1024]"}  # 1 MiB
    b = {"dtype": "float16", "shape": "[512]"}  # 1 KiB
    return [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "allreduce.fc.weight"}},
        cycle(0),
        *op(1, "NEGOTIATE_ALLREDUCE", 100, 400), *op(2, "NEGOTIATE_ALLREDUCE", 300, 500),  # union 400 µs
        cycle(1000),
        *op(1, "ALLREDUCE", 1100, 1900, a, inner=[("MEMCPY_IN_FUSION_BUFFER", 1100, 1200)]),
        *op(2, "ALLREDUCE", 1150, 2000, b),  # same cycle: fused with it; union 900 µs
        cycle(3000),
        *op(1, "NEGOTIATE_ALLREDUCE", 3100, 3200),
        cycle(4000),
        *op(1, "ALLREDUCE", 4100, 4400, a),
        cycle(5000),
        *op(2, "ALLREDUCE", 5100, 5200, b),
        *op(3, "BROADCAST", 5300, 9000),  # not an allreduce
    ]


def test_the_summary_of_a_known_timeline(tmp_path):
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(two_steps()))
    s = T.summarise(path, steps=2)
    assert s["timeline_negotiate_ms"] == pytest.approx((400 + 100) / 1e3 / 2)
    assert s["timeline_allreduce_ms"] == pytest.approx((900 + 300 + 100) / 1e3 / 2)
    assert s["timeline_cycles_per_step"] == pytest.approx(3 / 2)
    fused = [(1 << 20) + 1024, 1 << 20, 1024]
    assert s["timeline_fused_mib"] == pytest.approx(sum(fused) / 3 / 2**20)


def test_a_file_cut_off_mid_write_is_read_up_to_its_last_whole_event(tmp_path):
    text = json.dumps(two_steps())
    path = tmp_path / "timeline.json"
    path.write_text(text[:-1] + ",")  # no closing bracket, a trailing comma (a rank killed mid-write)
    assert T.read_events(path) == two_steps()
    path.write_text(text[: text.index('"ALLREDUCE"') + 5])  # mid-event
    events = T.read_events(path)
    assert events and events == two_steps()[: len(events)]


def test_no_allreduce_gives_empty_figures_and_garbage_is_named(tmp_path):
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(op(1, "BROADCAST", 0, 10)))
    assert T.summarise(path, steps=5) == dict.fromkeys(T.COLUMNS)
    path.write_text("{not json")
    with pytest.raises(DatasetError, match="timeline.json: not a Horovod timeline"):
        T.read_events(path)


def test_unions_and_tensor_bytes():
    assert T.union_us([(0, 10), (5, 20), (30, 40), (35, 36)]) == 30
    assert T.tensor_bytes({"dtype": "float16", "shape": "[3, 4]"}) == 24
    assert T.tensor_bytes({"dtype": "float32", "shape": "[]"}) == 4  # a scalar
