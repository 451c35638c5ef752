"""A study file: several models, their data, train and per-layout settings, the layouts, repeats
and mode of one published scaling study (`hvdbench/studies/<name>.yaml`, or a file of the user's own).

    study = load_study("hvdbench/studies/dgx1-mlperf-v05-suite.yaml")
    study.models["resnet50"].layouts        # {"1x8x256x1": {...}} or {}

Loading is strict: an unknown key anywhere, a wrong type or a malformed layout is a ConfigError
naming the file and the key (`studies/x.yaml: models.resnet50.train: unknown key 'lr_'`). Train
settings are checked against `hvdbench.train.config.TrainConfig` and per-layout names the way
`launch/configs/*.yaml` are (NODESxGPUSxBATCHxACCUM). Whether each model exists is checked by the
runner (hvdbench.study.run), which can skip the missing ones when asked.

A `prepare` recipe is the argv of `hvdbench prepare` without its --out, checked here, when the file
loads (before anything is written or run): its first item names one of `hvdbench prepare`'s commands
(`prepare_commands`: the registry's, no framework imported), no item is empty or holds a NUL, and
it gives no --out. It is run as an argv list, never through a shell, and printed shell-quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.contracts.engines import engine_names
from hvdbench.errors import ConfigError
from hvdbench.launchers import CONTROLLERS
from hvdbench.launchers.registry import launcher_names
from hvdbench.topology import Layout
from hvdbench.sweep import layout_config
from hvdbench.train import config as train_config
from hvdbench.train.config import quote

MODES = ("throughput", "time_to_accuracy", "both")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

TOP_KEYS = ("study", "reproduces", "hostfile", "mode", "layouts", "gpus", "repeats", "launcher", "controller",
            "timeout", "flavor", "engines", "throughput", "published", "models")
MODEL_KEYS = ("flavor", "data", "prepare", "synthetic", "train", "layouts", "engines", "debug")
DEBUG_KEYS = ("data", "prepare", "synthetic", "train")
PUBLISHED_KEYS = ("speedup", "time_to_train_min")
BATCH_KEYS = ("batch_per_gpu", "accum_steps")
# `hvdbench prepare`'s own commands (hvdbench/cli/prepare.py); the model folders add theirs through
# their specs. tests/unit/test_study.py holds `prepare_commands()` to the command group's list.
PREPARE_OWN_COMMANDS = ("synthetic", "verify")


def prepare_commands() -> list[str]:
    """Every `hvdbench prepare` command, named as its group names them (a model folder's
    "module:attr" reference is the command `attr`, '_' written '-'), read from the registry: no
    framework and no model folder's command module is imported."""
    from hvdbench.contracts import specs

    return sorted({*PREPARE_OWN_COMMANDS, *(ref.rsplit(":", 1)[1].replace("_", "-")
                                            for spec in specs() for ref in spec.prepare_commands)})


@dataclass(frozen=True)
class DataPlan:
    """Where a model's data comes from: a prepared folder (made by `prepare` when missing) or synthetic."""

    path: str = ""
    prepare: tuple[str, ...] = ()  # `hvdbench prepare <these> --out <path>`
    synthetic: bool = False


@dataclass(frozen=True)
class ModelPlan:
    name: str
    flavor: str | None
    data: DataPlan
    train: dict
    layouts: dict  # NODESxGPUSxBATCHxACCUM -> settings (only with the study's own flavor)
    debug: dict  # data / prepare / synthetic / train for --flavor debug
    engines: tuple[str, ...] = ()  # `sweep --engines` for this model (empty: the study's)


@dataclass(frozen=True)
class Study:
    path: Path
    name: str
    reproduces: str
    models: dict[str, ModelPlan]
    mode: str = "throughput"
    layouts: tuple[str, ...] = ()
    gpus: tuple[int, ...] = ()
    repeats: int = 1
    launcher: str | None = None
    controller: str = "gloo"
    timeout: float | None = None
    flavor: str | None = None
    engines: tuple[str, ...] = ()  # every layout and repeat under each (sweep --engines); empty: train's engine
    hostfile: Path | None = None
    throughput: dict = field(default_factory=dict)
    published: dict = field(default_factory=dict)  # "speedup" | "time_to_train_min" -> model -> {gpus: value}

    @property
    def modes(self) -> tuple[str, ...]:
        return ("throughput", "time_to_accuracy") if self.mode == "both" else (self.mode,)


