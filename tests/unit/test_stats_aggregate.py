"""Report statistics against hand-computed values: two-sigma, olympic mean, speed-up, efficiency,
scale-up vs scale-out deltas, and that no failed/aborted/timed-out run disappears."""

import math

import pytest

from hvdbench.errors import ConfigError
from hvdbench.results.records.schema import SCHEMA_VERSION, LoadedRun, RunResult, SchemaError
from hvdbench.results.records.store import append_run, load_sweeps
from hvdbench.results.stats.aggregate import ScalingRow, build_tables, olympic_score, scaling_rows, stats
from hvdbench.topology import Layout


def run(layout, throughput=None, status="success", mode="throughput", **kw):
    nodes, gpus = map(int, layout.split("x"))
    fields = dict(model="resnet50", flavor="debug", framework="torch", precision="fp32", mode=mode,
                  batch_per_gpu=32, world_size=nodes * gpus, nodes=nodes, gpus_per_node=gpus,
                  layout=layout, scale="up" if nodes == 1 else "out", devices="cpu",
                  throughput=throughput, status=status)
    fields.update(kw)
    return LoadedRun(**fields)


def sweep_runs():
    """1x1: 100,110,90 (mean 100, std 10); 1x2: 190,200,210 (200, 10); 2x1: 170,180 + failed
    (175, std 7.0711); 2x2: 380,400 + timeout (390, 14.142); 1x4: 405,395 (400, 7.0711)."""
    runs = [run("1x1", t) for t in (100, 110, 90)]
    runs += [run("1x2", t) for t in (190, 200, 210)]
    runs += [run("2x1", t) for t in (170, 180)] + [run("2x1", status="failed", error="boom")]
    runs += [run("2x2", t) for t in (380, 400)] + [run("2x2", status="timeout")]
    runs += [run("1x4", t) for t in (405, 395)]
    return runs


def by_layout(rows):
    return {r.layout: r for r in rows}


def test_stats_two_sigma_is_twice_the_sample_std():
    s = stats([100, 110, 90])
    assert (s.n, s.mean, s.std, s.two_sigma) == (3, 100, 10, 20)  # ddof=1: sqrt(200/2)
    one = stats([42.0])
    assert (one.mean, one.std, one.two_sigma) == (42.0, None, None)  # undefined, not 0
    assert stats([None, 5.0, 7.0]).mean == 6.0
    assert stats([]).mean is None


def test_olympic_mean_all_converged_drops_fastest_and_slowest():
    score = olympic_score([30, 31, 33, 35, 40], not_converged=0)
    assert score.minutes == pytest.approx((31 + 33 + 35) / 3)
    assert "olympic" in score.rule


def test_olympic_mean_one_non_converged_run_counts_as_the_slowest():
    # dropped: 30 (fastest) and the non-converged run; 40 stays in
    score = olympic_score([30, 31, 33, 40], not_converged=1)
    assert score.minutes == pytest.approx((31 + 33 + 40) / 3)


def test_olympic_mean_two_non_converged_runs_is_dnf():
    score = olympic_score([30, 31, 33], not_converged=2)
    assert score.minutes is None and score.rule.startswith("DNF")


def test_too_few_runs_for_olympic_scoring():
    assert olympic_score([10, 14], 0).minutes == 12  # plain mean, nothing dropped
    assert olympic_score([10], 1).minutes is None  # cannot drop the failure: DNF
    assert olympic_score([], 0).minutes is None


def test_speedup_and_efficiency_against_the_smallest_gpu_count():
    rows = by_layout(scaling_rows(sweep_runs()))
    assert rows["1x1"].throughput_mean == 100 and rows["1x1"].throughput_2sigma == 20
    assert rows["1x2"].speedup == pytest.approx(2.0)
    assert rows["2x1"].speedup == pytest.approx(1.75)
    assert rows["2x1"].efficiency == pytest.approx(0.875)  # (175/2) / (100/1)
    assert rows["2x2"].speedup == pytest.approx(3.9)
    assert rows["2x2"].efficiency == pytest.approx(0.975)
    assert rows["2x2"].throughput_per_gpu == pytest.approx(97.5)
    assert {r.baseline for r in rows.values()} == {"1x1"}


