"""`hvdbench sweep`: `plan` (layouts x repeats, interleaved; what is still to do), `layout_config`
(per-layout NODESxGPUSxBATCHxACCUM settings), `spec` (the sweep and its sweep.json), `run` (the
loop: launch, record, resume), `launch` (the one launch path, for runs and per-layout benches),
`display` (dry run, progress), `locks` and `signals` (sweeps sharing a directory; stopping between
rows), `record` (the row a run leaves), `batch` (one sbatch job per layout)."""
