"""The verdict: each acceptance check of a report, pass / warn / fail / not measured, with its figure,
its threshold and where the threshold comes from (verdict.csv, the first block of report.html and of
summary.md). The checks read the typed rows of the sections before them; the thresholds are the
criteria (hvdbench/criteria/default.yaml, extended or replaced by `report --criteria FILE`).

    hvdbench report results/demo --criteria mine.yaml      # verdict.csv, report.html's verdict

A check that cannot be evaluated is "not measured" and says why: never "pass".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from hvdbench.errors import ConfigError
from hvdbench.linkrate import node_link_rate
from hvdbench.results.records.rows import ReportRow
from hvdbench.results.render.tables import write_table

PASS, WARN, FAIL, NOT_MEASURED = "pass", "warn", "fail", "not measured"
SEVERITIES = (FAIL, WARN)
CRITERION_KEYS = ("at_least", "at_most", "severity", "source")
DEFAULT_CRITERIA = "criteria/default.yaml"  # package data of hvdbench (setup.cfg)


@dataclass(frozen=True)
class Criterion:
    """One check's threshold: the figure passes at least (`at_least`) or at most (else) `threshold`."""

    id: str
    threshold: float
    at_least: bool
    severity: str
    source: str


@dataclass(frozen=True)
class CheckRow(ReportRow):
    """verdict.csv: one line per check. figure: what was measured (a share, a count, a ratio);
    rule: at least | at most the threshold; subject: the layout, host or pair the figure is of;
    detail: what the figure means here, or why it was not measured; section: report.html's section
    (and summary.md's) holding the evidence."""

    check: str  # the check's id (its key under the criteria's checks:)
    state: str  # pass, warn, fail, or not measured (detail says why)
    figure: float | None  # what was measured (a share, a count, a ratio); empty where not measured
    rule: str  # at least | at most: on which side of the threshold the figure passes
    threshold: float
    severity: str  # the state a figure past its threshold gets: fail or warn
    subject: str  # the layout, host or pair the figure is of
    detail: str  # what the figure means here, or why it was not measured
    source: str  # where the threshold comes from (the criteria's source)
    section: str  # report.html's (and summary.md's) section holding the evidence


# --- the criteria --------------------------------------------------------------------------------

def _fail(path, node, message: str) -> ConfigError:
    return ConfigError(f"{path}: line {node.start_mark.line + 1}: {message}")


def _criteria_of(path, text: str, base: dict[str, Criterion] | None) -> dict[str, Criterion]:
    """The checks a criteria file gives: every key checked, a bad one named with its line."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ConfigError(f"{path}: line {mark.line + 1 if mark else '?'}: not YAML "
                          f"({getattr(e, 'problem', None) or e})") from None
    finally:
        loader.dispose()
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{path}: line 1: a mapping with 'checks:' expected")
    top = {k.value: (k, v) for k, v in root.value}
    for key, (node, _) in top.items():
        if key not in ("checks", "replace"):
            raise _fail(path, node, f"unknown key {key!r} (known: checks, replace)")
    replace = False
    if "replace" in top:
        node = top["replace"][1]
        if not (isinstance(node, yaml.ScalarNode) and node.value in ("true", "false")):
            raise _fail(path, node, "replace: true or false")
        replace = node.value == "true"
    known = base or {}
    found = {} if replace or base is None else dict(known)
    checks = top.get("checks", (None, None))[1]
    if checks is None:
        raise ConfigError(f"{path}: line 1: no 'checks:' key")
    if not isinstance(checks, yaml.MappingNode):
        raise _fail(path, checks, "checks: a mapping of check ids")
    for id_node, body in checks.value:
        check = id_node.value
        if base is not None and check not in known:
            raise _fail(path, id_node, f"checks.{check}: unknown check (known: {', '.join(known)})")
        if not isinstance(body, yaml.MappingNode):
            raise _fail(path, body, f"checks.{check}: a mapping of {', '.join(CRITERION_KEYS)}")
        keys = {k.value: (k, v) for k, v in body.value}
        values = {}
        for key, (k, v) in keys.items():
            if key not in CRITERION_KEYS:
                raise _fail(path, k, f"checks.{check}.{key}: unknown key (known: {', '.join(CRITERION_KEYS)})")
            if key in ("at_least", "at_most"):
                try:
                    number = float(v.value)
                except (TypeError, ValueError, AttributeError):
                    number = math.nan
                if not isinstance(v, yaml.ScalarNode) or not math.isfinite(number):
                    raise _fail(path, v, f"checks.{check}.{key}: a number, not {getattr(v, 'value', v)!r}")
                values[key] = number
            elif key == "severity":
                if not isinstance(v, yaml.ScalarNode) or v.value not in SEVERITIES:
                    raise _fail(path, v, f"checks.{check}.severity: one of {', '.join(SEVERITIES)}")
                values[key] = v.value
            else:
                if not isinstance(v, yaml.ScalarNode) or not v.value.strip():
                    raise _fail(path, v, f"checks.{check}.source: where the threshold comes from, in words")
                values[key] = " ".join(v.value.split())
        if "at_least" in values and "at_most" in values:
            raise _fail(path, id_node, f"checks.{check}: at_least or at_most, not both")
        old = known.get(check)
        if "at_least" in values or "at_most" in values:
            at_least = "at_least" in values
            threshold = values["at_least" if at_least else "at_most"]
        elif old is not None:
            at_least, threshold = old.at_least, old.threshold
        else:
            raise _fail(path, id_node, f"checks.{check}: at_least or at_most missing")
        severity = values.get("severity", old.severity if old else None)
        source = values.get("source", old.source if old else None)
        for key, value in (("severity", severity), ("source", source)):
            if value is None:
                raise _fail(path, id_node, f"checks.{check}: {key} missing")
        found[check] = Criterion(check, threshold, at_least, severity, source)
    return found


def default_criteria() -> dict[str, Criterion]:
    text = resources.files("hvdbench").joinpath(DEFAULT_CRITERIA).read_text(encoding="utf-8")
    return _criteria_of(f"hvdbench/{DEFAULT_CRITERIA}", text, None)


def load_criteria(path: Path | None = None) -> dict[str, Criterion]:
    """The default criteria, extended (or, with `replace: true`, replaced) by the file at `path`."""
    criteria = default_criteria()
    if path is None:
        return criteria
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--criteria {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    return _criteria_of(path, text, criteria)


# --- the checks ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Evidence:
    """What one check found: its figure (None: not measured), of what, and what it means or why not."""

    figure: float | None
    subject: str
    detail: str


def _judge(c: Criterion, ev: Evidence, section: str) -> CheckRow:
    if ev.figure is None:
        state = NOT_MEASURED
    else:
        ok = ev.figure >= c.threshold if c.at_least else ev.figure <= c.threshold
        state = PASS if ok else c.severity
    return CheckRow(check=c.id, state=state, figure=ev.figure, rule="at least" if c.at_least else "at most",
                    threshold=c.threshold, severity=c.severity, subject=ev.subject, detail=ev.detail,
                    source=c.source, section=section)


def _name(row) -> str:
    """A row's group and layout in a few words: 'resnet50/debug horovod fp32 1x2'."""
    return f"{row.model}/{row.flavor} {row.engine} {row.precision} {row.layout}".replace("  ", " ")