def test_failed_and_timed_out_runs_are_counted_not_dropped():
    rows = by_layout(scaling_rows(sweep_runs()))
    r = rows["2x1"]
    assert (r.runs, r.ok, r.failed, r.aborted, r.timeout, r.n_throughput) == (3, 2, 1, 0, 0, 2)
    assert r.throughput_std == pytest.approx(math.sqrt(50))
    r = rows["2x2"]
    assert (r.runs, r.ok, r.timeout) == (3, 2, 1)
    assert sum(row.runs for row in rows.values()) == len(sweep_runs())


def test_explicit_baseline_and_scale_up_preferred_at_equal_gpu_count():
    runs = [r for r in sweep_runs() if r.layout != "1x1"]  # smallest count 2: 1x2 (up) and 2x1 (out)
    rows = by_layout(scaling_rows(runs))
    assert rows["2x1"].baseline == "1x2"
    assert rows["2x1"].efficiency == pytest.approx(0.875)  # (175/2) / (200/2)
    rows = by_layout(scaling_rows(sweep_runs(), baseline=Layout.parse("1x2")))
    assert rows["1x1"].speedup == pytest.approx(0.5)
    assert rows["2x2"].efficiency == pytest.approx((390 / 4) / (200 / 2))


def test_bad_baseline_is_a_clear_error():
    with pytest.raises(ConfigError, match="expected NODESxGPUS"):
        Layout.parse("eight")
    with pytest.raises(ConfigError, match="3x3: no run has that layout"):
        build_tables(sweep_runs(), baseline=Layout.parse("3x3"))


def test_layout_deltas_against_the_single_node_layout_with_two_sigma_noise():
    layouts = build_tables(sweep_runs()).layouts
    two = by_layout(r for r in layouts if r.gpus == 2)
    assert set(two) == {"1x2", "2x1"} and {r.reference for r in two.values()} == {"1x2"}
    assert two["1x2"].delta_pct == 0 and two["1x2"].within_noise is None  # the reference itself
    # 175 vs 200: -12.5 %; noise 2*sqrt(10^2 + 50) = 24.495 samples/s = 12.25 % -> outside
    assert two["2x1"].relative == pytest.approx(0.875)
    assert two["2x1"].delta_pct == pytest.approx(-12.5)
    assert two["2x1"].noise_2sigma_pct == pytest.approx(100 * 2 * math.sqrt(150) / 200)
    assert two["2x1"].within_noise is False
    four = by_layout(r for r in layouts if r.gpus == 4)
    # 390 vs 400: -2.5 %; noise 2*sqrt(50 + 200) = 31.6 -> within
    assert four["2x2"].reference == "1x4"
    assert four["2x2"].delta_pct == pytest.approx(-2.5)
    assert four["2x2"].within_noise is True
    assert four["2x2"].timeout == 1
    assert not [r for r in layouts if r.gpus == 1]  # one layout only: no comparison


def test_within_noise_undefined_with_a_single_run():
    runs = [run("1x2", 200), run("2x1", 150), run("2x1", 160)]
    rows = by_layout(build_tables(runs).layouts)
    assert rows["2x1"].within_noise is None and rows["2x1"].delta_pct == pytest.approx(-22.5)


def tta(layout, minutes, status="success", **kw):
    return run(layout, mode="time_to_accuracy", status=status,
               time_to_train_s=None if minutes is None else minutes * 60, **kw)


