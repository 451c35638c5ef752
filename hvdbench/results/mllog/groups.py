"""The report's systems for MLPerf logs: `--group-by` keys, the values a run has for them, and the
group name they make (`MllogRun.devices`).

    hvdbench report --mllog training_results_v4.0 --group-by submitter+platform

A run's system is named by `--group-by` keys, by default submitter + system: the systems JSON's
`submitter` / `system_name`, else the log's `submission_org` / the system folder, with the size
taken out (`system_family`), so one system's layouts share a group and a speed-up, and two
submitters' placeholder platforms never pool. Two submissions (systems JSON files) whose systems
share a name stay two groups, the submission appended to the name (`separate_submissions`).
"""

from __future__ import annotations

import re

from hvdbench.errors import ConfigError
from hvdbench.results.mllog.layouts import Where, real_name, system_family
from hvdbench.results.mllog.summary import LogSummary

GROUP_KEYS = {
    "submitter": "the systems JSON's submitter, else the log's submission_org, else the folder above results/",
    "system": "the systems JSON's system_name, else the system folder, else the platform, size removed",
    "platform": "the log's submission_platform, size removed",
    "folder": "the system folder (results/<system>/...), else the log's folder, size removed",
    "accelerator": "the systems JSON's accelerator_model_name",
}
DEFAULT_GROUP_BY = "submitter+system"


def parse_group_by(text: str) -> tuple[str, ...]:
    """'submitter+system' -> ('submitter', 'system'); ConfigError naming the valid keys."""
    keys = tuple(k.strip() for k in (text or "").split("+") if k.strip())
    unknown = [k for k in keys if k not in GROUP_KEYS]
    if unknown or not keys:
        raise ConfigError(f"--group-by {text!r}: '+'-joined keys of {', '.join(GROUP_KEYS)}")
    return keys


def group_parts(s: LogSummary, where: Where, nodes: int = 0) -> dict[str, str]:
    """The values of the --group-by keys for one run. Names lose their size (`system_family`),
    and a trailing node count equal to the run's nodes (Supermicro's SYS-421GE-TNHR2-LCC-8)."""
    desc, sysjson = where.desc, s.sysjson

    def family(name: str) -> str:
        name = system_family(name)
        return re.sub(rf"(?<=[a-z0-9])[-_ ]0*{nodes}$", "", name, flags=re.I) if nodes else name
    folder = where.system_dir.name if where.system_dir is not None else where.path.parent.name
    systems = [real_name(desc.get("system_name", "")), real_name(sysjson.get("system_name", "")),
               where.system_dir.name if where.system_dir is not None else "", real_name(s.platform),
               where.path.parent.name]
    # A placeholder (SUBMISSION_ORG_PLACEHOLDER, as logs without a systems JSON say) names no one:
    # the submitter folder above results/ does.
    submitters = [real_name(desc.get("submitter", "")), real_name(sysjson.get("submitter", "")), real_name(s.org),
                  where.org_dir.name if where.org_dir is not None else ""]
    return {
        "submitter": _first(map(str, submitters)),
        "system": _first(family(name) for name in systems if name),
        "platform": family(s.platform),
        "folder": family(folder) or folder,
        "accelerator": str(desc.get("accelerator_model_name") or sysjson.get("accelerator_model_name") or ""),
        "_system_name": _first(n for n in systems if n),
        "_submission": submission(where, family),
    }


def submission(where: Where, family=system_family) -> str:
    """The submission a run belongs to, as the official summarizer groups them: its systems JSON's
    file (`<org>/systems/<system>.json`, named after the system folder), its size taken out so one
    system's node counts stay one scaling study: 'training_results_v5.0/AMD/systems/MI300X'.
    Relative to the folder read where it is below it; '' outside a submission tree."""
    if where.system_dir is None or where.org_dir is None:
        return ""
    org = where.org_dir.absolute()
    try:
        org_label = org.relative_to(where.root.absolute()).as_posix()
    except ValueError:
        org_label = ""
    if org_label in ("", "."):
        org_label = org.name
    return f"{org_label}/systems/{family(where.system_dir.name) or where.system_dir.name}"


def separate_submissions(runs: list, keys: tuple[str, ...]) -> None:
    """Runs of two submissions whose systems share a name (one system submitted in two rounds of one
    tree; a `-POWER` folder repeating an 8-node system's runs) are two groups, as the summarizer
    scores them, never one row of both: their group names (`devices`) get the submission appended,
    '[GB200_POWER]' where the system folders differ (size taken out), else the submission's path. Only for the
    `system` and `folder` keys: `platform` and `accelerator` pool across submissions by design."""
    if not {"system", "folder"} & set(keys):
        return
    by_name: dict[str, dict[str, list]] = {}
    for r in runs:
        if r.submission:
            by_name.setdefault(r.devices, {}).setdefault(r.submission, []).append(r)
    for name, subs in by_name.items():
        if len(subs) < 2:
            continue
        stems = [sub.rsplit("/", 1)[-1] for sub in subs]
        for (sub, members), stem in zip(subs.items(), stems):
            label = stem if len(set(stems)) == len(stems) else sub
            for r in members:
                r.devices = f"{name} [{label}]"


def _first(values) -> str:
    return next((v.strip() for v in values if v and v.strip()), "")


def group_name(parts: dict[str, str], keys: tuple[str, ...]) -> str:
    return " / ".join(parts[k] for k in keys if parts[k]) or "unknown system"
