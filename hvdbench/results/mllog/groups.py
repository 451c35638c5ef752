"""The report's systems for MLPerf logs: `--group-by` keys, the values a run has for them, and the
group name they make (`MllogRun.devices`); and the rule of what a result and a study are.

    hvdbench report --mllog training_results_v4.0 --group-by submitter+platform

A run's system is named by `--group-by` keys, by default submitter + system: the systems JSON's
`submitter` / `system_name`, else the log's `submission_org` / the system folder, with the size
taken out (`system_family`), so one system's layouts share a group and a speed-up, and two
submitters' placeholder platforms never pool.

A result is one systems file x benchmark, a study is one hardware (`assign_studies`):
- each result folder (`<org>/results/<system>/<benchmark>/`, its systems file `<org>/systems/<system>.json`)
  is its own time-to-train row with its own runs and score, as mlperf-logging's result_summarizer
  scores it, never pooled with another systems file's runs (`MllogRun.result` names it, unique in its
  study: the file's stem, or its path where two rounds share a stem);
- results whose systems JSONs describe the same hardware (`HARDWARE_FIELDS`: accelerator model and
  count per node, host processor and count, the accelerators' interconnect; names, size words and
  node or GPU counts aside) of one submitter form one scaling study, one group, so its speed-ups run
  across them; a study may hold two results at one layout (one per round or software stack), told
  apart by `result`. The same name over different hardware stays two groups, the accelerator (else
  the result) appended to the name. Runs without a systems JSON are grouped by their names as before.
"""

from __future__ import annotations

import re
from collections import Counter

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
        "_result": result_of(where),
        "_hardware": hardware_of(desc or sysjson),
    }


# What makes two systems JSONs one hardware (`hardware_of`): a scaling study is one of these, at any size.
# Not the names (a size word, a round), the node count, the networking text (a one-node file may say
# N/A where the two-node one names its fabric) or the software (a study may span two stacks).
HARDWARE_FIELDS = ("accelerator_model_name", "accelerators_per_node", "host_processor_model_name",
                   "host_processors_per_node", "accelerator_interconnect")


def hardware_of(desc: dict) -> str:
    """The systems JSON's HARDWARE_FIELDS '|'-joined, as written (the accelerator first: the label
    that tells two studies of one name apart); '' when it names no accelerator (no systems JSON, or
    an empty one): nothing to tell a study by. Compared by `same_hardware`."""
    if not str(desc.get("accelerator_model_name") or "").strip():
        return ""
    return "|".join(" ".join(str(desc.get(k) or "").split()) for k in HARDWARE_FIELDS)


def same_hardware(hardware: str) -> str:
    """What two `hardware_of` values are compared by: spacing and case aside ('400Gb/s', '400 Gb/s')."""
    return re.sub(r"\s+", "", hardware).lower()


def result_of(where: Where) -> str:
    """The result a run belongs to: its systems file, size kept ('training_results_v5.1/Krai/systems/
    PowerEdge-XE9680-MI300X-192GB_n1_v5.0'), relative to the folder read where it is below it; ''
    outside a submission tree."""
    if where.system_dir is None or where.org_dir is None:
        return ""
    org = where.org_dir.absolute()
    try:
        org_label = org.relative_to(where.root.absolute()).as_posix()
    except ValueError:
        org_label = ""
    if org_label in ("", "."):
        org_label = org.name
    return f"{org_label}/systems/{where.system_dir.name}"


def assign_studies(runs: list, keys: tuple[str, ...]) -> None:
    """Apply the rule of the module docstring to loaded runs (MllogRun: `result` set to its systems
    file by `to_run_result`, `hardware` to `hardware_of` its JSON): runs of one submitter and hardware
    get one group name (`devices`: the name most of its runs have), two studies with one name get the
    accelerator (else the result) appended, and `result` becomes the shortest label unique in the
    study. Only for the `system` and `folder` keys: `platform` and `accelerator` pool across
    systems by design (their rows still split by result)."""
    by_study: dict[tuple, list] = {}
    if {"system", "folder"} & set(keys):
        for r in runs:
            if r.hardware:
                by_study.setdefault((r.submitter, same_hardware(r.hardware)), []).append(r)
        for members in by_study.values():
            named = Counter(r.devices for r in members)
            name = min(named, key=lambda n: (-named[n], len(n), n))
            for r in members:
                r.devices = name
        # The same name over two hardwares (or over a study and runs without a systems JSON): apart.
        hardwares: dict[str, set] = {}
        for r in runs:
            hardwares.setdefault(r.devices, set()).add(same_hardware(r.hardware))
        for r in runs:
            if len(hardwares[r.devices]) > 1:
                accelerator = r.hardware.split("|")[0] if r.hardware else ""
                r.devices = f"{r.devices} [{accelerator or r.result or 'no systems JSON'}]"
        hardwares = {}
        for r in runs:
            hardwares.setdefault(r.devices, set()).add(same_hardware(r.hardware))
        for r in runs:  # still two (same accelerator, other host): the result tells them apart
            if len(hardwares[r.devices]) > 1 and r.result:
                r.devices = f"{r.devices} [{r.result.rsplit('/', 1)[-1]}]"
    short_labels(runs)


def short_labels(runs: list) -> None:
    """Each run's `result` as the systems file's stem, or its whole path where two results of one
    group share the stem (the same file name in two rounds' trees)."""
    by_group: dict[str, set] = {}
    for r in runs:
        if r.result:
            by_group.setdefault(r.devices, set()).add(r.result)
    for r in runs:
        if r.result:
            stems = Counter(full.rsplit("/", 1)[-1] for full in by_group[r.devices])
            stem = r.result.rsplit("/", 1)[-1]
            r.result = stem if stems[stem] == 1 else r.result


def _first(values) -> str:
    return next((v.strip() for v in values if v and v.strip()), "")


def group_name(parts: dict[str, str], keys: tuple[str, ...]) -> str:
    return " / ".join(parts[k] for k in keys if parts[k]) or "unknown system"