def test_time_to_train_table_olympic_speedup_and_counts():
    runs = [tta("1x1", m, epochs_to_target=e, time_per_epoch_s=p, global_batch=32)
            for m, e, p in ((30, 4.0, 420.0), (32, 5.0, 390.0), (34, 5.0, 400.0), (36, 6.0, 380.0))]
    runs.append(tta("1x1", None, status="aborted", epochs=8.0, time_per_epoch_s=410.0, global_batch=32))
    runs += [tta("1x4", m, epochs_to_target=6.0, time_per_epoch_s=100.0, global_batch=128) for m in (10, 11, 12)]
    runs += [tta("2x2", m, global_batch=128) for m in (12, 13)]
    runs += [tta("2x2", None, status="failed", global_batch=128), tta("2x2", None, status="timeout", global_batch=128)]
    runs += [run("1x1", 100)]  # a throughput run: not part of time-to-train
    tables = build_tables(runs)
    rows = by_layout(tables.time_to_train)
    one = rows["1x1"]
    assert (one.runs, one.converged, one.aborted) == (5, 4, 1)
    assert one.ttt_min == pytest.approx((32 + 34 + 36) / 3)
    assert one.ttt_mean_min == pytest.approx(33)
    assert one.ttt_2sigma_min == pytest.approx(2 * math.sqrt(20 / 3))
    assert one.epochs_mean == pytest.approx(5.0)  # converged runs' epochs to target
    assert one.time_per_epoch_min == pytest.approx((420 + 390 + 400 + 380 + 410) / 5 / 60)
    four = rows["1x4"]
    assert four.ttt_min == pytest.approx(11)  # olympic of 3 = the middle one
    assert four.speedup == pytest.approx(34 / 11)
    assert four.efficiency == pytest.approx(34 / 11 / 4)
    assert rows["2x2"].ttt_min is None and rows["2x2"].scoring.startswith("DNF")
    assert (rows["2x2"].failed, rows["2x2"].timeout, rows["2x2"].speedup) == (1, 1, None)
    assert rows["2x2"].ttt_mean_min == pytest.approx(12.5)  # mean ± 2σ still shown for converged runs
    epochs = by_layout(tables.epochs)
    assert epochs["1x4"].global_batch == 128 and epochs["1x4"].time_per_epoch_min == pytest.approx(100 / 60)
    assert [r.mode for r in tables.scaling] == ["throughput"]


def test_groups_keep_models_frameworks_and_batch_sizes_apart():
    runs = [run("1x1", 100), run("1x2", 180), run("1x1", 50, framework="tensorflow"),
            run("1x2", 95, framework="tensorflow"), run("1x2", 300, batch_per_gpu=64)]
    rows = scaling_rows(runs)
    assert len(rows) == 5
    tf = [r for r in rows if r.framework == "tensorflow"]
    assert tf[1].speedup == pytest.approx(1.9)
    b64 = [r for r in rows if r.batch_per_gpu == 64]
    assert b64[0].baseline == "1x2" and b64[0].speedup == pytest.approx(1.0)


def test_load_sweeps_names_the_missing_store(tmp_path):
    append_run(tmp_path / "a" / "runs.csv", run("1x1", 100))
    assert len(load_sweeps([tmp_path / "a", tmp_path / "a" / "runs.csv"])) == 2
    with pytest.raises(SchemaError, match=str(tmp_path / "b" / "runs.csv")):
        load_sweeps([tmp_path / "b"])


def test_a_run_that_failed_before_seeing_its_devices_joins_its_layouts_row(tmp_path):
    # The sweep writes a failed row with the run's identity; the devices (the report's system) are
    # known only to a worker that got that far: the sweep's one device set stands in for them.
    store = tmp_path / "s" / "runs.csv"
    append_run(store, run("1x1", 100))
    append_run(store, run("1x2", status="failed", devices="", error="exit status 1"))
    rows = by_layout(scaling_rows(load_sweeps([tmp_path / "s"])))
    assert set(rows) == {"1x1", "1x2"} and (rows["1x2"].runs, rows["1x2"].failed) == (1, 1)
    append_run(tmp_path / "t" / "runs.csv", run("1x1", 100, devices="A100"))
    append_run(tmp_path / "t" / "runs.csv", run("1x1", 100, devices="H100"))
    append_run(tmp_path / "t" / "runs.csv", run("1x2", status="failed", devices=""))
    assert "" in {r.devices for r in load_sweeps([tmp_path / "t"])}  # two systems: not guessed


def test_runs_of_unknown_layout_are_counted_but_never_a_baseline():
    runs = [run("1x1", 100), run("1x2", 190)]
    runs.append(LoadedRun(model="resnet50", flavor="debug", framework="torch", devices="cpu",
                          batch_per_gpu=32, throughput=50.0))  # no layout recorded
    rows = scaling_rows(runs)
    unknown = next(r for r in rows if not r.gpus)
    assert unknown.runs == 1 and unknown.speedup is None and unknown.throughput_per_gpu is None
    assert {r.baseline for r in rows} == {"1x1"}


