"""`hvdbench sweep`: `plan` (layouts x repeats, interleaved; what is still to do), `config`
(per-layout NODESxGPUSxBATCHxACCUM settings), `run` (the loop: launch, record, resume), `record`
(the row a run leaves), `batch` (one sbatch job per layout)."""