def load_study(path: str | Path) -> Study:
    path = Path(path)
    where = str(path)
    data = train_config.load_yaml(path)
    _keys(data, TOP_KEYS, where, "")
    for key in ("study", "reproduces", "models"):
        if key not in data:
            raise ConfigError(f"{where}: missing key '{key}'")
    name = _str(data["study"], where, "study")
    if not NAME_RE.fullmatch(name):
        raise ConfigError(f"{where}: study {quote(name)}: lowercase letters, digits, '-' and '_' only")
    mode = data.get("mode", "throughput")
    if mode not in MODES:
        raise ConfigError(f"{where}: mode {quote(mode)} is not one of {', '.join(MODES)}")
    if "layouts" in data and "gpus" in data:
        raise ConfigError(f"{where}: give 'layouts' or 'gpus', not both")
    layouts = tuple(_layout(v, where, f"layouts[{i}]") for i, v in enumerate(_list(data.get("layouts", []), where,
                                                                                    "layouts")))
    gpus = tuple(_positive(v, where, f"gpus[{i}]") for i, v in enumerate(_list(data.get("gpus", []), where, "gpus")))
    for key, values in (("layouts", layouts), ("gpus", gpus)):  # a repeat was dropped unseen
        twice = next((i for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None:
            raise ConfigError(f"{where}: {key}[{twice}] {quote(values[twice])} is given twice")
    launcher = data.get("launcher")  # None: the sweep's default (horovodrun, or torchrun without Horovod)
    if launcher is not None and launcher not in launcher_names():
        raise ConfigError(f"{where}: launcher {quote(launcher)} is not one of {', '.join(launcher_names())}")
    controller = data.get("controller", "gloo")
    if controller not in CONTROLLERS:
        raise ConfigError(f"{where}: controller {quote(controller)} is not one of {', '.join(CONTROLLERS)}")
    timeout = data.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigError(f"{where}: timeout {quote(timeout)}: seconds, a positive number")
    models_data = data["models"]
    if not isinstance(models_data, dict) or not models_data:
        raise ConfigError(f"{where}: 'models' must map model names to their settings")
    models = {str(m): _model(str(m), section, where) for m, section in models_data.items()}
    if not layouts and not gpus:
        without = [m for m, plan in models.items() if not plan.layouts]
        if without:
            raise ConfigError(f"{where}: models.{without[0]} has no 'layouts' of its own and the study gives "
                              "neither 'layouts' nor 'gpus'")
    study_engines = _engines(data.get("engines"), where, "engines")
    for plan in models.values():
        _check_one_engine_choice(plan, study_engines, where)
    hostfile = data.get("hostfile")
    return Study(
        path=path, name=name, reproduces=_str(data["reproduces"], where, "reproduces"), models=models,
        mode=mode, layouts=layouts, gpus=gpus, repeats=_positive(data.get("repeats", 1), where, "repeats"),
        launcher=launcher, controller=controller, timeout=float(timeout) if timeout is not None else None,
        flavor=_str(data["flavor"], where, "flavor") if "flavor" in data else None,
        engines=study_engines,
        hostfile=_hostfile(_argument(hostfile, where, "hostfile"), path) if hostfile is not None else None,
        throughput=_train(data.get("throughput") or {}, where, "throughput"),
        published=_published(data.get("published") or {}, where))


def _model(name: str, section, where: str) -> ModelPlan:
    at = f"models.{name}"
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: {at} must be a mapping")
    _keys(section, MODEL_KEYS, where, at + ".")
    debug = section.get("debug") or {}
    if not isinstance(debug, dict):
        raise ConfigError(f"{where}: {at}.debug must be a mapping")
    _keys(debug, DEBUG_KEYS, where, at + ".debug.")
    settings = dict(section.get("layouts") or {})
    given = [k for k in BATCH_KEYS if k in (section.get("train") or {})]
    if settings and given:
        raise ConfigError(f"{where}: {at}.train.{given[0]}: the model's layouts name their batch "
                          "(NODESxGPUSxBATCHxACCUM)")
    if settings:  # checked as a launch/configs file is, against this model's train settings
        config = {"train": section.get("train") or {}, "layouts": settings}
        try:
            layout_config.parse_sweep_config(config, name, where)
        except ConfigError as e:
            raise ConfigError(str(e).replace(f"{where}: ", f"{where}: {at}.", 1)) from None
    return ModelPlan(
        name=name, flavor=_str(section["flavor"], where, f"{at}.flavor") if "flavor" in section else None,
        data=_data(section, where, at), train=_train(section.get("train") or {}, where, f"{at}.train"),
        layouts={str(k): dict(v or {}) for k, v in settings.items()},
        engines=_engines(section.get("engines"), where, f"{at}.engines"),
        debug={"data": _data(debug, where, f"{at}.debug"), "train": _train(debug.get("train") or {}, where,
                                                                          f"{at}.debug.train")} if debug else {})


def _data(section: dict, where: str, at: str) -> DataPlan:
    synthetic = section.get("synthetic", False)
    if not isinstance(synthetic, bool):
        raise ConfigError(f"{where}: {at}.synthetic must be true or false")
    path = _argument(section["data"], where, f"{at}.data") if "data" in section else ""
    prepare = tuple(_argument(a, where, f"{at}.prepare[{i}]")
                    for i, a in enumerate(_list(section.get("prepare", []), where, f"{at}.prepare")))
    if synthetic and (path or prepare):
        raise ConfigError(f"{where}: {at}: synthetic data needs no 'data' or 'prepare'")
    if prepare and not path:
        raise ConfigError(f"{where}: {at}.prepare needs 'data': the folder it prepares")
    if prepare:
        commands = prepare_commands()
        if prepare[0] not in commands:
            raise ConfigError(f"{where}: {at}.prepare[0] {quote(prepare[0])} is not a command of `hvdbench "
                              f"prepare` ({', '.join(commands)}); a recipe is its argument list, e.g. "
                              "[digits, --size, \"8\"]")
        out = next((i for i, a in enumerate(prepare) if a == "--out" or a.startswith("--out=")), None)
        if out is not None:
            raise ConfigError(f"{where}: {at}.prepare[{out}]: --out is the model's 'data' folder, set by the study")
    return DataPlan(path, prepare, synthetic)


def _argument(value, where: str, key: str) -> str:
    """A non-empty string that can be one argv item (no NUL): a path or a prepare argument."""
    text = _str(value, where, key)
    if "\0" in text:
        raise ConfigError(f"{where}: {key} {quote(value)} holds a NUL character (no command argument can)")
    return text


def _train(values, where: str, at: str) -> dict:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: {at} must be a mapping of train settings")
    for key in ("flavor", "data", "synthetic"):
        if key in values:
            raise ConfigError(f"{where}: {at}.{key}: set it in the model's section, not in train settings")
    # The batch names each generated layout (NxGxBxA) where the model has no per-layout settings.
    batch = {k: _positive(values[k], where, f"{at}.{k}") for k in BATCH_KEYS if k in values}
    layout_config.check_settings({k: v for k, v in values.items() if k not in BATCH_KEYS}, where, at)
    return {**values, **batch}


def _published(values, where: str) -> dict:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: published must be a mapping")
    _keys(values, PUBLISHED_KEYS, where, "published.")
    out = {}
    for kind, by_model in values.items():
        if not isinstance(by_model, dict):
            raise ConfigError(f"{where}: published.{kind} must map model names to {{GPUs: value}}")
        out[kind] = {}
        for model, figures in by_model.items():
            at = f"published.{kind}.{model}"
            if not isinstance(figures, dict):
                raise ConfigError(f"{where}: {at} must map GPU counts to numbers")
            out[kind][str(model)] = {}
            for gpus, value in figures.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(f"{where}: {at}.{gpus}: {quote(value)} is not a number")
                out[kind][str(model)][_positive(gpus, where, f"{at} (GPU count {quote(gpus)})")] = float(value)
    return out


def _hostfile(text: str, study_path: Path) -> Path:
    """As given (from the working directory), else from the project the study file lives in, else from
    hvdbench's checkout (the shipped studies, in hvdbench/studies/, name its hostfiles/example-*)."""
    given = Path(text)
    if given.is_absolute() or given.exists():
        return given
    for project in (study_path.absolute().parent.parent, Path(__file__).resolve().parents[2]):
        if (project / given).exists():
            return project / given
    return given


def _engines(value, where: str, key: str) -> tuple[str, ...]:
    """A list of engine names (horovod, ddp, fsdp), each once; empty when not given."""
    if value is None:
        return ()
    names = tuple(_str(v, where, f"{key}[{i}]") for i, v in enumerate(_list(value, where, key)))
    for i, name in enumerate(names):
        if name not in engine_names():
            raise ConfigError(f"{where}: {key}[{i}] {quote(name)} is not one of {', '.join(engine_names())}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: {key} names an engine twice")
    return names


def _check_one_engine_choice(plan: ModelPlan, study_engines: tuple[str, ...], where: str) -> None:
    """`engines:` (the model's, else the study's) runs every layout under each engine, as `sweep
    --engines` does: a train setting `engine:` of the same model would be shown in its runs' settings
    and layout files but not run, so the two together are refused, as `sweep` refuses them."""
    engines, key = (plan.engines, f"models.{plan.name}.engines") if plan.engines else (study_engines, "engines")
    if not engines:
        return
    at = f"models.{plan.name}"
    places = [(f"{at}.train", plan.train), *((f"{at}.layouts.{k}", v) for k, v in plan.layouts.items()),
              (f"{at}.debug.train", plan.debug.get("train") or {})]
    for place, settings in places:
        if "engine" in settings:
            raise ConfigError(f"{where}: {place}.engine {quote(settings['engine'])} and {key} "
                              f"[{', '.join(engines)}] both choose the engine: give it in one place")


def _keys(data: dict, valid, where: str, prefix: str) -> None:
    unknown = [k for k in data if k not in valid]
    if unknown:
        raise ConfigError(f"{where}: unknown key '{prefix}{unknown[0]}' (valid: {', '.join(valid)})")


def _str(value, where: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key} must be a non-empty string, not {quote(value)}")
    return value.strip()


def _list(value, where: str, key: str) -> list:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {key} must be a list")
    return value


def _positive(value, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {key} {quote(value)}: a whole number of at least 1")
    return value


def _layout(value, where: str, key: str) -> str:
    try:  # NxG is parsed in one place (topology.Layout.parse); a study's leading zeros are refused too
        if not isinstance(value, str) or str(Layout.parse(value, "")) != value:
            raise ConfigError(value)
    except ConfigError:
        raise ConfigError(f"{where}: {key} {quote(value)} is not NODESxGPUS (e.g. 2x4)") from None
    return value
