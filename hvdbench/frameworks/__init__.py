"""Framework code: the only package that imports torch, tensorflow or horovod.<framework>."""
