"""The report's plots: valid PNG files of the expected size, with the expected series."""

import matplotlib.image

from hvdbench.results import plots
from hvdbench.results.aggregate import build_tables

from test_report_aggregate import run, sweep_runs, tta

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
    assert plots.series_labels(fig) == [
        ["ideal (linear)", "scale-up (1 node)"],
        ["ideal (linear)", "scale-up (1 node)", "scale-out (1 GPU/node)", "scale-out (2 GPUs/node)"],
    ]
    torch = fig.axes[1]
    ideal = next(l for l in torch.get_lines() if l.get_label() == "ideal (linear)")
    assert list(ideal.get_xdata()) == [1, 2, 4] and list(ideal.get_ydata()) == [100, 200, 400]
    scale_out_2 = next(c for c in torch.containers if c.get_label() == "scale-out (2 GPUs/node)")
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
    assert plots.series_labels(fig) == [["ideal (linear)", "scale-up (1 node)", "scale-out (2 GPUs/node)"]]


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
    assert {r["layout"]: r["link"] for r in t.scaling} == {"1x1": "", "1x2": "", "2x1": "emulated veth bridge, 100mbit"}
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
