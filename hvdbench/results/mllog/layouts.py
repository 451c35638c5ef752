"""A run's layout (nodes x accelerators per node) from what its log and its submission tree say:
log events, the systems JSON, NxGxBxA config names and platform or system names.

    hvdbench report --mllog training_results_v4.0/Dell      # the layout_source column says which
    from hvdbench.results.mllog import layout_from_text
    layout_from_text("8xNVIDIA DGX H100")                    # Layout(8, 8): topology's, as every layout

Layout, first source that gives both (`resolve_layout`):
1. the log's `number_of_nodes` / `accelerators_per_node` events (what hvdbench itself logs);
2. the submission's `systems/<system>.json` (`number_of_nodes`, `accelerators_per_node`), or the
   same JSON echoed into the log as a `:::SYSJSON` line;
3. an MLPerf config name `NODESxGPUSxBATCHxACCUM` (`DGXA100_2x8x56x1`, `4x4`) in a folder or file name;
4. the platform text: the log's `submission_platform` (`8xNVIDIA DGX H100` = 8 nodes of 8,
   `8xA100` = one node of 8), then the system folder's name (`XE8640x4H100-SXM-80GB`).
Each run records which one it used (`MllogRun.layout_source`); the report prints it per group.

Counts are held to the hostfiles' bounds (`check_count`): accelerators per node at most
`topology.MAX_SLOTS` (1024), nodes at most `topology.MAX_NODES` (1,000,000). A log event or systems JSON
whose count is given but wrong (-1, a 300-digit number, NaN, "eight") leaves the run's layout unknown
rather than guessed from a name, with one warning naming the file (and line) and the key; a systems
JSON that cannot be read is a warning too: one bad file does not stop a report of a whole tree.
A name whose numbers are past the bounds is not read as a layout. These patterns read a submitter's
free-text names; a layout a user gives is read by topology.Layout.parse alone.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.results.mllog.events import ACCELERATORS_PER_NODE, NUMBER_OF_NODES
from hvdbench.results.mllog.summary import LogSummary
from hvdbench.topology import MAX_NODES, MAX_SLOTS, Layout

UNKNOWN = Layout(0, 0)  # a run whose log and submission give no nodes x accelerators (str: '')

MAX_PER_KEY = {NUMBER_OF_NODES: MAX_NODES, ACCELERATORS_PER_NODE: MAX_SLOTS}
MAX_DESC_BYTES = 1 << 20  # a systems JSON is a few KB; a bigger file is not one

# Layout sources, in order of precedence (see the module docstring).
SOURCE_LOG = "log events"
SOURCE_SYSTEMS_JSON = "systems JSON"
SOURCE_SYSJSON_LINE = "systems JSON (:::SYSJSON line)"
SOURCE_NAME = "NxGxBxA name"
SOURCE_PLATFORM = "platform text"
SOURCE_FOLDER = "system folder name"
SOURCE_UNKNOWN = "unknown"

_PLACEHOLDER = re.compile(r"placeholder|unknown_mlperf|^\s*unknown\s*$", re.I)

# --- layout from names -------------------------------------------------------------------------

# An MLPerf config name NODESxGPUS[xBATCHxACCUM]: DGXA100_2x8x56x1, 4x4, config_1cc_04x08x32.
# ASCII digits only ('٣' is a digit to \d and int()), at most 12 of them (int() of thousands fails).
_NXG = re.compile(r"(?<![0-9a-z.])([0-9]{1,12})x([0-9]{1,12})(?![0-9])", re.I)
# An accelerator model right after "N x" means one server with N of them (8xA100, 8xH100-SXM).
_ACCELERATOR = r"(?:nvidia[ _-]?)?(?:[ahvblkpt]\d{1,3}|g[hb]\d{3}|mi\d{3}|gaudi\d?|tpu)(?![0-9])"
_TEXT_LAYOUTS = (
    # N x server x G accelerators: Dell's 2xXE8545x4A100-SXM-80GB
    (re.compile(r"(?<![0-9a-z.])([0-9]{1,12})x[a-z][\w.-]*?x([0-9]{1,12})[a-z]", re.I),
     lambda m: (int(m[1]), int(m[2]))),
    # N accelerators in one server: 8xA100, ESC8000A-E12-8xH100-PCIE-80GB
    (re.compile(r"(?<![0-9a-z.])([0-9]{1,12})\s*x\s*" + _ACCELERATOR, re.I), lambda m: (1, int(m[1]))),
    # N x server, the server's accelerators read from its name: 8xNVIDIA DGX H100, 16xBM.GPU.H100.8
    (re.compile(r"(?<![0-9a-z.])([0-9]{1,12})\s*x\s*([a-z].*)", re.I), lambda m: (int(m[1]), _server_gpus(m[2]))),
    # one server with G accelerators: DSS8440x8A100-PCIE-40GB, R760xax4L40S, GX2560M7_H100_SXM_80GBx4
    (re.compile(r"(?<=[0-9a-z])x([0-9]{1,2})(?:" + _ACCELERATOR + r"|$|[^0-9a-z])", re.I), lambda m: (1, int(m[1]))),
)


def _server_gpus(server: str) -> int:
    """Accelerators per node a server's name gives: x4A100, BM.GPU.H100.8, DGX (8; DGX-2: 16)."""
    for pattern in (r"x([0-9]{1,2})" + _ACCELERATOR, r"\.([0-9]{1,2})$"):
        m = re.search(pattern, server.strip(), re.I)
        if m:
            return int(m[1])
    if re.search(r"dgx[ -_]?2(?![0-9])", server, re.I):
        return 16
    return 8 if re.search(r"dgx", server, re.I) else 0


