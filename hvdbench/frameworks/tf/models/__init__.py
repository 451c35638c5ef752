"""TensorFlow (Keras 3) networks, one module per model (`resnet`), each with `build`,
`synthetic_batch` and `loss_and_stats`, like the PyTorch ones. No horovod here."""
