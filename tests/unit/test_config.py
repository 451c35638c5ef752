"""TrainConfig: strict loading (unknown keys and wrong types name the key), the order in which
defaults, model spec, YAML file and options apply, validation, and NxGxBxA run names."""

import dataclasses

import pytest
import yaml

from hvdbench.errors import ConfigError
from hvdbench.train import config
from hvdbench.train.config import TrainConfig, from_dict, resolve

BASE = {"model": "resnet50", "synthetic": True, "out": "runs/x"}


def test_unknown_key_is_named_with_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown key 'batch_size'.*batch_per_gpu"):
        from_dict({"batch_size": 3})


def test_unknown_nested_key_is_named_with_its_section():
    with pytest.raises(ConfigError, match=r"unknown key 'submission.company'"):
        from_dict({"submission": {"company": "acme"}})


@pytest.mark.parametrize("key, value, expected", [
    ("batch_per_gpu", "32", "an integer"),
    ("batch_per_gpu", 3.5, "an integer"),
    ("batch_per_gpu", True, "an integer"),  # a YAML `yes` is not a batch size
    ("lr", "fast", "a number"),
    ("synthetic", 1, "true or false"),
    ("model", 5, "a string"),
])
def test_wrong_types_name_the_key(key, value, expected):
    with pytest.raises(ConfigError, match=rf"key '{key}' must be {expected}"):
        from_dict({key: value})


def test_ints_are_accepted_where_numbers_are_expected():
    assert from_dict({"lr": 1}).lr == 1.0 and isinstance(from_dict({"lr": 1}).lr, float)


def test_nested_sections_merge_key_by_key():
    cfg = from_dict({"submission": {"org": "acme"}})
    assert cfg.submission.org == "acme" and cfg.submission.division == "open"
    cfg2 = from_dict({"submission": {"platform": "dgx"}}, base=cfg)
    assert (cfg2.submission.org, cfg2.submission.platform) == ("acme", "dgx")
    assert cfg.submission.platform == ""  # the base is not modified


def test_model_spec_defaults_then_flavor_overrides_apply():
    full = resolve(BASE)
    debug = resolve({**BASE, "flavor": "debug"})
    assert (full.flavor, full.batch_per_gpu, full.warmup_epochs) == ("full", 256, 5.0)
    assert (debug.batch_per_gpu, debug.lr, debug.momentum) == (16, 0.8, 0.9)  # momentum: top level
    assert debug.target == 0.95 and full.target == 0.759


def test_yaml_file_beats_spec_defaults_and_options_beat_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"flavor": "debug", "batch_per_gpu": 8, "lr": 0.2,
                                    "submission": {"org": "lab"}}))
    cfg = resolve({**BASE, "lr": 0.3, "batch_per_gpu": None}, path)
    assert (cfg.flavor, cfg.batch_per_gpu, cfg.lr, cfg.submission.org) == ("debug", 8, 0.3, "lab")
    assert cfg.eval_batch_per_gpu == 8


def test_errors_in_the_yaml_file_name_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("batch_per_gpu: [1, 2\n")
    with pytest.raises(ConfigError, match=rf"{path}: not valid YAML at line"):
        resolve(BASE, path)
    path.write_text("momentun: 0.9\n")
    with pytest.raises(ConfigError, match=rf"{path}: unknown key 'momentun'"):
        resolve(BASE, path)
    with pytest.raises(ConfigError, match="no such config file"):
        resolve(BASE, tmp_path / "missing.yaml")


@pytest.mark.parametrize("change, message", [
    ({"model": "vgg"}, "unknown model 'vgg'; valid: bert, .*resnet50"),
    ({"flavor": "tiny"}, "has no flavor 'tiny'; valid: full, debug"),
    ({"precision": "fp4"}, "precision 'fp4' is not one of fp32, bf16, fp16, fp8"),
    ({"data": "d"}, "exactly one of --data DIR and --synthetic"),
    ({"synthetic": False}, "exactly one of --data DIR and --synthetic"),
    ({"out": ""}, "no output directory"),
    ({"batch_per_gpu": 0}, "batch_per_gpu must be at least 1"),
    ({"run_id": "a b;rm"}, "run_id 'a b;rm'"),
    ({"synthetic": False, "data": "d", "target": 1.5}, r"target for top1_accuracy must be in \(0, 1\]"),
    ({"synthetic": False, "data": "d", "eval_every": 1.5}, "whole epochs"),
    ({"synthetic": False, "data": "d", "horovod_timeline": True}, "--horovod-timeline records the timed steps"),
])
def test_invalid_runs_are_refused_before_any_framework_starts(change, message):
    with pytest.raises(ConfigError, match=message):
        resolve({**BASE, **change})


def test_modes():
    assert resolve(BASE).mode == "throughput" and resolve(BASE).steps == 100  # synthetic default
    real = {**BASE, "synthetic": False, "data": "d"}
    assert resolve(real).mode == "time_to_accuracy"
    assert resolve({**real, "steps": 20}).mode == "throughput"


