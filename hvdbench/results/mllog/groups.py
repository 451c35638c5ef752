"""The report's systems for MLPerf logs: `--group-by` keys, the values a run has for them, and the
group name they make (`MllogRun.devices`).

    hvdbench report --mllog training_results_v4.0 --group-by submitter+platform

A run's system is named by `--group-by` keys, by default submitter + system: the systems JSON's
`submitter` / `system_name`, else the log's `submission_org` / the system folder, with the size
taken out (`system_family`), so one system's layouts share a group and a speed-up, and two
submitters' placeholder platforms never pool.
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
    submitters = [desc.get("submitter", ""), sysjson.get("submitter", ""), s.org,
                  where.org_dir.name if where.org_dir is not None else ""]
    return {
        "submitter": _first(map(str, submitters)),
        "system": _first(family(name) for name in systems if name),
        "platform": family(s.platform),
        "folder": family(folder) or folder,
        "accelerator": str(desc.get("accelerator_model_name") or sysjson.get("accelerator_model_name") or ""),
        "_system_name": _first(n for n in systems if n),
    }


def _first(values) -> str:
    return next((v.strip() for v in values if v and v.strip()), "")


def group_name(parts: dict[str, str], keys: tuple[str, ...]) -> str:
    return " / ".join(parts[k] for k in keys if parts[k]) or "unknown system"
