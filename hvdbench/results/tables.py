"""The report's tables as CSV (full precision, one flat row per line) and as Markdown (one small
table per model group, rounded, the way published scaling studies print them).

    write_csvs(tables, Path("report"))                 # scaling.csv, layouts.csv, ... (schema.REPORT_COLUMNS)
    text = markdown(tables, sources=["results/demo"], notes=reading_notes)  # also printed by `hvdbench report`
    write_markdown(text, Path("report"))               # summary.md
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hvdbench.results.aggregate import FLAGS, NOTES, SWEEP_SOURCE, Tables, where_ran
from hvdbench.results.mllog import NOT_CHECKED
from hvdbench.results.schema import REPORT_COLUMNS, SCALING_GROUP, TTT_GROUP, atomic_write_text


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return repr(value) if isinstance(value, float) else str(value)


def to_csv(rows: list[dict], columns) -> str:
    """Every report CSV: a header of `columns`, one line per row; None is an empty cell."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def write_csvs(tables: Tables, out: Path) -> list[Path]:
    written = []
    for name, columns in REPORT_COLUMNS.items():
        path = Path(out) / f"{name}.csv"
        atomic_write_text(path, to_csv(getattr(tables, name), columns))
        written.append(path)
    return written


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


def _pct(value, signed=False) -> str:
    return DASH if value is None else f"{value:+.1f} %" if signed else f"{100 * value:.1f} %"


def _counts(row: dict) -> str:
    return f"{row['runs']} ({row['ok']}/{row['failed']}/{row['aborted']}/{row['timeout']})"


