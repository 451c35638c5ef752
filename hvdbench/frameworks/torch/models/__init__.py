"""PyTorch networks, one module per model (`resnet`, `bert`), each with `build`, `synthetic_batch`
and `loss_and_stats` (see COMMON interface in hvdbench/frameworks/__init__.py). No horovod here."""
