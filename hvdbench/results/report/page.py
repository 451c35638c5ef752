"""report.html: the report on one page, offline (render/html.py). It opens with the verdict (one line per
check: its state, figure, threshold and the threshold's source, linked to the section holding the
evidence), then the answer a buyer wants (cost.csv's rows: per layout, measured and predicted), then
today's sections: the CSVs the report wrote as tables and its PNGs inline, each captioned with the
hardware it ran on.

    hvdbench report results/demo          # results/demo/report/report.html beside the CSVs and PNGs
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from hvdbench.files import atomic_write_text
from hvdbench.results.analyses import verdict as verdict_rows
from hvdbench.results.render import html
from hvdbench.results.report.build import SUMMARY

TITLES = {"verdict": "Verdict", "cost": "The answer: what each layout buys and costs",
          "tables": "Scaling, layouts and time to train", "failures": "Runs that did not succeed",
          "waterfall": "Where each layout lost", "stragglers": "Stragglers: the rank or host that held a layout back",
          "links": "Links between hosts and ranks", "time_to_train": "Time to train in parts",
          "convergence": "Convergence", "engines": "Engines side by side", "compute": "Compute: TFLOP/s, MFU, energy",
          "studies": "Study: speed-up across models", "predictions": "Predictions of layouts not run",
          "benches": "Benches beside training"}
# The plots section draws the scaling tables' figures: they sit with those tables.
SHOWN_WITH = {"plots": "tables"}


def hardware(runs) -> str:
    """The hardware the runs ran on, in one line: every figure's caption."""
    devices = sorted({r.devices for r in runs if r.devices})
    cpus = sorted({r.cpu_model for r in runs if r.cpu_model})
    links = sorted({r.link for r in runs if r.link})
    hosts = sorted({h for r in runs for h in (r.hosts or "").split(";") if h})
    parts = [f"devices {', '.join(devices) or 'not recorded'}"]
    parts += [f"CPU {', '.join(cpus)}"] if cpus else []
    parts += [f"hosts {', '.join(hosts[:8])}{' ...' if len(hosts) > 8 else ''}"] if hosts else []
    parts += [f"inter-node link {' | '.join(links)}"] if links else []
    return "; ".join(parts)


def _sources(loaded) -> str:
    """What the report is of, short enough for the title: a study by its name, else the first sources."""
    if loaded.studies:
        return f"study {', '.join(loaded.studies)} ({len(loaded.sweeps)} sweeps)"
    sources = loaded.sources
    return ", ".join(sources[:2]) + (f" and {len(sources) - 2} more" if len(sources) > 2 else "") or "no source"


def _verdict_table(rows) -> str:
    html_rows = []
    for r in rows:
        source = r.source if len(r.source) <= 90 else r.source[:87].rsplit(" ", 1)[0] + " ..."
        html_rows.append(
            f"<tr id=\"check-{escape(r.check)}\" data-state=\"{escape(r.state)}\"><td>{html.state(r.state)}</td>"
            f"<td><a href=\"#{escape(r.section)}\">{escape(r.check)}</a></td>"
            f"<td class=\"num\">{escape(verdict_rows.figure_text(r))}</td>"
            f"<td>{escape(f'{r.rule} {r.threshold:g}')}</td><td>{escape(r.subject)}</td>"
            f"<td class=\"detail\">{escape(r.detail)}</td>"
            f"<td class=\"src\" title=\"{escape(r.source)}\">{escape(source)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("state", "check", "figure", "threshold", "of", "detail",
                                              "threshold from"))
    return (f"<div class=\"box\"><table class=\"verdict\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(html_rows)}</tbody></table></div>")


def _cost_line(rows) -> str:
    """The cost of the measured time to train of the layout that trains cheapest, in one sentence."""
    trained = [r for r in rows if r.gpu_hours_to_train is not None and r.source == "measured"]
    if not trained:
        return ""
    best = min(trained, key=lambda r: r.gpu_hours_to_train)
    money = (f" = {best.cost_to_train:,.2f} at {best.gpu_hour_price:g} a GPU-hour"
             if best.cost_to_train is not None else "")
    return (f"<p class=\"meta\">Cheapest measured time to train: {escape(best.model)} on {escape(best.layout)}, "
            f"{best.ttt_min:.3g} min = {best.gpu_hours_to_train:.3g} GPU-hours{escape(money)} "
            f"(<a href=\"#cost\">every layout</a>).</p>")


def _parts(layout: str) -> tuple[int, int] | None:
    nodes, _, per = layout.partition("x")
    return (int(nodes), int(per)) if nodes.isdigit() and per.isdigit() else None


