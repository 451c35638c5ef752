"""hvdbench: how does training scale on this cluster? Prepare data, sweep Horovod layouts, report."""

__version__ = "0.1.0"
