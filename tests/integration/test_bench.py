"""`hvdbench bench allreduce|io` under real 2-rank horovodrun launches (MPI and Gloo controllers), and
`bench links` under a real 3-rank mpirun."""

import pytest
from conftest import run

from hvdbench.bench.allreduce_report import CSV_NAME as AR_CSV, AllreduceRow
from hvdbench.bench.io import CSV_NAME as IO_CSV, IoRow
from hvdbench.bench.links_report import CSV_NAME as LINKS_CSV
from hvdbench.results.records.schema import LinkRow
from hvdbench.results.records.store import read_rows

pytestmark = pytest.mark.integration

FAST = ["--iters", "3", "--warmup-iters", "1"]


def hvdrun(horovodrun, controller, *argv):
    return [horovodrun, "-np", "2", "-H", "localhost:2", f"--{controller}", *argv]


@pytest.mark.timeout(300)
def test_allreduce_two_ranks_horovod_torch_and_mpi(horovodrun, hvdbench_bin, tmp_path):
    proc = run(hvdrun(horovodrun, "mpi", hvdbench_bin, "bench", "allreduce", "--max-bytes", "1048576",
                      *FAST, "--out", tmp_path), timeout=280)
    rows = read_rows(tmp_path / AR_CSV, AllreduceRow)
    assert {r.run_id for r in rows} == {rows[0].run_id}
    for impl in ("horovod", "torch", "mpi"):  # torch: torch.distributed's all_reduce, as ddp reduces
        for dtype, first in (("fp32", 4), ("fp16", 4)):
            series = [r for r in rows if r.impl == impl and r.dtype == dtype]
            sizes = [r.bytes for r in series]
            assert sizes[0] == first and sizes[-1] == 1 << 20
            assert all(b == 2 * a for a, b in zip(sizes, sizes[1:])), sizes  # monotone, doubling
            for r in series:
                assert r.algbw_gb_s > 0 and r.busbw_gb_s > 0 and r.wrong == 0
                assert r.time_min_s <= r.time_mean_s <= r.time_max_s
                assert r.algbw_gb_s == r.bytes / r.time_mean_s / 1e9
                assert r.busbw_gb_s == r.algbw_gb_s * 2 * (2 - 1) / 2  # exactly as recorded
                assert (r.world_size, r.nodes, r.gpus_per_node, r.layout) == (2, 1, 2, "1x2")
                assert r.controller == "mpi" and r.note == ""
                assert (r.vs_mpi is not None and r.vs_mpi > 0) == (impl == "horovod")
    assert "Horovod/MPI bandwidth fp32: 1 MiB" in proc.stdout and "nccl-tests" in proc.stdout
    assert "Horovod/torch.distributed bandwidth fp32: 1 MiB" in proc.stdout
    assert (tmp_path / "bench_allreduce_1x2_mpi.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.timeout(240)
def test_allreduce_under_gloo_says_the_mpi_reference_is_unavailable(horovodrun, hvdbench_bin, tmp_path):
    proc = run(hvdrun(horovodrun, "gloo", hvdbench_bin, "bench", "allreduce", "--dtype", "fp32",
                      "--max-bytes", "4K", *FAST, "--out", tmp_path), timeout=220)
    rows = read_rows(tmp_path / AR_CSV, AllreduceRow)
    assert {r.impl for r in rows} == {"horovod", "torch"} and len(rows) == 22
    assert all(r.controller == "gloo" and "MPI reference unavailable" in r.note for r in rows)
    assert all(r.busbw_gb_s > 0 and r.vs_mpi is None for r in rows)
    assert "MPI reference unavailable" in proc.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("controller", ["mpi", "gloo"])
def test_allreduce_tune_searches_horovods_settings_and_writes_the_best(horovodrun, hvdbench_bin, tmp_path,
                                                                        controller):
    """Horovod restarted once per setting inside one launch (5 settings: the cycle times, then the
    response cache), with the MPI reference where the launch is an MPI job."""
    proc = run(hvdrun(horovodrun, controller, hvdbench_bin, "bench", "allreduce", "--tune", "--dtype", "fp32",
                      "--min-bytes", "64K", "--max-bytes", "128K", *FAST, "--out", tmp_path), timeout=280)
    tried = [text for text in proc.stdout.splitlines() if "HOROVOD_CYCLE_TIME=" in text and "geometric mean" in text]
    assert len(tried) == 5, proc.stdout
    assert "run sweeps with:" in proc.stdout and "best of 5 settings" in proc.stdout
    rows = read_rows(tmp_path / AR_CSV, AllreduceRow)
    horovod = [r for r in rows if r.impl == "horovod"]
    assert [r.bytes for r in horovod] == [65536, 131072] and all(r.wrong == 0 for r in horovod)
    assert len({r.note for r in horovod}) == 1 and horovod[0].note.startswith("tune: HOROVOD_CACHE_CAPACITY=")
    mpi = [r for r in rows if r.impl == "mpi"]
    assert len(mpi) == (2 if controller == "mpi" else 0) and all(r.vs_mpi for r in horovod) == (controller == "mpi")
    assert all(r.layout == "1x2" for r in rows)


@pytest.mark.timeout(240)
def test_io_two_ranks_read_every_sample_once_per_pass(horovodrun, hvdbench_bin, tmp_path):
    from hvdbench.families.images.digits import prepare_digits

    prepare_digits(tmp_path / "digits", size=8, samples_per_shard=300)
    run(hvdrun(horovodrun, "mpi", hvdbench_bin, "bench", "io", "--data", tmp_path / "digits", "--passes", "2",
               "--batch-size", "64", "--demand", "1000", "--out", tmp_path / "out"), timeout=220)
    rows = read_rows(tmp_path / "out" / IO_CSV, IoRow)
    assert [(r.pass_index, r.impl) for r in rows] == [(k, impl) for k in (0, 1)
                                                      for impl in ("reader", "reader+decode", "h5py")]
    for r in rows:
        assert r.samples == r.dataset_samples > 1000  # every training sample, once per pass, over both ranks
        assert (r.world_size, r.layout, r.controller) == (2, "1x2", "mpi")
        assert 0 < r.rank_samples_s_min <= r.rank_samples_s_max and r.samples_s > 0
        assert r.feed_fraction == min(1.0, r.samples_s / 1000)
    assert all(r.vs_h5py > 0 for r in rows if r.impl != "h5py")


@pytest.mark.timeout(180)
def test_io_missing_dataset_fails_every_rank_with_one_message(horovodrun, hvdbench_bin, tmp_path):
    proc = run(hvdrun(horovodrun, "gloo", hvdbench_bin, "bench", "io", "--data", tmp_path / "missing",
                      "--out", tmp_path / "out"), timeout=160, check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert text.count(f"dataset directory {tmp_path / 'missing'} does not exist") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(240)
def test_links_three_ranks_under_mpirun_every_pair_one_at_a_time(mpirun, hvdbench_bin, tmp_path):
    """Three ranks of one host: its three pairs, each at every size, checked and timed, the table with
    the rule and what the slow pairs share (on this busy machine any may be slow: not asserted)."""
    proc = run([mpirun, "-np", "3", "--oversubscribe", "--bind-to", "none", hvdbench_bin, "bench", "links",
                "--sizes", "8,64K", "--iters", "4", "--repeats", "3", "--budget-s", "0.2", "--out", tmp_path],
               timeout=220)
    rows = read_rows(tmp_path / LINKS_CSV, LinkRow)
    assert [(r.rank_a, r.rank_b, r.bytes) for r in rows] == [(a, b, n) for a, b in ((0, 1), (0, 2), (1, 2))
                                                             for n in (8, 65536)]
    assert {r.run_id for r in rows} == {rows[0].run_id}
    for r in rows:
        assert (r.kind, r.host_a, r.backend, r.intra_link) == ("within", r.host_b, "gloo", "loopback (CPU ranks)")
        assert r.wrong == 0 and r.repeats == 3 and 1 <= r.iters <= 4
        assert 0 < r.time_min_s <= r.time_s <= r.time_max_s and r.bandwidth_gb_s == r.bytes / r.time_s / 1e9
        assert (r.world_size, r.layout, r.launcher) == (3, "1x3", "mpirun") and r.device_a.startswith("CPU")
    assert "3 pairs measured in" in proc.stdout and "below 0.5 x the fastest pair" in proc.stdout
    said = [line for line in proc.stdout.splitlines() if "no slow pair" in line or " is slow" in line
            or "slow pairs" in line]
    assert len(said) == 1, proc.stdout  # one verdict line: none slow, or what the slow ones share
    assert (tmp_path / "bench_links_1x3.png").read_bytes()[:4] == b"\x89PNG"
