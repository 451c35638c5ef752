"""PyTorch + horovod.torch: dist.py (Horovod), data.py (batches to the device), train.py (Trainer)."""