def published_share(compute) -> Evidence:
    rows = [r for r in compute if r.published_share is not None]
    if not rows:
        ran = ", ".join(sorted({r.system for r in compute if r.system}))
        return Evidence(None, "", "no run on an accelerator and benchmark MLPerf published a per-GPU rate for"
                        + (f" (these ran on {ran})" if ran else ""))
    worst = min(rows, key=lambda r: r.published_share)
    return Evidence(worst.published_share, _name(worst),
                    f"per-GPU rate / MLPerf's published ({worst.published_ref}); worst of {len(rows)} layout(s)")


def harness_vs_bare(runs) -> Evidence:
    # No sweep records a bare loop's rate yet (benchmarks/bench_train.py times it apart).
    return Evidence(None, "", "the sweep holds no bare-loop measurement (benchmarks/bench_train.py measures it "
                    "apart from a sweep)")


def allreduce_busbw(allreduce, runs) -> Evidence:
    between = [r for r in allreduce if (r.nodes or 0) > 1 and r.busbw_gb_s and not r.wrong]
    if not between:
        return Evidence(None, "", "no allreduce bench over several nodes (sweep --allreduce-bench on a multi-node "
                        "layout)")
    links = dict.fromkeys(r.link for r in runs if r.link)
    rates = [rate for rate in map(node_link_rate, links) if rate]
    if not rates:
        return Evidence(None, "", "the inter-node link's rated bandwidth is not known (sweep --link, or a hardware "
                        "record naming the NIC's rate)")
    largest = max(r.bytes for r in between)
    best = max((r for r in between if r.bytes == largest), key=lambda r: r.busbw_gb_s)
    rate = max(rates) / 1e9
    return Evidence(best.busbw_gb_s / rate, f"{best.layout} {best.impl}",
                    f"busbw {best.busbw_gb_s:.3g} GB/s at {largest / 1e6:g} MB over the link's {rate:.3g} GB/s "
                    f"({' | '.join(links)})")


def link_pairs(pairs) -> Evidence:
    compared = [p for p in pairs if p.vs_best is not None]
    if len(compared) < 2:
        return Evidence(None, "", "fewer than two pairs of hosts or ranks timed (sweep --links-bench)")
    worst = min(compared, key=lambda p: p.vs_best)
    slow = [p for p in compared if p.slow]
    hosts = [h for h in dict.fromkeys(h for p in slow for h in (p.host_a, p.host_b))
             if all(h in (p.host_a, p.host_b) for p in slow)]
    return Evidence(worst.vs_best, f"{worst.host_a} - {worst.host_b} ({worst.kind})",
                    f"{len(slow)} of {len(compared)} pair(s) below half the fastest of their kind"
                    + (f"; every slow pair holds {', '.join(hosts)}" if slow and hosts else ""))


