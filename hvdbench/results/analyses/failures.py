"""Which runs did not succeed and why (the report's "Runs that did not succeed" section): each run's
recorded error, runs with the same status and error grouped, so a sweep whose runs failed reads as
failed, with the cause, instead of tables of dashes.

    groups = failure_groups(runs)   # [FailureGroup(status, error, runs=("1x2-ddp-r1", ...))], most runs first
    markdown(groups, runs)          # the section; its first line says when no run succeeded at all
    nothing_succeeded(runs)         # '' or the one line `hvdbench report` ends with (exit status 1)
"""

from __future__ import annotations

from dataclasses import dataclass

SHOWN = 8  # run names listed per group; the rest are counted ("+3 more"), never dropped silently


def _name(run, several_sweeps: bool) -> str:
    name = run.run_id or f"{run.model} {run.layout}"
    return f"{run.sweep}/{name}" if several_sweeps and run.sweep else name


@dataclass(frozen=True)
class FailureGroup:
    """Runs of one status that recorded one error (the section's rows; no CSV of its own)."""

    status: str
    error: str
    runs: tuple[str, ...]  # their names (run ids, with their sweep where several sweeps failed)


def failure_groups(runs) -> list[FailureGroup]:
    """The runs that did not succeed, grouped by (status, recorded error), the largest group first."""
    bad = [r for r in runs if r.status != "success"]
    several = len({r.sweep for r in bad}) > 1
    groups: dict[tuple[str, str], list[str]] = {}
    for r in bad:
        error = " ".join((r.error or "").split()) or (
            "stopped before reaching its target" if r.status == "aborted" else "no error recorded")
        groups.setdefault((r.status, error), []).append(_name(r, several))
    return [FailureGroup(status, error, tuple(names))
            for (status, error), names in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def nothing_succeeded(runs) -> str:
    """The one line a report over runs none of which succeeded ends with; '' when one did."""
    if not runs or any(r.status == "success" for r in runs):
        return ""
    return f"no run succeeded: all {len(runs)} run(s) did not (their errors are under 'Runs that did not succeed')"


def markdown(groups: list[FailureGroup], runs) -> str:
    if not groups:
        return ""
    lines = ["## Runs that did not succeed\n"]
    said = nothing_succeeded(runs)
    if said:
        lines.append(f"**{said[0].upper() + said[1:]}.**\n")
    for g in groups:
        names = ", ".join(g.runs[:SHOWN]) + (f" +{len(g.runs) - SHOWN} more" if len(g.runs) > SHOWN else "")
        lines.append(f"- {g.status}, {len(g.runs)} run(s) ({names}): {g.error}")
    return "\n".join(lines) + "\n"