def test_a_retried_run_counts_once_in_its_current_state():
    from hvdbench.results.records.schema import RunResult
    from hvdbench.results.records.store import current_runs

    rows = [RunResult(sweep="s", run_id="1x1-r1", status="failed"),
            RunResult(sweep="s", run_id="1x2-r1", status="success"),
            RunResult(sweep="s", run_id="1x1-r1", status="success"),
            RunResult(sweep="other", run_id="1x1-r1", status="timeout"),
            RunResult(run_id="", status="success"), RunResult(run_id="", status="aborted")]
    current, superseded = current_runs(rows)
    assert superseded == 1
    assert [(r.sweep, r.run_id, r.status) for r in current] == [
        ("s", "1x1-r1", "success"), ("s", "1x2-r1", "success"), ("other", "1x1-r1", "timeout"),
        ("", "", "success"), ("", "", "aborted")]


@pytest.mark.parametrize("drop, minutes, not_converged", [
    (1, [30, 31, 33, 35, 40], 0), (1, [30, 31, 33, 40], 1), (1, [5, 6, 7], 0),
    (4, [float(m) for m in range(10, 50)], 0), (4, [float(m) for m in range(10, 47)], 3),  # UNet3D: 40 runs
])
def test_olympic_score_is_the_summarizers(drop, minutes, not_converged):
    """Against mlperf-logging's own _compute_olympic_average (max_dropped_scores 4 for UNet3D)."""
    from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average

    ours = olympic_score(minutes, not_converged, drop)
    assert ours.minutes == pytest.approx(_compute_olympic_average(list(minutes), not_converged, drop))
    assert olympic_score(minutes, drop + 1, drop).minutes is None  # more non-converged runs than dropped: DNF


def test_a_run_without_a_logged_batch_joins_its_layouts_row():
    runs = [tta("1x8", m, global_batch=256) for m in (30, 31, 32)] + [tta("1x8", None, status="failed", global_batch=0)]
    [row] = build_tables(runs).time_to_train
    assert (row.global_batch, row.runs, row.converged, row.failed) == (256, 4, 3, 1)
    assert row.ttt_min == pytest.approx((31 + 32) / 2)  # dropped: 30 and the failed run


def test_rows_that_cannot_be_trusted_are_flagged():
    # A lone rank disturbed by a neighbour: 1x1 at 64 ± 60 samples/s, 1x2 at a steady 938.
    runs = [run("1x1", t) for t in (20, 64, 108)] + [run("1x2", t) for t in (930, 938, 946)]
    runs += [run("1x4", t) for t in (1500, 1900, 2300)]
    rows = {r.layout: r for r in build_tables(runs).scaling}
    assert rows["1x1"].flags == "noisy" and rows["1x1"].cv == pytest.approx(44 / 64)
    assert rows["1x2"].flags == "superlinear;noisy-baseline"  # 14.7x on 2 ranks
    assert rows["1x4"].flags == "superlinear;noisy;noisy-baseline"
    steady = build_tables([run("1x1", t) for t in (100, 101, 99)] + [run("1x2", t) for t in (190, 191)]).scaling
    assert [r.flags for r in steady] == ["", ""]


def _as_version_1(store):
    """The store as schema version 1 wrote it: without the step-time breakdown columns."""
    import csv as csvmod
    import io

    rows = list(csvmod.DictReader(io.StringIO(store.read_text())))
    dropped = RunResult.added_since(1)
    columns = [c for c in RunResult.columns() if c not in dropped]
    out = io.StringIO()
    writer = csvmod.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows({**r, "schema_version": "1"} for r in rows)
    store.write_text(out.getvalue())


def test_a_version_1_store_reads_and_is_upgraded_by_its_next_append(tmp_path):
    from hvdbench.results.records.store import read_runs

    store = tmp_path / "runs.csv"
    for t in (100.0, 110.0):
        append_run(store, run("1x1", t))
    _as_version_1(store)
    assert "data_s" not in store.read_text().splitlines()[0]
    old = read_runs(store)
    assert [r.throughput for r in old] == [100.0, 110.0] and all(r.compute_s is None for r in old)
    append_run(store, run("1x2", 190.0, compute_s=0.01, data_s=0.001))
    header = store.read_text().splitlines()[0].split(",")
    assert header == RunResult.columns()
    rows = read_runs(store)
    assert [(r.layout, r.throughput, r.compute_s) for r in rows] == [
        ("1x1", 100.0, None), ("1x1", 110.0, None), ("1x2", 190.0, 0.01)]
    assert {r.schema_version for r in rows} == {SCHEMA_VERSION}
    assert all(r.other_cpus is None for r in rows)  # a column of version 3, empty in the old rows