def stragglers(found) -> Evidence:
    if not found.hosts:
        return Evidence(None, "", "no multi-host layout with per-rank times (RUN/ranks.csv)")
    named = list(dict.fromkeys(h.host for h in found.hosts if h.straggler))
    return Evidence(float(len(found.named)), ", ".join(named) or "every host",
                    "; ".join(found.named) or f"no host slower than the others ({len(found.hosts)} compared)")


def scaling_efficiency(scaling) -> Evidence:
    rows = [r for r in scaling if r.gpus > 1 and r.efficiency is not None]
    if not rows:
        return Evidence(None, "", "no multi-GPU layout with a baseline to measure efficiency against")
    worst = min(rows, key=lambda r: r.efficiency)
    below = [r for r in rows if r.efficiency < worst.efficiency + 1e-12]
    return Evidence(worst.efficiency, _name(worst),
                    f"speed-up {worst.speedup:.2f}x on {worst.gpus} GPUs against {worst.baseline}; worst of "
                    f"{len(rows)} layout(s)" + (f" ({len(below)} tied)" if len(below) > 1 else ""))


def run_spread(scaling) -> Evidence:
    rows = [r for r in scaling if r.cv is not None and r.n_throughput >= 2]
    if not rows:
        return Evidence(None, "", "no layout ran twice (sweep --repeats 2 or more)")
    worst = max(rows, key=lambda r: r.cv)
    return Evidence(worst.cv, _name(worst), f"std / mean of {worst.n_throughput} repeats' throughput; worst of "
                    f"{len(rows)} layout(s)")


def failed_runs(runs) -> Evidence:
    bad = [r for r in runs if r.status != "success"]
    if not runs:
        return Evidence(None, "", "no run")
    statuses = ", ".join(f"{n} {s}" for s, n in sorted({s: sum(r.status == s for r in bad)
                                                        for s in {r.status for r in bad}}.items()))
    return Evidence(float(len(bad)), ", ".join(dict.fromkeys(r.layout for r in bad)) or f"{len(runs)} runs",
                    f"{statuses} of {len(runs)} run(s)" if bad else f"all {len(runs)} run(s) succeeded")


def time_to_train_rcp(time_to_train) -> Evidence:
    checked = [r for r in time_to_train if r.rcp_check]
    if not checked:
        return Evidence(None, "", "no time to train checked against MLPerf's RCPs (closed-division MLPerf logs, "
                        "or full-flavor time-to-accuracy runs)")
    bad = [r for r in checked if r.rcp_check != "Pass"]
    return Evidence(float(len(bad)), ", ".join(_name(r) for r in bad) or f"{len(checked)} result(s)",
                    f"RCP check: {', '.join(sorted({r.rcp_check for r in checked}))} over {len(checked)} result(s)")


def checks(criteria: dict[str, Criterion], runs, allreduce, pairs, compute, found, tables) -> list[CheckRow]:
    """Each criterion judged from the report's rows (build.py's sections: the runs and benches loaded, the
    link pairs, compute, stragglers and the scaling and time-to-train tables): one row each, in the
    criteria's order, each naming the section that holds its evidence."""
    judged = {
        "published_share": (lambda: published_share(compute), "compute"),
        "harness_vs_bare": (lambda: harness_vs_bare(runs), "compute"),
        "allreduce_busbw": (lambda: allreduce_busbw(allreduce, runs), "benches"),
        "link_pairs": (lambda: link_pairs(pairs), "links"),
        "stragglers": (lambda: stragglers(found), "stragglers"),
        "scaling_efficiency": (lambda: scaling_efficiency(tables.scaling), "tables"),
        "run_spread": (lambda: run_spread(tables.scaling), "tables"),
        "failed_runs": (lambda: failed_runs(runs), "failures"),
        "time_to_train_rcp": (lambda: time_to_train_rcp(tables.time_to_train), "time_to_train"),
    }
    return [_judge(c, judged[c.id][0](), judged[c.id][1]) for c in criteria.values()]


ICON = {PASS: "PASS", WARN: "WARN", FAIL: "FAIL", NOT_MEASURED: "n/m"}


def figure_text(row: CheckRow) -> str:
    if row.figure is None:
        return "-"
    return f"{row.figure:g}" if row.figure == int(row.figure) else f"{row.figure:.3g}"


def markdown(rows: list[CheckRow]) -> str:
    if not rows:
        return ""
    lines = ["## Verdict", "", "| check | state | figure | threshold | of | detail |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.check} | {ICON[r.state]} | {figure_text(r)} | {r.rule} {r.threshold:g} | {r.subject} | "
                     f"{r.detail} |")
    lines.append("\nThresholds and their sources: verdict.csv (`report --criteria FILE` sets them).\n")
    return "\n".join(lines)


def write(rows: list[CheckRow], out: Path, formats=("csv",)) -> list[Path]:
    return write_table(out, "verdict", rows, CheckRow.columns(), tuple(f for f in formats if f == "csv"))