def markdown_table(header: list[str], lines: list[list]) -> str:
    """Every Markdown table of the report (this module's and bench_tables'). A `|` inside a cell
    is escaped, so a value such as a system name cannot split its row into extra columns."""
    def row(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([row(header), "|" + "|".join("---" for _ in header) + "|", *map(row, lines)])


def _title(row: dict, group: tuple) -> str:
    """'resnet50 · debug · torch · fp32 · throughput · batch 32/GPU — <system>' from the group keys."""
    parts = [row[k] for k in ("model", "flavor", "framework", "precision", "mode") if k in group]
    if row.get("batch_per_gpu") and "batch_per_gpu" in group:
        accum = row.get("accum_steps", 1)
        parts.append(f"batch {row['batch_per_gpu']}/GPU" + (f" × {accum} accum" if accum > 1 else ""))
    title = " · ".join(str(p) for p in parts if p)
    return title + (f" — {row['system']}" if row.get("system") else "")


def _sections(rows: list[dict], group: tuple, render, footer=lambda rows: "") -> list[str]:
    out, current, chunk = [], None, []
    for row in rows + [None]:
        key = None if row is None else tuple(row[k] for k in group)
        if chunk and key != current:
            below = footer(chunk)
            out.append(f"### {_title(chunk[0], group)}\n\n{render(chunk)}\n" + (f"\n{below}\n" if below else ""))
            chunk = []
        current = key
        if row is not None:
            chunk.append(row)
    return out


def _layout_sources(rows: list[dict]) -> str:
    """The line under a group's table saying where each layout came from (MLPerf logs only: a
    sweep's layouts are its own plan)."""
    sources = [(r["layout"] or DASH, r.get("layout_source") or "") for r in rows]
    if all(src in ("", SWEEP_SOURCE) for _, src in sources):
        return ""
    distinct = list(dict.fromkeys(src for _, src in sources))
    if len(distinct) == 1:
        return f"Layout from: {distinct[0]}."
    return "Layout from: " + "; ".join(f"{layout} {src}" for layout, src in dict.fromkeys(sources)) + "."


def _where(rows: list[dict]) -> str:
    """The line under a group's table naming its hosts and inter-node link (as on its plot)."""
    text = where_ran(rows, most=8)
    return text[0].upper() + text[1:] + "." if text else ""


def _footer(*parts):
    return lambda rows: "\n\n".join(p for p in (f(rows) for f in parts) if p)


def _scaling_md(rows):
    flagged = any(r.get("flags") for r in rows)
    return markdown_table(
        ["layout", "GPUs", "scale", "runs (ok/failed/aborted/timeout)", "samples/s mean ± 2σ", "std",
         "per GPU", "speed-up", "efficiency"] + ["check"] * flagged,
        [[r["layout"], r["gpus"], r["scale"], _counts(r), _pm(r["throughput_mean"], r["throughput_2sigma"]),
          _num(r["throughput_std"]), _num(r["throughput_per_gpu"]), _num(r["speedup"], ".2f", "×"),
          _pct(r["efficiency"])] + [", ".join((r.get("flags") or "").split(";")) or ""] * flagged for r in rows])


def _flag_notes(rows: list[dict]) -> str:
    """Under a group's table: what each flag in its `check` column means."""
    used = list(dict.fromkeys(f for r in rows for f in (r.get("flags") or "").split(";") if f))
    return "\n".join(f"- **{f}**: {FLAGS[f]}." for f in used)


def _layouts_md(rows):
    return markdown_table(
        ["GPUs", "layout", "vs", "runs (ok/failed/aborted/timeout)", "samples/s mean ± 2σ",
         "relative", "Δ", "2σ noise", "within noise"],
        [[r["gpus"], r["layout"], "reference" if r["layout"] == r["reference"] else r["reference"],
          _counts(r), _pm(r["throughput_mean"], r["throughput_2sigma"]), _num(r["relative"], ".3f"),
          _pct(r["delta_pct"], signed=True), DASH if r["noise_2sigma_pct"] is None else f"± {r['noise_2sigma_pct']:.1f} %",
          {True: "yes", False: "no", None: DASH}[r["within_noise"]]] for r in rows])


def _target(row: dict) -> str:
    """'top1_accuracy 0.951 (target 0.95)': what was reached, against what."""
    if row["metric"] is None and row["target"] is None:
        return DASH
    reached = DASH if row["final_metric_mean"] is None else f"{row['final_metric_mean']:.4g}"
    return f"{row['metric'] or 'metric'} {reached} (target {row['target'] if row['target'] is not None else DASH})"


def _rcp(row: dict) -> str:
    """'Pass ×1.0294 (34 vs RCP 35)': the RCP check of a row and the rescale it brought."""
    check, factor = row.get("rcp_check"), row.get("rcp_factor")
    if not check:
        return DASH
    if check == NOT_CHECKED:
        return f"not checked ({(row.get('rcp_note') or '').split(':')[0]})"
    versus = ""
    if row.get("converge_mean") is not None and row.get("rcp_mean") is not None:
        bound = "RCP" if check == "Pass" else "lowest accepted"
        value = row["rcp_mean"] if check == "Pass" or row.get("rcp_min") is None else row["rcp_min"]
        versus = f" ({row['converge_mean']:.6g} vs {bound} {value:.6g})"
    if check == "Pass":
        return (f"Pass ×{factor:.4f}" if factor and factor != 1 else "Pass") + versus
    return check + (versus or f": {row.get('rcp_note')}")


def _ttt_md(rows):
    """One group's time-to-train table. Epoch columns for epoch-based logs, samples columns for
    sample-based ones (BERT), RCP columns for MLPerf logs; the CSV has them all."""
    samples = any(r.get("samples_to_target_mean") is not None for r in rows)
    epochs = any(r["epochs_mean"] is not None or r["time_per_epoch_min"] is not None for r in rows) or not samples
    rcp = any(r.get("rcp_check") for r in rows)
    rescaled = any(r.get("rcp_factor") not in (None, 1.0) for r in rows)
    header = ["layout", "GPUs", "global batch", "runs", "converged", "reached (mean of converged)"]
    header += ["epochs", "min/epoch"] * epochs + ["samples to target", "min per 1M samples"] * samples
    header += ["time to train (min)"] + ["RCP-normalised (min)", "RCP"] * rcp
    header += ["mean ± 2σ (min)", "speed-up"] + ["speed-up (RCP)"] * rescaled + ["efficiency", "scoring"]
    lines = []
    for r in rows:
        line = [r["layout"] or DASH, r["gpus"] or DASH, r["global_batch"] or DASH, r["runs"], r["converged"],
                _target(r)]
        if epochs:
            line += [_num(r["epochs_mean"], ".2f"), _num(r["time_per_epoch_min"], ".2f")]
        if samples:
            line += [_num(r.get("samples_to_target_mean"), ",.0f"), _num(r.get("time_per_1m_samples_min"), ".2f")]
        line.append("DNF" if r["ttt_min"] is None and r["runs"] else _num(r["ttt_min"], ".2f"))
        if rcp:
            line += ["DNF" if r.get("ttt_rcp_min") is None and r["runs"] and r.get("rcp_factor")
                     else _num(r.get("ttt_rcp_min"), ".2f"), _rcp(r)]
        line += [_pm(r["ttt_mean_min"], r["ttt_2sigma_min"], ".2f"), _num(r["speedup"], ".2f", "×")]
        if rescaled:
            line.append(_num(r.get("speedup_rcp"), ".2f", "×"))
        line += [_pct(r["efficiency"]), r["scoring"]]
        lines.append(line)
    return markdown_table(header, lines)


def _epochs_md(rows):
    return markdown_table(
        ["GPUs", "layout", "global batch", "avg time per epoch (min)", "epochs", "precision", "runs (converged)"],
        [[r["gpus"] or DASH, r["layout"] or DASH, r["global_batch"] or DASH, _num(r["time_per_epoch_min"], ".2f"),
          _num(r["epochs_mean"], ".2f"), r["precision"] or DASH, f"{r['runs']} ({r['converged']})"]
         for r in rows])


def markdown(tables: Tables, sources=(), notes=()) -> str:
    """The report's Markdown: every table, one section per group, then `notes` (what reading the
    inputs found: files read and skipped, with the reasons) and the rules."""
    parts = ["# hvdbench report", ""]
    if sources:
        parts += [f"{tables.runs} runs from: " + ", ".join(f"`{s}`" for s in sources), ""]
    sections = (
        ("Scaling (throughput, samples/s)", tables.scaling, SCALING_GROUP, _scaling_md,
         _footer(_flag_notes, _where, _layout_sources)),
        ("Scale-up vs scale-out (same GPU count, different layouts)", tables.layouts, SCALING_GROUP, _layouts_md,
         _where),
        ("Time to train (MLPerf: run_start → run_stop)", tables.time_to_train, TTT_GROUP, _ttt_md,
         _footer(_where, _layout_sources)),
        ("Epochs and time per epoch", tables.epochs, TTT_GROUP[:4], _epochs_md, lambda rows: ""),
    )
    for heading, rows, group, render, footer in sections:
        parts.append(f"## {heading}\n")
        parts += _sections(rows, group, render, footer) or ["(no runs of this kind)\n"]
    if notes:
        parts.append("## Inputs\n")
        parts += [f"- {note}" for note in notes] + [""]
    parts.append("## Notes\n")
    parts += [f"- {note}" for note in NOTES]
    return "\n".join(parts) + "\n"
