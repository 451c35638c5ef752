"""The report's plots: valid PNG files of the expected size, with the expected series."""

from dataclasses import replace

import matplotlib.image
import pytest
from test_stats_aggregate import run, sweep_runs, tta

from hvdbench.results.render import plots
from hvdbench.results.stats.aggregate import build_tables
from hvdbench.topology import Layout

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def tables():
    runs = sweep_runs() + [run("1x1", 50, framework="tensorflow"), run("1x2", 90, framework="tensorflow")]
    runs += [tta("1x1", m, global_batch=32) for m in (30, 32, 34)]
    runs += [tta("1x4", m, global_batch=128) for m in (10, 11, 12)]
    runs += [tta("2x2", m, global_batch=128) for m in (12, 13, 14)]
    return build_tables(runs)


def test_throughput_plot_has_a_line_per_layout_family_and_the_ideal():
    fig = plots.throughput_figure(tables().scaling)
    # panels: tensorflow (1x1, 1x2: scale-up only), torch (1x1, 1x2, 1x4 up; 2x1, 2x2 out)
    # The fixture's runs are on CPUs: a node holds ranks, not GPUs.
    assert plots.series_labels(fig) == [
        ["ideal (linear)", "scale-up (1 node)"],
        ["ideal (linear)", "scale-up (1 node)", "scale-out (1 rank/node)", "scale-out (2 ranks/node)"],
    ]
    torch = fig.axes[1]
    ideal = next(l for l in torch.get_lines() if l.get_label() == "ideal (linear)")
    assert list(ideal.get_xdata()) == [1, 2, 4] and list(ideal.get_ydata()) == [100, 200, 400]
    scale_out_2 = next(c for c in torch.containers if c.get_label() == "scale-out (2 ranks/node)")
    assert list(scale_out_2.lines[0].get_xdata()) == [2, 4]  # starts at 1x2, then 2x2


def test_efficiency_plot_series():
    fig = plots.efficiency_figure(tables().scaling)
    assert [len(labels) for labels in plots.series_labels(fig)] == [2, 4]
    assert all("ideal (100 %)" in labels for labels in plots.series_labels(fig))


def test_layout_bars_one_container_per_gpu_count_with_error_bars():
    t = tables()
    fig = plots.layouts_figure(t.layouts, t.scaling)
    [ax] = fig.axes  # only the torch group ran several layouts at one GPU count
    bars = [c for c in ax.containers if c.__class__.__name__ == "BarContainer"]
    # The fixture's runs are on CPUs: the plot says so instead of calling them GPUs.
    assert [c.get_label() for c in bars] == ["2 CPU ranks", "4 CPU ranks"]
    assert "CPU ranks" in ax.get_xlabel() and "devices: CPUs" in ax.get_title()
    # The reference per GPU count: the 1x1 baseline (100 samples/s) times the count.
    [ideal] = [c for c in ax.collections if c.get_label().startswith("ideal")]
    assert [seg[0][1] for seg in ideal.get_segments()] == [200]
    assert ax.get_ylim()[0] == 0
    assert [len(c.patches) for c in bars] == [2, 2]
    assert [p.get_height() for c in bars for p in c.patches] == [200, 175, 400, 390]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1x2", "2x1", "1x4", "2x2"]
    assert all(c.errorbar is not None for c in bars)


def test_error_bars_below_a_mean_stop_above_zero_on_log_axes():
    below, above = plots._yerr([10.0, 10.0], [4.0, 30.0], log_y=True)
    assert below == [4.0, 9.5] and above == [4.0, 30.0]
    assert plots._yerr([10.0], [30.0], log_y=False) == [[30.0], [30.0]]


def test_time_to_train_plot_series():
    fig = plots.time_to_train_figure(tables().time_to_train)
    assert plots.series_labels(fig) == [["ideal (linear)", "scale-up (1 node)", "scale-out (2 ranks/node)"]]


def test_write_plots_makes_valid_pngs(tmp_path):
    written, skipped = plots.write_plots(tables(), tmp_path)
    assert [p.name for p in written] == list(plots.PLOTS) and not skipped
    # 640 x 460 pixels per panel: two groups side by side for scaling, one for the others
    sizes = {"throughput_vs_gpus.png": (460, 1280), "efficiency_vs_gpus.png": (460, 1280),
             "layouts_bars.png": (460, 640), "time_to_train.png": (460, 640)}
    for path in written:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        height, width, channels = matplotlib.image.imread(path).shape
        assert (height, width) == sizes[path.name] and channels in (3, 4)
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary file left behind


