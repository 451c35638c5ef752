"""Run records grouped into the report's rows: aggregate.py (mean, sample std, two-sigma, speed-up,
efficiency, MLPerf's olympic score, the flags and notes)."""
