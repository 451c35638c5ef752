"""TensorFlow 2 (Keras 3) + horovod.tensorflow: dist.py (Horovod), data.py (batches to the device),
train.py (Trainer with a tf.function step and hvd.DistributedGradientTape)."""