def test_titles_name_the_hosts_and_the_inter_node_link():
    runs = [run("1x1", 100, hosts="node1"), run("1x2", 190, hosts="node1"),
            run("2x1", 170, hosts="node1;node2"), run("2x1", 180, hosts="node1;node2")]
    for r in runs:
        r.link = "emulated veth bridge, 100mbit"  # as load_sweeps sets it from sweep.json
    t = build_tables(runs)
    assert {r.layout: r.link for r in t.scaling} == {"1x1": "", "1x2": "", "2x1": "emulated veth bridge, 100mbit"}
    title = plots.throughput_figure(t.scaling).axes[0].get_title()
    assert title.endswith("hosts: node1, node2\ninter-node link: emulated veth bridge, 100mbit")
    assert "hosts: node1, node2\ninter-node link" in plots.layouts_figure(t.layouts, t.scaling).axes[0].get_title()
    for r in runs:
        r.link = ""
    title = plots.throughput_figure(build_tables(runs).scaling).axes[0].get_title()
    assert title.endswith("inter-node link: not recorded (sweep --link)")
    one_node = plots.throughput_figure(build_tables(runs[:2]).scaling).axes[0].get_title()
    assert one_node.endswith("host: node1")  # one node: no link to name


def test_flagged_rows_are_marked_on_the_plots():
    runs = [run("1x1", t) for t in (20, 64, 108)] + [run("1x2", t) for t in (930, 938, 946)]
    scaling = build_tables(runs).scaling
    for fig in (plots.throughput_figure(scaling), plots.efficiency_figure(scaling)):
        assert plots.FLAGGED in plots.series_labels(fig)[0]
    steady = build_tables([run("1x1", t) for t in (100, 101)] + [run("1x2", t) for t in (190, 191)]).scaling
    assert plots.FLAGGED not in plots.series_labels(plots.throughput_figure(steady))[0]


# --- what every plot says under its title, and what a reader would otherwise misread -------------

LINK = "emulated veth bridge, 100mbit"


def placed_runs(devices="cpu"):
    """1x1, 1x2 on node1; 2x1 on node1+node2 over the emulated link; two repeats each, with a
    step-time breakdown (for the waterfall and the prediction)."""
    runs = []
    for layout, tputs, hosts, comm in (("1x1", (100, 104), "node1", 0.0), ("1x2", (190, 186), "node1", 0.004),
                                       ("2x1", (150, 156), "node1;node2", 0.03)):
        for t in tputs:
            r = run(layout, t, hosts=hosts, devices=devices, parameters=100_000, data_s=0.001, compute_s=0.08,
                    comm_s=comm, update_s=0.004, other_s=0.0, step_time_mean_s=0.085 + comm)
            r.link = LINK
            runs.append(r)
    return runs


def title_says_where(text, cpus=True):
    assert ("devices: CPUs (no GPU)" if cpus else "devices: A100") in text
    assert "hosts: node1, node2" in text and f"inter-node link: {LINK}" in text
    assert "run" in text  # how many runs each point (bar, fit) stands for


def test_every_plot_names_the_devices_hosts_link_and_runs(tmp_path):
    from hvdbench.bench import allreduce_report as AR
    from hvdbench.results.analyses import study_tables, waterfall
    from hvdbench.results.predict import throughput as predict
    from hvdbench.results.records.schema import AllreduceRow

    runs = placed_runs()
    t = build_tables(runs)
    for fig in (plots.throughput_figure(t.scaling), plots.efficiency_figure(t.scaling),
                plots.layouts_figure(t.layouts, t.scaling)):
        title_says_where(fig.axes[0].get_title())
        assert "2 run(s) per point" in fig.axes[0].get_title()
    ttt = [tta(layout, m, hosts=hosts, global_batch=32 * n, epochs_to_target=3.0, metric_name="top1_accuracy",
               target=0.95) for layout, hosts, n in (("1x1", "node1", 1), ("2x1", "node1;node2", 2)) for m in (2, 2.2)]
    for r in ttt:
        r.link = LINK
    title_says_where(plots.time_to_train_figure(build_tables(ttt).time_to_train).axes[0].get_title())
    falls = waterfall.waterfall_rows(runs, t.scaling)
    fall_title = waterfall.figure(falls).axes[-1].get_title()
    title_says_where(fall_title)
    assert "2 runs of 1x1, 2 runs of 2x1" in fall_title
    [fit] = predict.fit_groups(runs)
    pred_title = predict.figure(predict.prediction_rows([fit], [Layout(2, 2)]), [fit]).axes[0].get_title()
    title_says_where(pred_title)
    assert "fitted on 2 runs of 1x1, 2 runs of 1x2, 2 runs of 2x1" in pred_title
    # The study's speed-up takes the fewest-node layout per count (1x1, 1x2): one host, no link.
    study = study_tables.figure(study_tables.speedup_rows(t), "demo").axes[0].get_title()
    assert "devices: CPUs (no GPU) · 2 run(s) per point\nhost: node1" in study
    bench = [AllreduceRow(run_id="b1", impl="horovod", dtype="fp32", bytes=1 << 20, time_mean_s=0.1, busbw_gb_s=0.01,
                          world_size=2, nodes=2, gpus_per_node=1, layout="2x1", hosts="node1;node2")]
    title = AR.figure(bench, link=LINK, devices="CPUs (no GPU)").axes[0].get_title()
    title_says_where(title)
    assert "1 run" in title


