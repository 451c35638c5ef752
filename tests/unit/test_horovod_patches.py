"""Horovod as scripts/patch_horovod.py leaves it in the builds of `make setup`:
- horovodrun's build check: whether Horovod was built with Gloo or MPI is asked once per build (a
  forked process importing the framework's extension) and kept beside the package, so a launch no
  longer pays 3 to 4 CPU-seconds before its ranks start. Each case runs in a fresh interpreter
  (horovod memoizes the answers per process) against a keep-file of its own, never the package's;
- horovodrun's rendezvous server clears each scope's addresses once all its ranks are done with
  it, whatever order the ranks finish their scopes in;
- hvd.synchronize() (PyTorch) sleeps until its allreduce is done instead of spinning on a core.

    .venv/bin/python -m pytest tests/unit/test_horovod_patches.py
"""

import json
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import pytest
from conftest import run

pytest.importorskip("horovod.common.util", reason="Horovod is the main venv's (make setup), not the torch tiers'")

from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts  # noqa: E402
from horovod.runner.http.http_server import RendezvousServer  # noqa: E402


def ask(keep_file, body: str) -> dict:
    """Runs `body` with horovod.common.util as `util`, its keep-file moved to `keep_file`; `body` sets
    `out`, printed back as JSON."""
    code = textwrap.dedent(f"""
        import json, multiprocessing
        import horovod.common.util as util
        util._BUILD_CHECKS = {str(keep_file)!r}
        forks = []
        _start = multiprocessing.context.ForkProcess.start
        def start(self):
            forks.append(1)
            return _start(self)
        multiprocessing.context.ForkProcess.start = start
        out = {{}}
    """) + textwrap.dedent(body) + "\nout['forks'] = len(forks)\nprint(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_first_launch_asks_the_extension_and_the_next_reads_the_kept_answer(tmp_path):
    keep = tmp_path / "checks.json"
    first = ask(keep, "out['gloo'] = util.gloo_built()\nout['mpi'] = util.mpi_built()\n")
    assert first == {"gloo": True, "mpi": True, "forks": 2}
    kept = json.loads(keep.read_text())
    assert sorted(k.split("|")[:2] for k in kept) == [["torch", "built with Gloo"], ["torch", "built with MPI"]]
    # The key names the extension library (size, modification time) and the framework's version, so a
    # rebuild or an upgraded torch asks again.
    assert all("mpi_lib_v2" in k and "torch==" in k for k in kept)

    second = ask(keep, "out['gloo'] = util.gloo_built()\nout['mpi'] = util.mpi_built()\n")
    assert second == {"gloo": True, "mpi": True, "forks": 0}

    # The kept answer is the one given: a build without Gloo kept as such is reported as such.
    keep.write_text(json.dumps({k: (False if "Gloo" in k else v) for k, v in kept.items()}))
    assert ask(keep, "out['gloo'] = util.gloo_built()\n") == {"gloo": False, "forks": 0}


def test_a_stale_key_a_verbose_check_and_the_gpu_question_ask_again(tmp_path):
    keep = tmp_path / "checks.json"
    keep.write_text(json.dumps({"torch|built with Gloo|mpi_lib_v2.so:1:1|torch==0.0": False}))
    # A key of another build or torch is not this one's: asked again, and kept beside it.
    assert ask(keep, "out['gloo'] = util.gloo_built()\n") == {"gloo": True, "forks": 1}
    assert len(json.loads(keep.read_text())) == 2
    # verbose (horovodrun --check-build -v) shows the check as it runs; whether a GPU is there is
    # not the build's to say: neither is read from or written to the keep-file.
    out = ask(keep, "out['gloo'] = util.gloo_built(verbose=True)\nout['gpu'] = util.gpu_available('torch')\n")
    assert out == {"gloo": True, "gpu": False, "forks": 2}
    assert not any("GPU" in k for k in json.loads(keep.read_text()))


def test_an_unreadable_or_unwritable_keep_file_costs_the_check_not_the_launch(tmp_path):
    broken = tmp_path / "checks.json"
    broken.write_text("{ not json")
    assert ask(broken, "out['gloo'] = util.gloo_built()\n") == {"gloo": True, "forks": 1}
    assert json.loads(broken.read_text())  # rewritten whole
    nowhere = tmp_path / "missing-folder" / "checks.json"
    assert ask(nowhere, "out['gloo'] = util.gloo_built()\n") == {"gloo": True, "forks": 1}
    assert not nowhere.parent.exists()


def test_a_scope_half_done_when_another_completes_is_still_cleared_when_it_completes():
    # Two ranks on one host: scopes global and local_<host> of 2 ranks, cross_0 and cross_1 of 1.
    # Rank 0 finishes its local scope, then its one-rank cross scope, before rank 1 finishes the
    # local one (a busy machine's order): Horovod 0.28.1 reset every scope's count on cross_0's
    # completion and never cleared local_<host>, whose old addresses the job's next hvd.init() read.
    server = RendezvousServer()
    port = server.start()
    try:
        server.init(get_host_assignments(parse_hosts("localhost:2"), 2))

        def call(method, scope, key, body=None):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/{scope}/{key}", data=body, method=method)
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    return answer.read()
            except urllib.error.HTTPError as e:
                return e.code

        for rank in (0, 1):
            call("PUT", "global", str(rank), b"old address")
        for rank in (0, 1):
            call("DELETE", "global", str(rank))
        assert call("GET", "global", "0") == 404  # a completed scope is cleared
        for rank in (0, 1):
            call("PUT", "local_localhost", str(rank), b"old address")
        call("DELETE", "local_localhost", "0")
        call("PUT", "cross_0", "0", b"old address")
        call("DELETE", "cross_0", "0")  # rank 0's one-rank cross scope completes
        assert call("GET", "local_localhost", "1") == b"old address"  # rank 1 not done with it yet
        call("DELETE", "local_localhost", "1")
        assert (call("GET", "local_localhost", "0"), call("GET", "local_localhost", "1")) == (404, 404)
    finally:
        server.stop()


WAITER = """
import json, sys, time
import horovod.torch as hvd
import torch

hvd.init()
hvd.allreduce(torch.ones(4), name="warm")  # both ranks up, the background loop running
if hvd.rank() == 1:
    time.sleep(2.0)  # rank 0 waits this long in synchronize for rank 1's part
start = time.thread_time()
total = hvd.allreduce(torch.ones(4) * (hvd.rank() + 1), name="late", op=hvd.Sum)
waited = time.thread_time() - start
print("WAIT " + json.dumps({"rank": hvd.rank(), "cpu_s": waited, "total": total.tolist()}))
"""


def test_synchronize_sleeps_while_its_allreduce_waits_for_a_late_rank(tmp_path, horovodrun):
    """Rank 1 joins an allreduce 2 s late; rank 0, waiting in hvd.synchronize(), uses almost no CPU
    in its own thread meanwhile (the spinning wait of 0.28.1 used the whole 2 s of a core, or what the
    scheduler gave it), and the result is the sum of both ranks' tensors."""
    script = tmp_path / "waiter.py"
    script.write_text(WAITER)
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, script], timeout=300)
    waits = [json.loads(line.split("WAIT ", 1)[1]) for line in proc.stdout.splitlines() if "WAIT " in line]
    rank0 = next(w for w in waits if w["rank"] == 0)
    assert rank0["total"] == [3.0] * 4
    assert rank0["cpu_s"] < 0.5, rank0  # of 2 s waited: blocked, not spinning