def test_time_to_accuracy_options_are_refused_in_a_throughput_run():
    with pytest.raises(ConfigError, match="target belong to time-to-accuracy runs"):
        resolve({**BASE, "target": 0.5})
    with pytest.raises(ConfigError, match=r"max_epochs belong.*\(--steps\)"):
        resolve({**BASE, "synthetic": False, "data": "d", "steps": 5, "max_epochs": 2.0})


def test_resolved_config_round_trips_through_yaml(tmp_path):
    cfg = resolve({**BASE, "flavor": "debug", "submission": {"org": "acme"}})
    config.save_yaml(tmp_path / "config.yaml", cfg)
    again = from_dict(config.load_yaml(tmp_path / "config.yaml"))
    assert again == cfg and dataclasses.asdict(again)["submission"]["org"] == "acme"
    # A saved config reruns as it is, and with options on top.
    assert resolve({}, tmp_path / "config.yaml") == cfg
    assert resolve({"steps": 7}, tmp_path / "config.yaml").steps == 7


def test_every_model_spec_default_is_a_config_key():
    from hvdbench.contracts import get_spec, model_names

    for name in model_names():
        spec = get_spec(name)
        for flavor in spec.flavors:
            from_dict(config.spec_defaults(spec, flavor), where=f"{name} defaults")  # raises if not


def test_run_names():
    assert config.run_name(2, 8, 256, 1) == "2x8x256x1"
    assert config.parse_run_name("4x4x128x2") == (4, 4, 128, 2)
    for bad in ("2x8x256", "0x8x256x1", "2x8xbx1"):
        with pytest.raises(ConfigError, match="NODESxGPUSxBATCHxACCUM"):
            config.parse_run_name(bad)


def test_defaults_are_sane():
    cfg = TrainConfig()
    assert cfg.accum_steps == 1 and cfg.precision == "fp32" and cfg.submission.division == "open"


def _billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for n in range(1, levels + 1):
        lines.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]")
    return "\n".join(lines) + f"\nlr: *a{levels}\n"


@pytest.mark.parametrize("text, message", [
    (_billion_laughs(), "aliases (*name) expand to more than 100,000 values"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels (line 1)"),
    ("lr: [" + ", ".join(["1"] * 400_000) + "]\n", "a YAML config is at most 1,048,576"),
])
def test_yaml_that_would_exhaust_the_machine_is_one_line(tmp_path, text, message):
    # Every YAML file hvdbench reads (train --config, sweep --config, study files) comes through
    # load_yaml: bounded in size, nesting and alias expansion, refused in one line naming the file.
    from hvdbench.train.config import load_yaml

    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_yaml(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value) and "\n" not in str(e.value)
    assert len(str(e.value)) < 300


def test_a_few_aliases_still_load_and_a_wrong_value_is_quoted_short(tmp_path):
    from hvdbench.train.config import load_yaml

    path = tmp_path / "run.yaml"
    path.write_text("base: &b {lr: 0.1}\nlr: 0.2\nsubmission: {org: acme}\nextra: [*b, *b]\n")
    assert load_yaml(path)["extra"] == [{"lr": 0.1}, {"lr": 0.1}]
    with pytest.raises(ConfigError) as e:
        config.from_dict({"lr": ["x" * 10_000] * 1000})
    assert "key 'lr' must be a number, got [" in str(e.value) and len(str(e.value)) < 200


def test_a_models_refuse_hook_is_asked_with_the_resolved_config_and_the_ranks_environment(monkeypatch):
    """ModelSpec.refuse: a model's own reason why a run cannot run as configured, checked by
    validate (so `train`, and a sweep's or study's every layout, refuse it before anything starts),
    with the environment the ranks will have: this process's, or the one resolve is given (a sweep's
    own with its --env)."""
    from hvdbench.contracts import get_spec

    cfg = resolve(BASE)
    asked = []

    def refuse(c, env):
        asked.append((c.model, c.flavor, c.batch_per_gpu, env.get("HVDBENCH_TEST_KNOB")))
        return "resnet50 cannot run like this: a reason" if c.batch_per_gpu > 100 else None

    spec = dataclasses.replace(get_spec("resnet50"), refuse=refuse)
    monkeypatch.setenv("HVDBENCH_TEST_KNOB", "mine")
    with pytest.raises(ConfigError, match="^resnet50 cannot run like this: a reason$"):
        config.validate(cfg, spec)
    config.validate(dataclasses.replace(cfg, batch_per_gpu=8), spec, {"HVDBENCH_TEST_KNOB": "the ranks'"})
    assert asked == [("resnet50", cfg.flavor, cfg.batch_per_gpu, "mine"), ("resnet50", cfg.flavor, 8, "the ranks'")]
    config.validate(cfg, dataclasses.replace(spec, refuse=None))  # no hook: nothing to refuse