def test_gpu_runs_are_called_gpus_and_cpu_runs_ranks():
    gpu = build_tables(placed_runs(devices="A100"))
    fig = plots.throughput_figure(gpu.scaling)
    title_says_where(fig.axes[0].get_title(), cpus=False)
    assert "scale-out (1 GPU/node)" in plots.series_labels(fig)[0] and fig.axes[0].get_xlabel() == "GPUs"
    cpu = plots.throughput_figure(build_tables(placed_runs()).scaling).axes[0]
    assert "scale-out (1 rank/node)" in cpu.get_legend_handles_labels()[1]
    assert cpu.get_xlabel().startswith("CPU ranks") and "GPU/node" not in str(cpu.get_legend_handles_labels()[1])


def test_efficiency_has_two_sigma_error_bars():
    fig = plots.efficiency_figure(tables().scaling)
    torch = fig.axes[1]
    # 2x2: 390 ± 14.142 samples/s against 1x1's 100 ± 10: efficiency 97.5 %, 2σ from both spreads.
    rows = {r.layout: r for r in tables().scaling if r.framework == "torch"}
    expected = 2 * 97.5 * ((14.142135623730951 / 390) ** 2 + (10 / 100) ** 2) ** 0.5
    assert rows["2x2"].efficiency_2sigma * 100 == pytest.approx(expected)
    bars = [seg for c in torch.collections if c.__class__.__name__ == "LineCollection" for seg in c.get_segments()]
    spans = sorted(round(abs(seg[1][1] - seg[0][1]), 6) for seg in bars)  # each bar spans 2 × 2σ
    assert round(2 * expected, 6) in spans


def test_layout_bars_ring_flagged_layouts_and_keep_the_legend_off_the_ideal_lines():
    runs = [run("1x1", 100, hosts="n1"), run("1x1", 100.5, hosts="n1"), run("1x2", 190, hosts="n1"),
            run("1x2", 191, hosts="n1"), run("2x1", 120, hosts="n1;n2"), run("2x1", 180, hosts="n1;n2")]
    t = build_tables(runs)  # 2x1's runs spread 28 %: noisy
    [ax] = plots.layouts_figure(t.layouts, t.scaling).axes
    bars = {label.get_text(): p for label, p in zip(ax.get_xticklabels(),
                                                     [p for c in ax.containers if hasattr(c, "patches")
                                                      for p in c.patches])}
    assert bars["2x1"].get_edgecolor()[:3] == (1.0, 0.0, 0.0) and bars["1x2"].get_edgecolor()[:3] != (1.0, 0.0, 0.0)
    assert plots.FLAGGED in plots.series_labels(ax.figure)[0]
    fig = ax.figure
    fig.canvas.draw()
    legend, panel = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= panel.y0  # under the panel: it covers neither a bar nor an ideal line


