"""The registry list: one line per model folder. Everything else about models is looked up through
`hvdbench.contracts` (`get_spec`, `get_kind`), which reads this list by name; a package outside
hvdbench adds its own models with an entry point (see hvdbench/contracts/registry.py).

A model lives in `hvdbench/models/<name>/` (see hvdbench/contracts/ and docs/adding-a-model.md).
"""

# name -> module defining SPEC. Imported lazily: `hvdbench --help` touches no spec.
REGISTRY = {
    "resnet50": "hvdbench.models.resnet50",
    "bert": "hvdbench.models.bert",
    "transformer": "hvdbench.models.transformer",
    "gnmt": "hvdbench.models.gnmt",
    "ncf": "hvdbench.models.ncf",
    "llama2_lora": "hvdbench.models.llama2_lora",
    "stable_diffusion": "hvdbench.models.stable_diffusion",
    "ssd": "hvdbench.models.ssd",
    "retinanet": "hvdbench.models.retinanet",
    "maskrcnn": "hvdbench.models.maskrcnn",
    "flux1": "hvdbench.models.flux1",
    "llama31_8b": "hvdbench.models.llama31_8b",
    "gpt_oss_20b": "hvdbench.models.gpt_oss_20b",
    "deepseekv3_671b": "hvdbench.models.deepseekv3_671b",
    "qwen35_397b_grpo": "hvdbench.models.qwen35_397b_grpo",
    "llama31_405b": "hvdbench.models.llama31_405b",
}