def _timed(layout, throughput, **parts):
    return run(layout, throughput, **{f"{k}_s": v for k, v in parts.items()})


def test_the_waterfall_adds_up_and_puts_each_cost_where_the_step_time_went():
    from hvdbench.results.analyses.waterfall import waterfall_rows

    base = dict(data=0.001, compute=0.080, comm=0.0, update=0.004, other=0.0)  # 85 ms, 1 rank
    # 2x1: the same compute, 40 ms more exposed allreduce, 10 ms more data: 135 ms a step.
    out2 = dict(base, comm=0.040, data=0.011)
    runs = [_timed("1x1", 100.0 * 0.085 / 0.085, **base), _timed("2x1", 2 * 100.0 * 0.085 / 0.135, **out2)]
    runs[0].throughput = 100.0
    [row] = waterfall_rows(runs, build_tables(runs).scaling)
    assert row.ideal == pytest.approx(200.0)
    # each part's share of the 50 ms the step grew by, charged at the layout's step: in no order
    assert row.comm_loss == pytest.approx(200 * 40 / 135)
    assert row.data_loss == pytest.approx(200 * 10 / 135)
    assert row.comm_loss + row.data_loss == pytest.approx(200 - 200 * 85 / 135)
    assert row.compute_loss == pytest.approx(0.0, abs=1e-9)
    assert row.unattributed == pytest.approx(0.0, abs=1e-9)
    total = row.comm_loss + row.data_loss + row.compute_loss + row.unattributed
    assert row.ideal - total == pytest.approx(row.measured, abs=1e-9)
    # Without a breakdown the whole loss is unattributed, and the bars still add up.
    plain = [run("1x1", 100.0), run("2x1", 150.0)]
    [row] = waterfall_rows(plain, build_tables(plain).scaling)
    assert (row.comm_loss, row.unattributed, row.measured) == (None, 50.0, 150.0)


def test_the_waterfall_tells_engines_apart_in_its_headings_and_panels():
    """A ddp,fsdp sweep's waterfall: one section and one panel per engine, each naming its engine and
    precision as the scaling tables' headings do (they read as one layout's, repeated, before)."""
    from hvdbench.results.analyses import waterfall

    runs = [run(layout, t, engine=engine) for engine in ("ddp", "fsdp")
            for layout, t in (("1x1", 100.0), ("1x2", 150.0))]
    rows = waterfall.waterfall_rows(runs, build_tables(runs).scaling)
    headings = [line for line in waterfall.markdown(rows).splitlines() if line.startswith("### ")]
    assert len(headings) == 2 and all(f" · {e} · fp32 · " in h for h, e in zip(headings, ("ddp", "fsdp")))
    titles = [ax.get_title().replace("\n", " ") for ax in waterfall.figure(rows).axes if ax.get_title()]
    assert len(titles) == 2 and all(f" · {e} · fp32 · " in t for t, e in zip(titles, ("ddp", "fsdp")))


def test_explain_twins_measure_the_data_stall_differentially_and_the_bars_still_add_up():
    """Real data keeps 90 % of the synthetic rate at 1x1 (100 vs 111.1) and 60 % at 2x1 (120 vs
    200): the layout loses ideal x (1 - 0.6 / 0.9) to its data, whatever its batch-wait timer said."""
    from hvdbench.results.analyses.waterfall import waterfall_rows

    base = dict(data=0.001, compute=0.080, comm=0.0, update=0.004, other=0.0)
    runs = [_timed("1x1", 100.0, **base), _timed("2x1", 120.0, **dict(base, comm=0.040))]
    twins = [run("1x1", 100.0 / 0.9, dataset="synthetic"), run("2x1", 200.0, dataset="synthetic")]
    [row] = waterfall_rows(runs, build_tables(runs).scaling, twins)
    assert row.data_from == "synthetic twin"
    assert row.data_loss == pytest.approx(200.0 * (1 - 0.6 / 0.9))
    total = row.comm_loss + row.data_loss + row.compute_loss + row.unattributed
    assert row.ideal - total == pytest.approx(row.measured, abs=1e-9)
    [row] = waterfall_rows(runs, build_tables(runs).scaling)  # without twins: from the breakdown
    assert row.data_from == "breakdown"