def within_bounds(nodes: int, gpus: int) -> bool:
    """1 <= nodes <= MAX_NODES and 1 <= GPUs per node <= MAX_SLOTS."""
    return 0 < nodes <= MAX_NODES and 0 < gpus <= MAX_SLOTS


def layout_from_name(name: str) -> Layout | None:
    """The layout an MLPerf config name NODESxGPUS[xBATCHxACCUM] names, or None (also for numbers
    past the bounds: `99999999x1` is not a layout)."""
    m = _NXG.search(name)
    return Layout(int(m[1]), int(m[2])) if m and within_bounds(int(m[1]), int(m[2])) else None


def shown(value) -> str:
    """A value as a warning shows it: text as Python quotes it (non-printables escaped), other
    values as JSON, cut to about 24 characters."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 20 else repr(value[:20])[:-1] + f"...' ({len(value):,} characters)"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 24 else text[:20] + "..."


def check_count(value, most: int, zero_given: bool = False) -> tuple[int, str]:
    """(count, problem) of a nodes or accelerators-per-node value as logged or in a systems JSON
    (numbers or strings of ASCII digits: "8"): (n, "") for 1..most; (0, "") when not given (absent,
    null, "", 0: a CPU system's accelerators_per_node); (0, why) for anything else, 0 too when
    `zero_given` (no system has 0 nodes)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0, ""
    number = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        digits = value.strip().lstrip("0") or "0"
        number = int(digits) if len(digits) <= len(str(most)) else most + 1  # int() of 5000 digits fails
    if number == 0 and not zero_given:
        return 0, ""
    if number is None or not 0 < number <= most:
        return 0, f"{shown(value)} is not a whole number from 1 to {most:,}"
    return number, ""


def layout_from_text(text: str) -> Layout | None:
    """The layout a platform or system name says, or None when it does not say both nodes and GPUs:
    NxG first, then `2xXE8545x4A100` (2 x 4), `8xA100` (1 x 8), `8xNVIDIA DGX H100` (8 x 8),
    `16xBM.GPU.H100.8` (16 x 8), `DSS8440x8A100` (1 x 8). `1xSUBMISSION_PLATFORM_PLACEHOLDER`
    names one node but not its accelerators: None."""
    if _NXG.search(text):  # NxG, read as nothing else when its numbers are past the bounds
        return layout_from_name(text)
    for pattern, layout in _TEXT_LAYOUTS:
        m = pattern.search(text)
        if m:
            nodes, gpus = layout(m)
            return Layout(nodes, gpus) if within_bounds(nodes, gpus) else None
    return None


def system_family(name: str) -> str:
    """A system name without its size, so one system's layouts share a group (and a speed-up):
    '2xXE8545x4A100-SXM-80GB' and '1xXE8545x4A100-SXM-80GB' -> 'XE8545x4A100-SXM-80GB';
    'DGXA100_2x8x56x1' -> 'DGXA100'; 'dgxa100_n8_ngc21.05' -> 'dgxa100_ngc21.05'; '1x2 cpu' -> 'cpu';
    'Eos_n8' -> 'Eos'; '16xBM.GPU.H100.8' -> 'BM.GPU.H100.8'; 'Acme H100 2-node' -> 'Acme H100';
    'Tyche (16x B200-SXM-180GB)' -> 'Tyche (B200-SXM-180GB)'; 'mi300x_n2_v5.0' -> 'mi300x'."""
    for pattern in (r"(?<![0-9a-z])\d+x\d+(?:x\d+)*(?![0-9a-z])",  # NxG[xBxA]
                    r"(?<=\()\s*\d+\s*[x×]\s*",  # '(16x B200-SXM-180GB)': the count of accelerators
                    r"(?<![0-9a-z])\d+x(?:\s+|(?=[a-z]))",  # N x server, '16x B200'
                    r"(?<![0-9a-z])n\d+(?![0-9a-z])",  # NVIDIA's _n8: node count
                    r"(?<=[_\- ])v\d+(?:\.\d+)+$",  # a round or version suffix: '_v5.0'
                    r"\(?(?<![0-9a-z])\d+[-_ ]?nodes?\b\)?"):  # '2-node', '(4 nodes)', '8_nodes'
        name = re.sub(pattern, "", name.strip("_- "), flags=re.I)
    name = re.sub(r"([_\- ])[_\- ]+", r"\1", name)
    return name.strip("_- ")


def real_name(text: str) -> str:
    """A name, or '' for a placeholder (SUBMISSION_PLATFORM_PLACEHOLDER, UNKNOWN_MLPERF_SYSTEM_NAME)."""
    text = str(text or "").strip()
    return "" if _PLACEHOLDER.search(text) else text


# --- the submission tree around a log ----------------------------------------------------------

@dataclass
class Where:
    """Where a log sits: `<org>/results/<system>/<benchmark>/result_N.txt` when it is in a
    submission tree (then `system_dir` is set), else just its folders up to the root."""
    path: Path
    root: Path
    system_dir: Path | None = None
    org_dir: Path | None = None
    desc: dict = field(default_factory=dict)  # systems/<system>.json
    desc_path: Path | None = None
    desc_problem: str = ""  # why systems/<system>.json could not be read ('' when it was, or is absent)

    @property
    def folders(self) -> list[Path]:
        folders, folder = [], self.path.parent
        while True:
            folders.append(folder)
            if folder == self.root or folder == folder.parent:
                return folders
            folder = folder.parent


def locate(path: Path, root: Path, descs: dict) -> Where:
    """The submission tree around `path`, when it is `<org>/results/<system>/<benchmark>/<file>`
    (looked for above the root too, so `--mllog Org/results/sys/resnet` still finds
    `Org/systems/sys.json`); `descs` caches the JSONs read."""
    where = Where(path, root)
    system = path.absolute().parent.parent
    if system.parent.name == "results":
        where.system_dir, where.org_dir = system, system.parent.parent
    if where.system_dir is not None:
        desc_path = where.org_dir / "systems" / f"{where.system_dir.name}.json"
        if desc_path not in descs:
            descs[desc_path] = _read_desc(desc_path)
        where.desc, where.desc_problem = descs[desc_path]
        where.desc_path = desc_path if where.desc or where.desc_problem else None
    return where


def _read_desc(path: Path) -> tuple[dict, str]:
    """(the systems JSON, '') or ({}, why it cannot be read); ({}, '') when there is none."""
    if not path.is_file():
        return {}, ""
    try:
        if path.stat().st_size > MAX_DESC_BYTES:
            return {}, f"{path.stat().st_size:,} bytes, too large for a systems JSON"
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as e:
        return {}, f"unreadable ({e.strerror or e})"
    except (ValueError, RecursionError) as e:  # json.JSONDecodeError is a ValueError
        return {}, f"not valid JSON ({str(e)[:80] or type(e).__name__})"
    if not isinstance(data, dict):
        return {}, "not a JSON object"
    _, _, problem = _counts(data, "", None)  # its other fields (names, framework) are still read
    return data, problem.removeprefix(": ")


def _counts(values: dict, where: str, warnings: list | None) -> tuple[int, int, str]:
    """(nodes, accelerators per node, problem) from {key: value or (value, line)}: both counts when
    both are good, 0 for one not given; on a bad one (0, 0, what is wrong), also appended to
    `warnings` as `where[:line]: key value is not ...`."""
    counts = []
    for key in (NUMBER_OF_NODES, ACCELERATORS_PER_NODE):
        value, line = values.get(key), None
        if isinstance(value, tuple):
            value, line = value
        count, problem = check_count(value, MAX_PER_KEY[key], zero_given=key == NUMBER_OF_NODES)
        if problem:
            said = f"{where}{f':{line}' if line else ''}: {key} {problem}"
            if warnings is not None:
                warnings.append(f"{said}; the layout of its run(s) is unknown")
            return 0, 0, said
        counts.append(count)
    return counts[0], counts[1], ""


def resolve_layout(s: LogSummary, where: Where, warnings: list | None = None) -> tuple[Layout, str]:
    """(layout, source) by the precedence of the module docstring. A source that gives a count out of
    bounds (or a systems JSON that cannot be read) ends the search: the layout is UNKNOWN, and
    `warnings` gets a line naming the file, line and key."""
    desc_said = f"{where.desc_path}: {where.desc_problem}" if where.desc_problem else ""
    if desc_said and warnings is not None:  # said whether or not a run's log gives its layout
        warnings.append(f"{desc_said}; not read for layouts: its runs' come from their logs, else are unknown")
    nodes, gpus, problem = _counts(s.layout_events, s.path, warnings)
    if problem:
        return UNKNOWN, f"{SOURCE_UNKNOWN} ({problem})"
    if nodes and gpus:
        return Layout(nodes, gpus), SOURCE_LOG
    if desc_said:
        return UNKNOWN, f"{SOURCE_UNKNOWN} ({desc_said})"
    for desc, source, named in ((where.desc, SOURCE_SYSTEMS_JSON, str(where.desc_path)),
                                (s.sysjson, SOURCE_SYSJSON_LINE, f"{s.path}:{s.sysjson_line or '?'} (:::SYSJSON)")):
        nodes, gpus, problem = _counts(desc, named, warnings)
        if problem:  # (a systems JSON's was found when it was read)
            return UNKNOWN, f"{SOURCE_UNKNOWN} ({problem})"
        if nodes and gpus:
            detail = where.desc_path.name if source == SOURCE_SYSTEMS_JSON and where.desc_path else ""
            return Layout(nodes, gpus), source + (f" ({detail})" if detail else "")
    names = [where.path.stem] + [folder.name for folder in where.folders]
    for name in names:
        found = layout_from_name(name)
        if found:
            return found, f"{SOURCE_NAME} ({name})"
    texts = [(s.platform, SOURCE_PLATFORM)]
    if where.system_dir is not None:
        texts.append((where.system_dir.name, SOURCE_FOLDER))
    for text, source in texts:
        found = layout_from_text(text) if text else None
        if found:
            return found, f"{source} ({text})"
    said = "; ".join(f"{source} {text!r}" for text, source in texts if text)
    return UNKNOWN, SOURCE_UNKNOWN + (f" ({said} give no nodes x accelerators)" if said else "")