def test_time_to_train_in_seconds_with_epochs_target_and_readable_ticks():
    ttt = [tta("1x1", m, global_batch=16, epochs_to_target=3.0, metric_name="top1_accuracy", target=0.95)
           for m in (0.07, 0.09)]
    ttt += [tta("1x2", m, global_batch=32, epochs_to_target=5.0, metric_name="top1_accuracy", target=0.95)
            for m in (0.13, 0.15)]
    fig = plots.time_to_train_figure(build_tables(ttt).time_to_train)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_ylabel().startswith("time to train (s)")  # 4.8 s, not "0.08 min"
    assert "target: top1_accuracy 0.95" in ax.get_title()
    assert sorted(t.get_text() for t in ax.texts) == ["3 epochs", "5 epochs"]
    low, high = ax.get_ylim()
    shown = [t for t in ax.get_yticks() if low <= t <= high]
    assert len(shown) >= 3  # a log axis with one or two labels cannot be read


def test_waterfall_bars_carry_their_numbers_a_legend_and_a_visible_small_gain():
    from hvdbench.results.analyses import waterfall

    runs = placed_runs()
    falls = waterfall.waterfall_rows(runs, build_tables(runs).scaling)
    # a gain of 0.2 samples/s against an ideal of ~200
    fall = replace(next(f for f in falls if f.layout == "1x2"), unattributed=-0.2)
    fig = waterfall.figure([fall])
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts[0] == f"{fall.ideal:,.1f}" and texts[-1] == f"{fall.measured:,.1f}" and "+0.2" in texts
    gain = ax.patches[5]  # ideal, comm, imbalance, data, compute, unattributed, measured
    assert gain.get_facecolor()[:3] == pytest.approx((0.172, 0.627, 0.172), abs=0.01)  # green
    assert gain.get_height() >= 0.01 * fall.ideal  # drawn tall enough to see; the number is exact
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(label.startswith("loss") for label in labels) and any(label.startswith("gain") for label in labels)


def test_the_prediction_plot_rings_and_names_flagged_layouts():
    from hvdbench.results.predict import throughput as predict

    runs = placed_runs()
    [fit] = predict.fit_groups(runs)
    fit.cores, fit.cores_from = 2, "given"
    fig = predict.figure(predict.prediction_rows([fit], [Layout(4, 1)]), [fit])
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("CPU ranks")
    assert predict.FLAGGED in ax.get_legend_handles_labels()[1]
    assert "4x1" in [t.get_text() for t in ax.texts]
    assert "ringed 4x1: oversubscribed" in ax.get_xlabel()  # why, under the axis


# --- issue 50: nothing capped silently, one unit for one set of runs, no 2σ of one run, CPU words ----

def test_no_waterfall_panel_is_left_out_past_twelve(tmp_path):
    """14 layouts: waterfall.png holds 12 panels and waterfall-2.png the other 2, each page saying so."""
    from hvdbench.results.analyses import waterfall
    from hvdbench.results.render.tables import pages

    runs = placed_runs()
    fall = next(f for f in waterfall.waterfall_rows(runs, build_tables(runs).scaling) if f.layout == "1x2")
    many = [replace(fall, layout=f"{n}x2") for n in range(1, 15)]
    figs = pages("waterfall", many, waterfall.figure)
    assert [len(f.axes) for f in figs] == [12, 2]
    assert figs[1]._suptitle.get_text().startswith("page 2 of 2: panels 13-14 of 14 (all in waterfall.png, waterfall-2.png)")
    assert figs[1].axes[-1].get_title().startswith("14x2 vs 1x1: resnet50 · ")
    written = waterfall.write(many, tmp_path, ("csv", "png"))
    assert [p.name for p in written] == ["waterfall.csv", "waterfall.png", "waterfall-2.png"]
    twelve = pages("waterfall", many[:12], waterfall.figure)
    assert [len(f.axes) for f in twelve] == [12] and twelve[0]._suptitle is None  # one page: as before


def test_the_convergence_figure_draws_every_model():
    from hvdbench.results.analyses import convergence as CV
    from hvdbench.results.records.rows import TttGroup
    from hvdbench.results.render.tables import pages

    fit = CV.fit([(32, 1000.0), (64, 1200.0), (128, 1700.0)])
    rows = [CV._row(TttGroup(system="cpu", model=f"m{i}"), "runs", "", "samples", fit, "") for i in range(13)]
    figs = pages("convergence", CV.panels(rows), lambda chunk: CV.figure(rows, chunk))
    assert [len(f.axes) for f in figs] == [12, 1] and figs[1].axes[0].get_title().startswith("m12:")