# --- issue 31: a report a person can trust at a glance ------------------------------------------

def test_the_report_names_the_threads_per_rank_and_flags_an_unfair_baseline():
    from hvdbench.results.stats.aggregate import thread_note
    from hvdbench.results.render.tables import markdown

    fair = [run(layout, t, threads=1) for layout, t in (("1x1", 100), ("1x2", 190), ("2x1", 180))]
    rows = by_layout(scaling_rows(fair))
    assert {r.threads for r in rows.values()} == {1} and not any(r.flags for r in rows.values())
    assert thread_note(list(rows.values())) == "CPU math threads per rank: 1 in every layout (runs.csv threads)."
    assert "CPU math threads per rank: 1 in every layout" in markdown(build_tables(fair))
    # A 1x1 rank with both cores against 1x2 ranks with one each: its speed-up is not the layout's.
    unfair = [run("1x1", 100, threads=2), run("1x2", 190, threads=1), run("2x1", 180, threads=1)]
    rows = by_layout(scaling_rows(unfair))
    assert rows["1x1"].flags == "" and rows["1x2"].flags == rows["2x1"].flags == "unfair-baseline"
    text = markdown(build_tables(unfair))
    assert "**unfair baseline**: the 1x1 rank had 2 threads, the 1x2 and 2x1 ranks 1 each" in text
    assert "| 1x2 | 2 | up | 1 (1/0/0/0) | 190.0 |" in text and "unfair-baseline" in text
    # An old sweep (runs.csv schema < 4: no threads recorded) says nothing of them.
    old = [run("1x1", 100), run("1x2", 190)]
    assert thread_note(scaling_rows(old)) == "" and "threads" not in markdown(build_tables(old)).split("## Notes")[0]
    assert "threads" in ScalingRow.columns()


def test_noise_on_an_idle_machine_is_a_cold_start_not_a_busy_machine():
    from hvdbench.results.stats.aggregate import noise_cause
    from hvdbench.results.render.tables import markdown

    idle = [run("1x1", t, other_cpus=0.02, steps=10, warmup_steps=3) for t in (60, 100)]
    [row] = scaling_rows(idle)
    assert row.flags == "noisy"  # not busy: 0.02 cores is no neighbour
    cause = noise_cause(row)
    assert "busy" not in cause and "idle" in cause and "cold start or too few timed steps" in cause
    assert "10 steps after 3 warm-up steps" in cause and "--steps" in cause and "--warmup-max-steps" in cause
    assert "probably busy" not in markdown(build_tables(idle))
    busy = [run("1x1", t, other_cpus=1.2, steps=10, warmup_steps=3) for t in (60, 100)]
    [row] = scaling_rows(busy)
    assert row.flags == "noisy;busy"
    assert noise_cause(row).startswith("the machine was busy (other processes used up to 1.2 cores")
    text = markdown(build_tables(busy))
    assert "- **noisy** (1x1): runs spread more than 10%" in text and "require-idle" in text
    unknown = [run("1x1", t, steps=10) for t in (60, 100)]
    assert "recorded no measure of other processes" in noise_cause(scaling_rows(unknown)[0])


def test_efficiency_carries_two_sigma_from_both_spreads():
    rows = by_layout(scaling_rows(sweep_runs()))
    # 1x2: 200 ± std 10 against 1x1's 100 ± 10: efficiency 1.0, relative errors 5 % and 10 %.
    assert rows["1x2"].efficiency_2sigma == pytest.approx(2 * 1.0 * math.hypot(0.05, 0.10))
    assert rows["1x1"].efficiency_2sigma == pytest.approx(2 * 0.10)  # the baseline's own spread
    one = by_layout(scaling_rows([run("1x1", 100), run("1x2", 190), run("1x2", 200)]))
    assert one["1x2"].efficiency_2sigma is None  # a single baseline run: its spread is unknown


