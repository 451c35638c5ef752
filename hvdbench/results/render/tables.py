"""The report's tables as CSV (4 significant digits, one flat row per line) and as Markdown (one small
table per model group, rounded, the way published scaling studies print them).

    write_csvs(tables, Path("report"))                 # scaling.csv, layouts.csv, ... (aggregate.Tables.FILES)
    text = markdown(tables, sources=["results/demo"], notes=reading_notes)  # also printed by `hvdbench report`
    write_markdown(text, Path("report"))               # summary.md
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hvdbench.files import atomic_write_png, atomic_write_text
from hvdbench.results.mllog import NOT_CHECKED
from hvdbench.results.records.rows import ScalingGroup, TttGroup
from hvdbench.results.stats.aggregate import (
    FLAGS,
    NOISY_CV,
    NOTES,
    SWEEP_SOURCE,
    Tables,
    device_word,
    group_title,
    noise_cause,
    thread_note,
    where_ran,
)


def to_csv(rows: list, columns: tuple[str, ...]) -> str:
    """Every report CSV: a header of `columns` (a row class's, ReportRow.columns), one line per
    row (ReportRow.cells); None is an empty cell."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(row.cells(columns))
    return buf.getvalue()


def write_csvs(tables: Tables, out: Path) -> list[Path]:
    written = []
    for name, row_type in Tables.FILES:
        path = Path(out) / f"{name}.csv"
        atomic_write_text(path, to_csv(getattr(tables, name), row_type.columns()))
        written.append(path)
    return written


def write_table(out: Path, name: str, rows: list, columns, formats=("csv", "png"), figure=None) -> list[Path]:
    """NAME.csv (when "csv" is in `formats`; its header even without rows) and NAME.png drawn by
    `figure()` (when "png" is, and a figure is given: None where there is nothing to draw). A
    `figure()` that returns a list of pages (`pages`) writes NAME.png, NAME-2.png, ..."""
    written = []
    if "csv" in formats:
        written.append(Path(out) / f"{name}.csv")
        atomic_write_text(written[-1], to_csv(rows, columns))
    if "png" in formats and figure is not None:
        drawn = figure()
        for i, fig in enumerate(drawn if isinstance(drawn, list) else [drawn]):
            written.append(atomic_write_png(fig, Path(out) / (f"{name}.png" if i == 0 else f"{name}-{i + 1}.png")))
    return written


PANELS_PER_PAGE = 12  # a figure's panels per PNG; the next ones go to NAME-2.png, NAME-3.png, ...


def pages(name: str, panels: list, draw, per: int = PANELS_PER_PAGE) -> list:
    """`draw(chunk)` for each `per` of `panels` (write_table writes them as NAME.png, NAME-2.png, ...):
    no panel is left out; with more than one page each says which panels it holds and where the others are."""
    chunks = [panels[i:i + per] for i in range(0, len(panels), per)] or [[]]
    figs = []
    for i, chunk in enumerate(chunks):
        fig = draw(chunk)
        if len(chunks) > 1:
            first = i * per + 1
            page = (f"page {i + 1} of {len(chunks)}: panels {first}-{first + len(chunk) - 1} of {len(panels)} "
                    f"(all in {name}.png, " + ", ".join(f"{name}-{n}.png" for n in range(2, len(chunks) + 1)) + ")")
            own = fig.get_suptitle()  # the figure's own title (where its panels ran), kept under the page's line
            fig.suptitle(page + (f"\n{own}" if own else ""), fontsize=9)
        figs.append(fig)
    return figs


def write_markdown(text: str, out: Path) -> Path:
    path = Path(out) / "summary.md"
    atomic_write_text(path, text)
    return path


# --- Markdown --------------------------------------------------------------------------------

DASH = "–"


def _num(value, fmt: str = ".1f", suffix: str = "") -> str:
    return DASH if value is None else f"{value:{fmt}}{suffix}"


def _pm(mean, two_sigma, fmt=".1f") -> str:
    if mean is None:
        return DASH
    return f"{mean:{fmt}}" + ("" if two_sigma is None else f" ± {two_sigma:{fmt}}")


def _pct(value, signed=False, two_sigma=None) -> str:
    if value is None:
        return DASH
    if signed:
        return f"{value:+.1f} %"
    return f"{100 * value:.1f}" + ("" if two_sigma is None else f" ± {100 * two_sigma:.1f}") + " %"


# --- durations: seconds below a minute, so a 4-second time to train does not read "0.07 min" ------

def _time_unit(minutes) -> str:
    """The unit a table's column of durations (in minutes) is shown in: 'min' when every one is a
    minute or more, 's' when every one is less, '' (each cell its own unit) when they mix."""
    known = [m for m in minutes if m is not None]
    if not known or all(m >= 1 for m in known):
        return "min"
    return "s" if all(m < 1 for m in known) else ""


def figure_time_unit(minutes) -> tuple[str, float]:
    """(unit, factor from minutes) a figure of durations draws in: ('s', 60) when every one is under
    a minute, else ('min', 1); time_to_train.png and ttt_waterfall.png choose alike for the same runs."""
    return ("s", 60.0) if _time_unit(minutes) == "s" else ("min", 1.0)


def _duration(minutes, unit: str, two_sigma=None) -> str:
    """A duration given in minutes, in `unit` (see _time_unit): '21.00', '4.3', '4.3 s' or '2.50 min'."""
    if minutes is None:
        return DASH
    cell_unit = unit or ("min" if minutes >= 1 else "s")
    scale, fmt = (1, ".2f") if cell_unit == "min" else (60, ".1f")
    text = _pm(minutes * scale, None if two_sigma is None else two_sigma * scale, fmt)
    return text + ("" if unit else f" {cell_unit}")


def _seconds(value: float) -> str:
    return f"{value:.2g} s" if value < 10 else f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def resolution(row) -> str:
    """'± 1.5 s: an evaluation every 1 epoch of ~1.5 s': how finely the evaluation cadence resolves
    a time to train (aggregate._cadence), or '' when it is not known."""
    seconds, every = row.ttt_resolution_s, row.eval_every_epochs
    if seconds is None or every in (None, ""):
        return ""
    try:
        n = float(every)
    except (TypeError, ValueError):  # runs evaluated at different cadences
        return f"± {_seconds(seconds)}: evaluations every {str(every).replace('|', ' or ')} epochs"
    per_epoch = seconds / n
    epochs = f"{n:g} epoch{'s' if n != 1 else ''}"
    return f"± {_seconds(seconds)}: an evaluation every {epochs} of ~{_seconds(per_epoch)}"


def _counts(row) -> str:
    return f"{row.runs} ({row.ok}/{row.failed}/{row.aborted}/{row.timeout})"


def markdown_table(header: list[str], lines: list[list]) -> str:
    """Every Markdown table of the report (this module's and bench_tables'). A `|` inside a cell
    is escaped, so a value such as a system name cannot split its row into extra columns."""
    def row(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([row(header), "|" + "|".join("---" for _ in header) + "|", *map(row, lines)])


def _sections(rows: list, group_of, render, footer=lambda rows: "") -> list[str]:
    """One Markdown section per run of rows of one group (`group_of(row)`: the group, its heading)."""
    out, current, chunk = [], None, []
    for row in rows + [None]:
        key = None if row is None else group_of(row)
        if chunk and key != current:
            below = footer(chunk)
            out.append(f"### {group_title(current)}\n\n{render(chunk)}\n" + (f"\n{below}\n" if below else ""))
            chunk = []
        current = key
        if row is not None:
            chunk.append(row)
    return out


def _layout_sources(rows: list) -> str:
    """The line under a group's table saying where each layout came from (MLPerf logs only: a
    sweep's layouts are its own plan)."""
    sources = [(r.layout or DASH, r.layout_source or "") for r in rows]
    if all(src in ("", SWEEP_SOURCE) for _, src in sources):
        return ""
    distinct = list(dict.fromkeys(src for _, src in sources))
    if len(distinct) == 1:
        return f"Layout from: {distinct[0]}."
    return "Layout from: " + "; ".join(f"{layout} {src}" for layout, src in dict.fromkeys(sources)) + "."


def _where(rows: list) -> str:
    """The line under a group's table naming its hosts and inter-node link (as on its plot)."""
    text = where_ran(rows, most=8)
    return text[0].upper() + text[1:] + "." if text else ""


def _footer(*parts):
    return lambda rows: "\n\n".join(p for p in (f(rows) for f in parts) if p)


def _scaling_md(rows):
    flagged = any(r.flags for r in rows)
    return markdown_table(
        ["layout", device_word(rows[0], plural=True), "scale", "runs (ok/failed/aborted/timeout)",
         "samples/s mean ± 2σ", "std", f"per {device_word(rows[0])}", "speed-up", "efficiency ± 2σ"]
        + ["check"] * flagged,
        [[r.layout, r.gpus, r.scale, _counts(r), _pm(r.throughput_mean, r.throughput_2sigma),
          _num(r.throughput_std), _num(r.throughput_per_gpu), _num(r.speedup, ".2f", "×"),
          _pct(r.efficiency, two_sigma=r.efficiency_2sigma)]
         + [", ".join((r.flags or "").split(";")) or ""] * flagged for r in rows])


def _noise_notes(rows: list) -> str:
    """Under a group's table: why its `noisy` layouts' runs spread, from what they recorded
    (aggregate.noise_cause), layouts of one cause together; what every flag means is said once, under
    Flags at the end (flag_notes)."""
    causes: dict[str, list[str]] = {}
    for r in rows:
        if "noisy" in (r.flags or "").split(";"):
            causes.setdefault(noise_cause(r), []).append(r.layout)
    return "\n".join(f"- **noisy** ({', '.join(layouts)}): runs spread more than {NOISY_CV:.0%} "
                     f"(coefficient of variation); {cause}." for cause, layouts in causes.items())


def flag_notes(rows: list) -> str:
    """The Flags section: what each flag the scaling rows carry means, once for the whole report (the
    scaling tables' and the speed-up across models' `check`); '' when none is flagged."""
    used = list(dict.fromkeys(f for r in rows for f in (r.flags or "").split(";") if f))
    if not used:
        return ""
    return ("## Flags (the `check` columns)\n\n" + "\n".join(f"- **{flag}**: {FLAGS[flag]}." for flag in used)
            + "\n")


def _layouts_md(rows):
    return markdown_table(
        [device_word(rows[0], plural=True), "layout", "vs", "runs (ok/failed/aborted/timeout)", "samples/s mean ± 2σ",
         "relative", "Δ", "2σ noise", "within noise"],
        [[r.gpus, r.layout, "reference" if r.layout == r.reference else r.reference,
          _counts(r), _pm(r.throughput_mean, r.throughput_2sigma), _num(r.relative, ".3f"),
          _pct(r.delta_pct, signed=True), DASH if r.noise_2sigma_pct is None else f"± {r.noise_2sigma_pct:.1f} %",
          {True: "yes", False: "no", None: DASH}[r.within_noise]] for r in rows])


def _target(row) -> str:
    """'top1_accuracy 0.951 (target 0.95)': what was reached, against what."""
    if row.metric is None and row.target is None:
        return DASH
    reached = DASH if row.final_metric_mean is None else f"{row.final_metric_mean:.4g}"
    return f"{row.metric or 'metric'} {reached} (target {row.target if row.target is not None else DASH})"


def _rcp(row) -> str:
    """'Pass ×1.0294 (34 vs RCP 35)': the RCP check of a row and the rescale it brought."""
    check, factor = row.rcp_check, row.rcp_factor
    if not check:
        return DASH
    if check == NOT_CHECKED:
        return f"not checked ({(row.rcp_note or '').split(':')[0]})"
    versus = ""
    if row.converge_mean is not None and row.rcp_mean is not None:
        bound = "RCP" if check == "Pass" else "lowest accepted"
        value = row.rcp_mean if check == "Pass" or row.rcp_min is None else row.rcp_min
        versus = f" ({row.converge_mean:.6g} vs {bound} {value:.6g})"
    if check == "Pass":
        return (f"Pass ×{factor:.4f}" if factor and factor != 1 else "Pass") + versus
    return check + (versus or f": {row.rcp_note}")


def _ttt_md(rows):
    """One group's time-to-train table. Epoch columns for epoch-based logs, samples columns for
    sample-based ones (BERT), RCP columns for MLPerf logs; the CSV has them all."""
    samples = any(r.samples_to_target_mean is not None for r in rows)
    epochs = any(r.epochs_mean is not None or r.time_per_epoch_min is not None for r in rows) or not samples
    rcp = any(r.rcp_check for r in rows)
    rescaled = any(r.rcp_factor not in (None, 1.0) for r in rows)
    cadence = any(resolution(r) for r in rows)
    # Seconds where the runs took less than a minute (a debug run's 4.3 s is not "0.07 min").
    unit = _time_unit([m for r in rows for m in (r.ttt_min, r.ttt_mean_min, r.ttt_rcp_min)])
    per_epoch = _time_unit([r.time_per_epoch_min for r in rows])
    in_unit = f" ({unit})" if unit else ""
    header = ["layout", device_word(rows[0], plural=True), "global batch", "runs", "converged",
              "reached (mean of converged)"]
    header += ["epochs", f"{per_epoch or 'time'}/epoch"] * epochs
    header += ["samples to target", "min per 1M samples"] * samples
    header += [f"time to train{in_unit}"] + ["resolution (evaluation cadence)"] * cadence
    header += [f"RCP-normalised{in_unit}", "RCP"] * rcp
    header += [f"mean ± 2σ{in_unit}", "speed-up"] + ["speed-up (RCP)"] * rescaled + ["efficiency", "scoring"]
    lines = []
    # Two results at one layout (one per round or software stack: mllog.groups): say which is which.
    twice = {r.layout for r in rows if sum(o.layout == r.layout for o in rows) > 1}
    for r in rows:
        where = r.layout or DASH
        if r.layout in twice and r.result:
            where += f" [{r.result}]"
        line = [where, r.gpus or DASH, r.global_batch or DASH, r.runs, r.converged, _target(r)]
        if epochs:
            line += [_num(r.epochs_mean, ".2f"), _duration(r.time_per_epoch_min, per_epoch)]
        if samples:
            line += [_num(r.samples_to_target_mean, ",.0f"), _num(r.time_per_1m_samples_min, ".2f")]
        line.append("DNF" if r.ttt_min is None and r.runs else _duration(r.ttt_min, unit))
        if cadence:
            line.append(resolution(r) or DASH)
        if rcp:
            line += ["DNF" if r.ttt_rcp_min is None and r.runs and r.rcp_factor
                     else _duration(r.ttt_rcp_min, unit), _rcp(r)]
        line += [_duration(r.ttt_mean_min, unit, r.ttt_2sigma_min), _num(r.speedup, ".2f", "×")]
        if rescaled:
            line.append(_num(r.speedup_rcp, ".2f", "×"))
        line += [_pct(r.efficiency), r.scoring]
        lines.append(line)
    return markdown_table(header, lines)


def _epochs_md(rows):
    """Time per epoch and epochs; samples to target and minutes per 1M samples for sample-counted
    benchmarks (their epoch columns are empty), in place of the epoch columns when no row has those."""
    samples = any(r.samples_to_target_mean is not None for r in rows)
    epochs = any(r.epochs_mean is not None or r.time_per_epoch_min is not None for r in rows) or not samples
    unit = _time_unit([r.time_per_epoch_min for r in rows])
    header = [device_word(rows[0], plural=True), "layout", "global batch"]
    header += ["avg time per epoch" + (f" ({unit})" if unit else ""), "epochs"] * epochs
    header += ["samples to target", "min per 1M samples"] * samples
    lines = []
    for r in rows:
        line = [r.gpus or DASH, r.layout or DASH, r.global_batch or DASH]
        if epochs:
            line += [_duration(r.time_per_epoch_min, unit), _num(r.epochs_mean, ".2f")]
        if samples:
            line += [_num(r.samples_to_target_mean, ",.0f"), _num(r.time_per_1m_samples_min, ".2f")]
        lines.append(line + [r.precision or DASH, f"{r.runs} ({r.converged})"])
    return markdown_table(header + ["precision", "runs (converged)"], lines)


def markdown(tables: Tables, sources=(), notes=(), header=()) -> str:
    """The report's Markdown: `header` lines under the title (the PyTorch versions the runs used,
    stats/versions.py), every table, one section per group, then the footnotes (`footnotes`)."""
    return body(tables, sources, header) + footnotes(tables, notes)


def body(tables: Tables, sources=(), header=()) -> str:
    """The title, `header` lines and every table, one section per group (summary.md puts the other
    sections after them and `footnotes` at its end: Report.text)."""
    parts = ["# hvdbench report", ""]
    if sources:
        parts += [f"{tables.runs} runs from: " + ", ".join(f"`{s}`" for s in sources), ""]
    parts += [line for text in header for line in (text, "")]
    sections = (
        ("Scaling (throughput, samples/s)", tables.scaling, ScalingGroup.scaling_group, _scaling_md,
         _footer(_noise_notes, thread_note, _where, _layout_sources)),
        ("Scale-up vs scale-out (same GPU count, different layouts)", tables.layouts, ScalingGroup.scaling_group,
         _layouts_md, _where),
        ("Time to train (MLPerf: run_start → run_stop)", tables.time_to_train, TttGroup.ttt_group, _ttt_md,
         _footer(_where, _layout_sources)),
        ("Epochs and time per epoch", tables.epochs, lambda row: row.title_group, _epochs_md, lambda rows: ""),
    )
    for heading, rows, group, render, footer in sections:
        parts.append(f"## {heading}\n")
        parts += _sections(rows, group, render, footer) or ["(no runs of this kind)\n"]
    return "\n".join(parts) + "\n"


def footnotes(tables: Tables, notes=()) -> str:
    """Once, at the report's end: what each flag means (Flags), then `notes` (what reading the inputs
    found: files read and skipped, with the reasons) and the rules (Notes)."""
    parts = [flag_notes(tables.scaling)] if flag_notes(tables.scaling) else []
    if notes:
        parts.append("## Inputs\n")
        parts += [f"- {note}" for note in notes] + [""]
    parts.append("## Notes\n")
    parts += [f"- {note}" for note in NOTES]
    return "\n".join(parts) + "\n"
