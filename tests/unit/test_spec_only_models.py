"""The spec-only entries of today's MLPerf LLM benchmarks (deepseekv3_671b, qwen35_397b_grpo,
llama31_405b): known to the registry, refused in one line that says what they need (by `hvdbench
train` and by a sweep or study before anything starts), and their sizes counted exactly where the
network can be built on the meta device.

    .venv/bin/python -m pytest tests/unit/test_spec_only_models.py
"""

import pytest
import torch
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.contracts import get_spec, model_names
from hvdbench.errors import ConfigError

NEEDS = {
    "deepseekv3_671b": ("671B parameters", "expert and pipeline parallelism", "1.4 TB starting checkpoint"),
    "qwen35_397b_grpo": ("a rollout engine", "vLLM", "R2E-Gym", "tensor, pipeline and expert parallelism"),
    "llama31_405b": ("403B parameters", "tensor, pipeline and context parallelism", "Llama 3.1 405B checkpoint"),
}


@pytest.mark.parametrize("model", sorted(NEEDS))
def test_train_refuses_in_one_line_saying_what_it_needs(model, tmp_path):
    assert model in model_names()
    result = CliRunner().invoke(cli, ["train", model, "--synthetic", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {model} is a spec only, not trainable here: ")
    for words in NEEDS[model]:
        assert words in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", sorted(NEEDS))
def test_a_sweep_or_study_naming_it_is_refused_before_anything_starts(model, tmp_path):
    """A study runs one ordinary sweep per model, and a sweep resolves every layout through train's
    validation (ModelSpec.refuse) before it writes or launches anything."""
    from hvdbench.contracts.engines import engine_names
    from hvdbench.sweep.build import build_spec
    from hvdbench.sweep.options import SweepOptions

    for engine in engine_names():
        with pytest.raises(ConfigError) as e:
            build_spec(SweepOptions(tmp_path / "sw", model, ("--synthetic", "--set", f"engine={engine}"),
                                    hosts="localhost:2"))
        assert f": {model} is a spec only, not trainable here: " in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "sw").exists()


def test_their_specs_are_mlperfs_benchmarks():
    spec = {name: get_spec(name) for name in NEEDS}
    assert {n: (s.benchmark, s.mlperf_target) for n, s in spec.items()} == {
        "deepseekv3_671b": ("deepseekv3_671b", 3.6), "qwen35_397b_grpo": ("qwen35_397b_grpo", 0.69),
        "llama31_405b": ("llama31_405b", 5.6)}
    assert spec["qwen35_397b_grpo"].metric.higher_is_better and spec["qwen35_397b_grpo"].kinds == ()
    assert not spec["deepseekv3_671b"].metric.higher_is_better
    assert spec["qwen35_397b_grpo"].parameters == {}  # published 397B, not built here: not claimed exact
    for name in NEEDS:  # no network module pretends to train them
        with pytest.raises(ModuleNotFoundError):
            spec[name].framework_module("torch")


def test_the_counted_sizes_are_exact_on_the_meta_device():
    from hvdbench.frameworks.torch.vision import ensure_torchvision

    ensure_torchvision()
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, LlamaConfig, LlamaForCausalLM

    def count(cls, config):
        with torch.device("meta"):
            return sum(p.numel() for p in cls(config).parameters())

    ds = get_spec("deepseekv3_671b").flavor("full")
    assert count(DeepseekV3ForCausalLM, DeepseekV3Config(vocab_size=ds.vocab_size)) == \
        get_spec("deepseekv3_671b").parameters["full"] == 671_011_724_288
    assert count(DeepseekV3ForCausalLM, DeepseekV3Config()) == 671_026_404_352  # DeepSeek's own vocabulary
    ll = get_spec("llama31_405b").flavor("full")
    config = dict(hidden_size=ll.hidden, intermediate_size=ll.intermediate, num_hidden_layers=ll.layers,
                  num_attention_heads=ll.heads, num_key_value_heads=ll.kv_heads, tie_word_embeddings=False)
    assert count(LlamaForCausalLM, LlamaConfig(vocab_size=ll.vocab_size, **config)) == \
        get_spec("llama31_405b").parameters["full"] == 402_699_272_192
    assert count(LlamaForCausalLM, LlamaConfig(vocab_size=128256, **config)) == 405_853_388_800  # Meta's 405B


def test_a_study_naming_them_says_why_in_one_line(tmp_path):
    study = tmp_path / "llms.yaml"
    study.write_text("study: llms\nreproduces: MLPerf v6's LLMs\nmode: throughput\nlayouts: [1x8]\n"
                     "models:\n  deepseekv3_671b:\n    synthetic: true\n")
    result = CliRunner().invoke(cli, ["study", "run", str(study), "--dry-run", "--hosts", "localhost:8",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert "deepseekv3_671b is a spec only, not trainable here: " in result.stderr
    assert "unknown model" not in result.stderr and not (tmp_path / "o").exists()