def test_engines_of_one_run_each_have_no_two_sigma_and_cpu_words():
    from hvdbench.results.analyses import engines

    runs = [run(layout, t, engine=engine, hosts="node1") for layout, t in (("1x1", 100), ("1x2", 180))
            for engine in ("ddp", "fsdp")]
    rows = engines.engine_rows(runs, build_tables(runs).scaling)
    assert {r.vs_reference_2sigma for r in rows} == {None} and {r.within_noise for r in rows} == {None}
    text = engines.markdown(rows)
    assert "± 0.0" not in text and "| 100.0 |" in text
    fig = engines.figure(rows)
    left = fig.axes[0]
    assert not [c for c in left.containers if getattr(c, "errorbar", None) is not None]  # no zero-length 2σ bars
    assert left.get_xlabel() == "layout (nodes x ranks per node)"
    assert "2σ" not in left.get_ylabel().replace("no 2σ", "")  # the axis promises no spread it does not draw
    spread = [run("1x1", t, engine=e, hosts="node1") for t in (100, 110) for e in ("ddp", "fsdp")]
    with_spread = engines.engine_rows(spread, build_tables(spread).scaling)
    assert "± 14.1" in engines.markdown(with_spread)
    drawn = engines.figure(with_spread).axes[0]
    assert [c for c in drawn.containers if getattr(c, "errorbar", None) is not None]
    assert drawn.get_ylabel() == "samples/s (± 2σ)"


