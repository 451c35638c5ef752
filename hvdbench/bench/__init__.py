"""Micro-benchmarks of what limits scaling besides the model: the interconnect and the storage.

    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench allreduce --out results/demo
    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench io --data data/digits --out results/demo

Modules (none imports a framework; the Horovod/mpi4py side is `hvdbench.frameworks.torch.bench_allreduce`):

    defaults.py          every bench default (sizes, iterations, batch size, passes), defined once
    rows.py              what the benches share: the CSV store (atomic append), run ids, plain-text tables
    formulas.py          message sizes, iteration counts, algbw / busbw (nccl-tests' definitions)
    allreduce_report.py  the sweep over sizes, the Horovod/MPI comparison, the terminal table, the busbw plot
    io.py                reader and raw-h5py passes, page-cache checks, accelerator demand

Their CSV rows (AllreduceRow, IoRow, with the layout columns of runs.csv) are declared in
`hvdbench.results.records.schema`, with every other CSV hvdbench writes.
"""