def _answers(rows, most: int = 3) -> str:
    """Per model (the first `most`), in one line each: the layout giving the most per GPU, and what twice
    the nodes buy (the largest measured doubling: the same GPUs per node on twice the nodes)."""
    lines = []
    by_model: dict[str, list] = {}
    for r in rows:
        if r.source == "measured" and r.speedup is not None:
            by_model.setdefault(f"{r.model}/{r.flavor} {r.engine} {r.precision}", []).append(r)
    for name, mine in list(by_model.items())[:most]:
        said = []
        rated = [r for r in mine if r.throughput_per_gpu is not None]
        if rated:
            best = max(rated, key=lambda r: r.throughput_per_gpu)
            said.append(f"most per GPU on {best.layout} ({best.throughput_per_gpu:.4g} samples/s per GPU)")
        at = {_parts(r.layout): r for r in mine if _parts(r.layout)}
        doubled = [(one, at[(n * 2, g)]) for (n, g), one in at.items() if (n * 2, g) in at]
        if doubled:
            one, two = max(doubled, key=lambda pair: _parts(pair[1].layout))
            said.append(f"twice the nodes, {one.layout} -> {two.layout}: x{two.speedup / one.speedup:.2f} "
                        f"(efficiency {100 * (two.efficiency or 0):.0f} %)")
        else:
            said.append("twice the nodes: no measured pair of layouts (predictions below)")
        lines.append(f"<b>{escape(name)}</b>: {escape('; '.join(said))}")
    more = f" ({len(by_model) - most} more in the table below)" if len(by_model) > most else ""
    return "".join(f"<p class=\"meta\">{line}{escape(more) if i == len(lines) - 1 else ''}</p>"
                   for i, line in enumerate(lines))


def _answer(rows) -> str:
    if not rows:
        return "<p class=\"meta\">No layout measured.</p>"
    header = ["model", "engine", "precision", "layout", "GPUs", "source", "per GPU", "speed-up", "efficiency",
              "time to train (min)", "GPU-h to train", "cost to train", "GPU-h of the runs", "energy to train (kWh)"]

    def g(v):
        return "" if v is None else f"{v:.4g}"
    body = [[f"{r.model}/{r.flavor}", r.engine, r.precision, r.layout, str(r.gpus),
             r.source + (f" ({r.grade})" if r.grade else ""), g(r.throughput_per_gpu), g(r.speedup), g(r.efficiency),
             g(r.ttt_min), g(r.gpu_hours_to_train), "" if r.cost_to_train is None else f"{r.cost_to_train:,.2f}",
             g(r.run_gpu_hours), g(r.energy_kwh_to_train)] for r in rows]
    price = next((r.gpu_hour_price for r in rows if r.gpu_hour_price is not None), None)
    note = (f"Cost at {price:g} a GPU-hour (--gpu-hour-price)." if price is not None
            else "GPU-hours only: give --gpu-hour-price for money.")
    return (html.table(header, body)
            + f"<p class=\"meta\">{escape(note)} Predicted rows carry the prediction's grade.</p>")


def render(report, files: dict[str, list[Path]]) -> str:
    """The page's text: `files` are each section's files as written (in the stage), shown in summary.md's order."""
    loaded = report.loaded
    where = hardware(loaded.runs)
    shown: dict[str, list[Path]] = {}
    for name, paths in files.items():
        shown.setdefault(SHOWN_WITH.get(name, name), []).extend(paths)
    checks = report.sections["verdict"].rows if "verdict" in report.sections else []
    costs = report.sections["cost"].rows if "cost" in report.sections else []
    states = {s: sum(r.state == s for r in checks) for s in ("fail", "warn", "pass", "not measured")}
    summary = ", ".join(f"{n} {s}" for s, n in states.items() if n)
    body = [f"<header><h1>hvdbench report: {escape(_sources(loaded))}</h1>",
            f"<p class=\"meta\">{len(loaded.runs)} run(s) on {escape(where)}</p></header>",
            f"<section id=\"verdict\"><h2>Verdict: {escape(summary or 'no check')}</h2>",
            _verdict_table(checks) if checks else "<p class=\"meta\">No checks.</p>", _answers(costs), _cost_line(costs),
            "</section>"]
    sections = [n for n in SUMMARY if n in report.sections and n not in ("verdict", "cost")]
    body.append("<nav>" + "".join(f"<a href=\"#{n}\">{escape(TITLES.get(n, n))}</a>" for n in ["cost", *sections])
                + "</nav>")
    body += ["<section id=\"cost\">", f"<h2>{TITLES['cost']}</h2>", _answer(costs), "</section>"]
    for name in sections:
        mine = shown.get(name, [])
        text = report.sections[name].markdown()
        parts = [html.csv_table(p) for p in mine if p.suffix == ".csv"]
        parts += [html.figure(p, f"ran on {where}") for p in mine if p.suffix == ".png"]
        if not parts and not text.strip():
            parts = ["<p class=\"meta\">Nothing measured here.</p>"]
        body.append(f"<section id=\"{name}\"><h2>{escape(TITLES.get(name, name))}</h2>" + "".join(parts)
                    + html.preformatted(text, "this section in summary.md") + "</section>")
    criteria = "".join(f"<li><b>{escape(r.check)}</b> ({escape(r.rule)} {r.threshold:g}, {escape(r.severity)}): "
                       f"{escape(r.source)}</li>" for r in checks)
    body.append(f"<section id=\"criteria\"><h2>The criteria and their sources</h2><ul>{criteria}</ul></section>")
    return html.page("hvdbench report", body)


def write(report, files: dict[str, list[Path]], out: Path) -> Path:
    path = Path(out) / "report.html"
    atomic_write_text(path, render(report, files))
    return path