def test_cpu_runs_name_their_cpu_model_in_plots_and_summary(tmp_path):
    import json

    from click.testing import CliRunner

    from hvdbench.cli.main import cli
    from hvdbench.results.records.store import append_run

    sweep = tmp_path / "s"
    for layout, t in (("1x1", 100), ("1x1", 104), ("1x2", 190), ("1x2", 186)):
        append_run(sweep / "runs.csv", run(layout, t, hosts="node1"))
    (sweep / "sweep.json").write_text(json.dumps({"hardware": {"node1": {"cpu": {"model": "AMD EPYC 7B13",
                                                                                "cores": 2}}}}))
    result = CliRunner().invoke(cli, ["report", str(sweep), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "CPU: AMD EPYC 7B13" in (tmp_path / "r" / "summary.md").read_text()
    from hvdbench.results.records.store import load_sweeps

    scaling = build_tables(load_sweeps([sweep])).scaling
    assert "CPU: AMD EPYC 7B13" in plots.throughput_figure(scaling).axes[0].get_title()


def test_the_prediction_heading_says_rank_on_cpus():
    from hvdbench.results.predict import throughput as predict

    runs = placed_runs()
    [fit] = predict.fit_groups(runs)
    text = predict.markdown(predict.prediction_rows([fit], [Layout(4, 1)]), [fit])
    assert "· batch 32/rank —" in text and "/GPU" not in text


def test_many_groups_are_paged_and_single_points_said_not_drawn(tmp_path):
    # issue 58: the published v4.1 report drew ~110 panels a figure, up to 27,140 px tall, most of
    # them one point (a group run at one GPU count)
    runs = [run(layout, t, model=f"m{i}") for i in range(14) for layout, t in (("1x1", 100), ("1x2", 180))]
    runs += [run("1x4", 300, model=f"alone{i}") for i in range(3)]
    t = build_tables(runs)
    written, said = plots.write_plots(t, tmp_path)
    names = [p.name for p in written]
    assert names[:2] == ["throughput_vs_gpus.png", "throughput_vs_gpus-2.png"]
    assert "efficiency_vs_gpus-2.png" in names
    for path in written:  # never taller than two screens
        assert matplotlib.image.imread(path).shape[0] <= 2 * 1080
    assert "throughput_vs_gpus.png: 3 group(s) with one CPU rank count not drawn (a point, not a line; " \
           "their rows are in the CSV)" in said
    drawn, alone = plots.line_groups(t.scaling, lambda r: r.scaling_group(), lambda r: r.throughput_mean)
    assert len(drawn) == 14 and sorted(g[0].model for g in alone) == ["alone0", "alone1", "alone2"]
    # where no group has a line, every point is drawn: a one-layout sweep still gets its plot
    lone = build_tables([run("1x1", 100)])
    assert "throughput_vs_gpus.png" in [p.name for p in plots.write_plots(lone, tmp_path / "lone")[0]]


def _data_points(ax):
    """Every plotted point's display coordinates (lines, error-bar caps, scatter rings)."""
    points = [ax.transData.transform(xy) for line in ax.get_lines() for xy in line.get_xydata()]
    points += [ax.transData.transform(xy) for c in ax.collections for xy in c.get_offsets()]
    return points


def test_legends_never_cover_the_data():
    # issue 58: the legend sat on data (throughput_vs_gpus, stragglers)
    from test_stragglers import slow_node3_cluster

    from hvdbench.results.analyses import stragglers

    t = tables()
    figs = [plots.throughput_figure(t.scaling), plots.efficiency_figure(t.scaling),
            plots.time_to_train_figure(t.time_to_train), plots.layouts_figure(t.layouts, t.scaling),
            stragglers.figure(stragglers.stragglers(slow_node3_cluster()))]
    for fig in figs:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend().get_window_extent(renderer)
            assert not legend.overlaps(ax.get_window_extent(renderer)), ax.get_title()
            assert not any(legend.contains(x, y) for x, y in _data_points(ax)), ax.get_title()
            bars = [p.get_window_extent(renderer) for p in ax.patches]
            assert not any(legend.overlaps(b) for b in bars), ax.get_title()


def test_a_panel_whose_every_point_is_flagged_rings_none_and_says_it_once():
    # issue 58: on a busy machine every point was ringed, so the ring said nothing
    busy = build_tables([run("1x1", t, other_cpus=1.5) for t in (100, 101)]
                        + [run("1x2", t, other_cpus=1.5) for t in (190, 191)]).scaling
    assert all("busy" in r.flags for r in busy)
    fig = plots.throughput_figure(busy)
    assert plots.FLAGGED not in plots.series_labels(fig)[0]
    assert "every point flagged: busy (summary.md)" in fig.axes[0].get_title()


def test_panels_of_one_machine_name_it_once_in_the_figures_title():
    # issue 58: 5-7-line titles repeated the machine in every panel
    runs = placed_runs()
    for r in placed_runs():
        r.framework = "tensorflow"
        runs.append(r)
    t = build_tables(runs)
    for fig in (plots.throughput_figure(t.scaling), plots.efficiency_figure(t.scaling),
                plots.layouts_figure(t.layouts, t.scaling)):
        assert len(fig.axes) == 2
        title_says_where(fig.get_suptitle())
        assert all("devices:" not in ax.get_title() and "host" not in ax.get_title() for ax in fig.axes)
        assert {ax.get_title().split(" · ")[2] for ax in fig.axes} == {"torch", "tensorflow"}
    # panels of different machines keep each their own
    other = placed_runs(devices="A100")
    fig = plots.throughput_figure(build_tables(placed_runs() + other).scaling)
    assert not fig.get_suptitle() and all("devices:" in ax.get_title() for ax in fig.axes)


def test_waterfall_layouts_without_a_breakdown_are_said_not_drawn(tmp_path):
    # issue 58: over the published v4.1 tree every waterfall panel was ideal, "–" x 4, unattributed,
    # measured: two pages of PNG saying what the table says
    from hvdbench.results.analyses import waterfall

    runs = placed_runs()
    fall = next(f for f in waterfall.waterfall_rows(runs, build_tables(runs).scaling) if f.layout == "1x2")
    bare = [replace(fall, layout=f"{n}x8", comm_loss=None, imbalance_loss=None, data_loss=None, compute_loss=None)
            for n in range(1, 4)]
    assert [p.name for p in waterfall.write(bare, tmp_path / "bare")] == ["waterfall.csv"]
    assert len((tmp_path / "bare" / "waterfall.csv").read_text().splitlines()) == 4  # every row in the table
    written = waterfall.write([fall, *bare], tmp_path / "mixed")
    assert [p.name for p in written] == ["waterfall.csv", "waterfall.png"]
    assert len(waterfall.broken_down([fall, *bare])) == 1
    assert "3 layout(s) without a step breakdown (published logs, --no-breakdown): their whole loss is " \
           "unattributed, said in their rows here and not drawn in waterfall.png." in waterfall.markdown([fall, *bare])


def test_the_convergence_plot_names_the_machine_and_draws_no_curve_through_two_points():
    # issue 58: convergence.png named no machine and fitted a 2-parameter curve through 2 points
    from hvdbench.results.analyses import convergence as CV
    from hvdbench.results.records.rows import TttGroup

    two = CV.fit([(16, 4311.0), (32, 7185.0)])
    three = CV.fit([(32, 1000.0), (64, 1200.0), (128, 1700.0)])
    assert two.status == CV.TWO_POINTS and three.status == CV.FIT
    rows = [CV._row(TttGroup(system="cpu", model="resnet50"), "runs", "", "samples", two, ""),
            CV._row(TttGroup(system="NVIDIA H100", model="bert"), "runs", "", "samples", three, "")]
    axes = {ax.get_title().split(":")[0]: ax for ax in CV.figure(rows).axes}
    assert "runs on CPUs (no GPU)" in axes["resnet50"].get_title()
    assert "two batch sizes: points only, no curve" in axes["resnet50"].get_title()
    assert [len(line.get_xdata()) for line in axes["resnet50"].get_lines()] == [2]  # the points, no curve
    assert "runs on NVIDIA H100" in axes["bert"].get_title()
    assert sorted(len(line.get_xdata()) for line in axes["bert"].get_lines()) == [3, 41]  # points and curve


def test_the_convergence_plot_of_many_systems_pools_their_points_under_the_panel():
    # the published v4.1 report: 25 systems on BERT gave 25 colours and legend lines over the data, and a
    # title naming every system ran across the next panel
    from hvdbench.results.analyses import convergence as CV
    from hvdbench.results.records.rows import TttGroup

    curve = CV.fit([(32, 1000.0), (64, 1200.0), (128, 1700.0)])
    rows = [CV._row(TttGroup(system="NVIDIA / Eos", model="bert"), "runs", "", "samples", curve, "")]
    rows += [CV._row(TttGroup(system=f"Vendor {i} / ThinkSystem SR685a V3 with H200-SXM5-141GB", model="bert"),
                     "runs", "", "samples", CV.fit([(48 + i, 1100.0 + i)]), "") for i in range(CV.NAMED_SYSTEMS + 2)]
    rows += [CV._row(TttGroup(system="cpu", model="resnet50"), "runs", "", "samples", curve, "")]
    fig = CV.figure(rows)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bert, resnet = fig.axes
    names = bert.get_legend_handles_labels()[1]
    pooled = f"runs of {CV.NAMED_SYSTEMS + 2} systems without a curve (convergence.csv)"
    assert names[0] == pooled and "runs: NVIDIA / Eos" in names and len(names) == 3  # pooled, Eos, its curve
    assert f"runs on {CV.NAMED_SYSTEMS + 3} systems (convergence.csv names each)" in bert.get_title()
    assert resnet.get_legend_handles_labels()[1][0] == "runs: cpu"  # one system: named, its own colour
    assert "runs on CPUs (no GPU)" in resnet.get_title()
    width = fig.bbox.width / 2
    for i, ax in enumerate(fig.axes):
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(ax.get_window_extent(renderer)), ax.get_title()
        box = ax.title.get_window_extent(renderer)
        assert i * width - 1 <= box.x0 and box.x1 <= (i + 1) * width + 1, ax.get_title()


def test_a_point_two_layout_families_share_gets_one_epochs_label():
    # issue 58: two "5 epochs" labels overlapped where the scale-out line starts at the 1xG point
    runs = [tta(layout, m, global_batch=32 * g, epochs_to_target=e) for layout, g, e in
            (("1x1", 1, 3.0), ("1x2", 2, 5.0), ("2x2", 4, 6.0)) for m in (30 / g, 31 / g)]
    ax = plots.time_to_train_figure(build_tables(runs).time_to_train).axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert sorted(labels) == ["3 epochs", "5 epochs", "6 epochs"]


def test_a_long_link_name_is_wrapped_inside_its_panel():
    # issue 58: a published system's interconnect ran past its panel's edge into the next panel
    link = ("8x NVIDIA ConnectX-7 400Gb/s NDR InfiniBand per node, rail-optimised fat tree, "
            "SHARPv3 in-network reduction | 2x 200Gb/s HDR for storage and management")
    runs = [run("1x1", 100, hosts="node1"), run("2x1", 170, hosts="node1;node2"),
            run("1x1", 60, hosts="node3", framework="tensorflow"),
            run("2x1", 110, hosts="node3;node4", framework="tensorflow")]
    for r in runs:
        r.link = link
    fig = plots.throughput_figure(build_tables(runs).scaling)
    assert len(fig.axes) == 2
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width / 2  # two panels side by side
    for i, ax in enumerate(fig.axes):
        title = ax.title
        box = title.get_window_extent(renderer)
        assert "SHARPv3" in title.get_text().replace("\n", " ")  # wrapped, not cut
        assert i * width - 1 <= box.x0 and box.x1 <= (i + 1) * width + 1, (box, title.get_text())
