"""Run records grouped into the report's rows: aggregate.py (mean, sample std, two-sigma, speed-up,
efficiency, MLPerf's olympic score, the flags and notes) and versions.py (the PyTorch releases the runs
used, for the report's header)."""
