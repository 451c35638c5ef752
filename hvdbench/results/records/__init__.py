"""What a run is and where it is kept: schema.py (RunResult, the bench rows, every CSV's columns)
and store.py (runs.csv and the bench CSVs, append-only, each append one write of whole rows; the
sweep folder's files)."""
