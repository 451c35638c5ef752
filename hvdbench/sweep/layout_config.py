"""Per-layout sweep configs: `launch/configs/<name>.yaml`, named the MLPerf way.

    model: resnet50              # optional; must match the sweep's MODEL when given
    train:                       # `hvdbench train` settings for every layout (TrainConfig keys)
      flavor: debug
    layouts:                     # NODESxGPUSxBATCHxACCUM: batch per GPU and gradient accumulation
      1x1x32x1: {lr: 0.1}        #   are in the name; the mapping holds the layout's own overrides
      1x2x32x1: {lr: 0.2}
      2x4x64x2: {lr: 0.8, warmup_epochs: 2}

Loading is strict: an unknown key anywhere, a wrong type or a malformed name is a ConfigError
naming the file and the key (the keys are checked against `hvdbench.train.config.TrainConfig`). Each run
of a layout gets the merged settings as `<run dir>/layout.yaml`, passed as `hvdbench train
--config`; options after `--` on the sweep command line still reach train, but one that sets the
same key as the config is refused, so a run is never silently different from its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hvdbench.errors import ConfigError
from hvdbench.launchers.slurm import DEFAULT_TEMPLATE
from hvdbench.topology import Layout
from hvdbench.train import config as train_config

CONFIG_DIR = DEFAULT_TEMPLATE.parents[1] / "configs"  # launch/configs in the project
TOP_KEYS = ("model", "train", "layouts")
# Set by the sweep itself for every run, or by the layout's name: never in a config.
RESERVED = ("model", "out", "run_id", "sweep_name", "repeat", "batch_per_gpu", "accum_steps")


@dataclass(frozen=True)
class LayoutConfig:
    name: str  # NODESxGPUSxBATCHxACCUM
    nodes: int
    gpus_per_node: int
    batch_per_gpu: int
    accum_steps: int
    settings: dict  # merged train settings for this layout, batch and accumulation included

    @property
    def layout(self) -> str:
        return str(Layout(self.nodes, self.gpus_per_node))


@dataclass(frozen=True)
class SweepConfig:
    path: Path
    model: str
    layouts: tuple[LayoutConfig, ...]


def find_config(name: str) -> Path:
    """A path as given, else `launch/configs/<name>.yaml` in the working directory, else in the
    hvdbench project."""
    candidates = [Path(name), Path("launch/configs") / f"{name}.yaml", CONFIG_DIR / f"{name}.yaml"]
    for path in candidates:
        if path.is_file():
            return path
    raise ConfigError(f"sweep config {name!r} not found (looked for {', '.join(map(str, candidates))})")


def load_sweep_config(path: str | Path, model: str) -> SweepConfig:
    path = Path(path)
    return SweepConfig(path, model, parse_sweep_config(train_config.load_yaml(path), model, str(path)))


def parse_sweep_config(data: dict, model: str, where: str) -> tuple[LayoutConfig, ...]:
    """A config's layouts from its mapping (a file's, or a study's model section), checked strictly."""
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (valid: {', '.join(TOP_KEYS)})")
    if data.get("model") not in (None, model):
        raise ConfigError(f"{where}: config is for model {data['model']!r}, the sweep runs {model!r}")
    common = check_settings(data.get("train") or {}, where, "train")
    layouts = data.get("layouts")
    if not isinstance(layouts, dict) or not layouts:
        raise ConfigError(f"{where}: 'layouts' must map NODESxGPUSxBATCHxACCUM names to settings")
    entries = []
    for name, overrides in layouts.items():
        try:
            nodes, gpus, batch, accum = train_config.parse_run_name(str(name))
        except ConfigError as e:
            raise ConfigError(f"{where}: layouts: {e}") from None
        settings = {**common, **check_settings(overrides or {}, where, f"layouts.{name}"),
                    "batch_per_gpu": batch, "accum_steps": accum}
        try:  # values `train` would refuse whatever else the run is (steps: -5, lr: -1.0)
            train_config.check_ranges(train_config.from_dict(settings, where=where))
        except ConfigError as e:
            raise ConfigError(f"{where}: layouts.{name}: {e}") from None
        entries.append(LayoutConfig(str(name), nodes, gpus, batch, accum, settings))
    return tuple(entries)


def check_settings(values, where: str, prefix: str) -> dict:
    """Check `values` as TrainConfig keys (types included), refusing the reserved ones; ConfigError
    naming `where` and the key as `prefix.key`."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: {prefix} must be a mapping of train settings")
    for key in values:
        if key in RESERVED:
            by_name = key in ("batch_per_gpu", "accum_steps")
            why = "given by the layout's name" if by_name else "set by the sweep"
            raise ConfigError(f"{where}: key '{prefix}.{key}' is {why}")
    train_config.from_dict(values, where=where, prefix=f"{prefix}.")  # unknown keys, wrong types
    return dict(values)


def option_names(key: str) -> tuple[str, str]:
    """The train option that sets TrainConfig key `key`, and its negation for booleans."""
    flag = "--" + key.replace("_", "-")
    return flag, "--no-" + flag[2:]


def check_no_conflict(settings: dict, train_args: tuple[str, ...], where: str) -> None:
    """Refuse train arguments that set a key the layout config already sets."""
    given = {a.split("=", 1)[0] for a in train_args if a.startswith("--")}
    if "--config" in given:
        raise ConfigError(f"{where}: a sweep config is given, so put train settings in its 'train:' "
                          "section instead of --config after --")
    for key in settings:
        for flag in option_names(key):
            if flag in given:
                raise ConfigError(f"{where}: {key} is set by the config and by {flag} after --")