def test_short_times_to_train_read_in_seconds_with_the_evaluation_cadence(tmp_path):
    from hvdbench.results.report.load import read_run_folder
    from hvdbench.results.render.tables import markdown, resolution

    runs = [tta("1x1", s / 60, run_id=f"1x1-r{i}", epochs_to_target=3.0, time_per_epoch_s=3.5, global_batch=32)
            for i, s in enumerate((30.0, 33.0))]
    runs += [tta("1x2", s / 60, run_id=f"1x2-r{i}", epochs_to_target=4.0, time_per_epoch_s=2.0, global_batch=64)
             for i, s in enumerate((20.0, 22.0))]
    for r in runs:  # each run's resolved config, as the worker writes it beside its result
        (tmp_path / r.run_id).mkdir()
        (tmp_path / r.run_id / "config.yaml").write_text("eval_every: 2.0\neval_unit: epochs\nmax_epochs: 12\n")
    for r in runs:
        read_run_folder(r, tmp_path / r.run_id)
    rows = by_layout(build_tables(runs).time_to_train)
    assert rows["1x1"].eval_every_epochs == 2.0 and rows["1x1"].ttt_resolution_s == pytest.approx(7.0)
    assert resolution(rows["1x1"]) == "± 7 s: an evaluation every 2 epochs of ~3.5 s"
    text = markdown(build_tables(runs))
    assert "| time to train (s) | resolution (evaluation cadence) |" in text
    assert "| 31.5 | ± 7 s: an evaluation every 2 epochs of ~3.5 s | 31.5 ± 4.2 |" in text  # not "0.53 min"
    assert "| s/epoch |" in text and "| 3.5 |" in text
    # Minutes stay minutes; a table mixing both says each cell's unit.
    long = [tta("1x1", m, global_batch=32) for m in (30, 32)] + [tta("1x2", 0.5, global_batch=64)]
    text = markdown(build_tables(long))
    assert "| time to train |" in text and "| 31.00 min |" in text and "| 30.0 s |" in text
    # A run without its config (a runs.csv copied alone, a published log): no cadence, no column.
    bare = [tta("1x1", 0.5, run_id="x", global_batch=32)]
    read_run_folder(bare[0], tmp_path / "nowhere" / "x")
    assert "resolution" not in markdown(build_tables(bare))


def test_throughput_that_falls_as_nodes_are_added_is_flagged():
    """A 2-node layout slower than the 1-node one is inverse scaling, flagged with a note; a layout
    of the same GPU count on more nodes is the layouts table's comparison, not this flag."""
    from hvdbench.results.render.tables import markdown

    runs = [run("1x4", t) for t in (400, 404, 396)] + [run("2x4", t) for t in (300, 310, 290)]
    runs += [run("4x4", t) for t in (500, 505, 495)] + [run("4x1", t) for t in (380, 385, 375)]
    rows = by_layout(build_tables(runs).scaling)
    assert rows["2x4"].flags == "inverse-scaling" and rows["2x4"].speedup == pytest.approx(0.75)
    assert rows["4x4"].flags == rows["1x4"].flags == ""  # faster than every smaller layout
    assert rows["4x1"].flags == ""  # 4 GPUs on more nodes than 1x4: scale-out vs scale-up, not this flag
    text = markdown(build_tables(runs))
    assert "| 2x4 | 8 | out |" in text and "inverse-scaling |" in text
    assert "- **inverse-scaling**: throughput below that of a layout with fewer GPUs" in text
    # A drop within the two rows' noise (2 sqrt(sa^2 + sb^2)) is not called inverse scaling.
    noisy = [run("1x4", t) for t in (400, 500, 300)] + [run("2x4", t) for t in (380, 480, 280)]
    assert "inverse-scaling" not in by_layout(build_tables(noisy).scaling)["2x4"].flags


def test_tables_of_cpu_runs_count_ranks_not_gpus():
    # hvdbench's CPU runs record their device as "cpu": a table of them counts ranks (processes),
    # as their plots do; a GPU system's tables count GPUs.
    from hvdbench.results.render.tables import markdown

    cpu = markdown(build_tables([run("1x1", 100), run("1x2", 190), run("2x1", 150)]))
    assert "| layout | ranks | scale |" in cpu and "| per rank |" in cpu and "batch 32/rank" in cpu
    assert "| ranks | layout | vs |" in cpu and "GPUs" not in cpu.split("## Notes")[0]
    gpu = markdown(build_tables([run("1x1", 100, devices="H100"), run("1x2", 190, devices="H100")]))
    assert "| layout | GPUs | scale |" in gpu and "| per GPU |" in gpu and "batch 32/GPU" in gpu
