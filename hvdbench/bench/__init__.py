"""Micro-benchmarks of what limits scaling besides the model: the interconnect and the storage.

    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench allreduce --out results/demo
    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench io --data data/digits --out results/demo

Modules (none imports a framework; the Horovod/mpi4py side is `hvdbench.frameworks.torch.bench_allreduce`):

    rows.py              the bench CSV rows: a dataclass per bench, declared once, atomic append
    formulas.py          message sizes, iteration counts, algbw / busbw (nccl-tests' definitions)
    allreduce_report.py  AllreduceRow, the sweep over sizes, the terminal table, the busbw plot
    io.py                IoRow, reader and raw-h5py passes, page-cache checks, accelerator demand
"""
