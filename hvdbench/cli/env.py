"""`hvdbench env`: the report a user pastes into a bug report."""

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--probe", is_flag=True,
              help="Also import torch, TensorFlow and Horovod (in a subprocess: seconds, and about 1 GB of memory) "
                   "for what only an import says: Horovod's controllers and tensor operations, the GPUs each "
                   "framework sees, the NCCL torch loads, the MPI mpi4py loads.")
def env(as_json, probe):
    """Report Python, torch, TensorFlow, Horovod (the frameworks it was built for), MPI, NCCL, GPUs, CPUs
    and hostname; the hardware record (CPU model and cores, GPUs, the `nvidia-smi topo -m` matrix,
    NICs and their link rates, the intra- and inter-node link); the engines that can train here and
    why one cannot. Versions come from package metadata, nothing of a framework is imported (about a
    second); --probe imports them too. Exits 1 when no engine can train, or when an installed Horovod
    lacks a framework (or, with --probe, a controller) or was built against another torch (a Python
    without Horovod is fine: ddp, fsdp).

    \b
    Example:
      hvdbench env
      hvdbench env --probe --json > env.json
    """
    from hvdbench import envinfo

    info = envinfo.collect(probe=probe)
    found = envinfo.problems(info)
    info["problems"] = found
    click.echo(json.dumps(info, indent=2) if as_json else envinfo.format_text(info))
    for problem in found:
        click.echo(f"Error: {problem}", err=True)
    if found:
        raise SystemExit(1)
