"""Numbers that flag their own interference: what else used the machine while a run was timed
(hvdbench/interference.py), and the report's `busy` and `unsteady` flags."""

import subprocess
import sys
import time

import pytest

from hvdbench import interference as I
from hvdbench.results.records.schema import BUSY_CPUS, LoadedRun
from hvdbench.results.stats.aggregate import FLAGS, ScalingRow, scaling_rows


def reading(machine, machine_s, own_s, window_s=2.0):
    return {"machine": machine, "machine_s": machine_s, "own_s": own_s, "window_s": window_s}


def test_other_work_is_the_machine_time_the_ranks_did_not_spend_on_the_busiest_machine():
    # Two ranks on machine a (3.0 busy s, 2.6 theirs: 0.2 cores of other work over 2 s); one on b
    # (2.0 busy s, 0.4 theirs: 0.8 cores).
    readings = [reading("a", 3.0, 1.3), reading("a", 2.95, 1.3), reading("b", 2.0, 0.4)]
    assert I.other_cpus(readings) == pytest.approx(0.8)
    # The nodes of an emulated cluster are one machine: all ranks' time is subtracted once.
    assert I.other_cpus([reading("m", 4.0, 1.9), reading("m", 4.0, 1.9)]) == pytest.approx(0.1)
    assert I.other_cpus([reading("m", 1.0, 1.2)]) == 0.0  # clock skew never gives negative work


class OneRank:
    """The communicator of a one-rank job (allgather of one object)."""

    def allgather_object(self, obj):
        return [obj]


def test_a_spinning_neighbour_is_seen_and_the_run_itself_is_not():
    quiet = I.Neighbours()
    sum(i * i for i in range(3_000_000))  # the run's own work is not "other"
    own = quiet.stop(OneRank())
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"])
    try:
        time.sleep(0.3)
        watch = I.Neighbours()
        time.sleep(1.5)
        busy = watch.stop(OneRank())
    finally:
        spinner.kill()
        spinner.wait()
    assert busy["other_cpus"] >= BUSY_CPUS  # a whole core spinning, minus what it lost to others
    assert busy["other_cpus"] > own["other_cpus"] - 1.0  # its own loop did not count against it
    assert busy["other_gpu_procs"] is None  # no GPU


def run(layout, throughput, **kw):
    nodes, gpus = map(int, layout.split("x"))
    fields = dict(model="resnet50", flavor="debug", framework="torch", mode="throughput", batch_per_gpu=32,
                  world_size=nodes * gpus, nodes=nodes, gpus_per_node=gpus, layout=layout, devices="cpu",
                  throughput=throughput, step_time_mean_s=0.02, step_time_std_s=0.001)
    return LoadedRun(**{**fields, **kw})


def test_the_report_flags_busy_and_unsteady_layouts_and_says_why():
    runs = [run("1x1", 64.0, other_cpus=1.1, step_time_std_s=0.026), run("1x1", 66.0, other_cpus=0.0),
            run("1x2", 938.0, other_cpus=0.1), run("1x2", 940.0, other_cpus=0.05)]
    rows = {r.layout: r for r in scaling_rows(runs)}
    assert rows["1x1"].other_cpus == 1.1 and rows["1x1"].step_cv == pytest.approx(1.3)
    assert set(rows["1x1"].flags.split(";")) == {"busy", "unsteady"}
    assert set(rows["1x2"].flags.split(";")) == {"superlinear"}
    assert "other_cpus" in ScalingRow.columns() and "step_cv" in ScalingRow.columns()
    assert "require-idle" in FLAGS["busy"]


def test_other_processes_on_the_gpus_flag_a_row_too():
    rows = scaling_rows([run("1x1", 100.0, other_cpus=0.0, other_gpu_procs=2)])
    assert rows[0].flags == "busy"


def test_busy_now_measures_this_machine():
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 2: pass"])
    try:
        time.sleep(0.2)
        assert I.busy_now(1.0) >= BUSY_CPUS
    finally:
        spinner.kill()
        spinner.wait()
