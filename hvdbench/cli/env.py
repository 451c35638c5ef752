"""`hvdbench env`: the report a user pastes into a bug report."""

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def env(as_json):
    """Report Python, torch, TensorFlow, Horovod (frameworks, controllers, tensor operations),
    MPI, NCCL, GPUs, CPUs and hostname; the hardware record (CPU model and cores, GPUs, the
    `nvidia-smi topo -m` matrix, NICs and their link rates, the intra- and inter-node link); the
    engines that can train here and why one cannot. Exits 1 when no engine can train, or when an
    installed Horovod lacks a framework or controller (a Python without Horovod is fine: ddp, fsdp).

    \b
    Example:
      hvdbench env
      hvdbench env --json > env.json
    """
    from hvdbench import envinfo

    info = envinfo.collect()
    found = envinfo.problems(info)
    info["problems"] = found
    click.echo(json.dumps(info, indent=2) if as_json else envinfo.format_text(info))
    for problem in found:
        click.echo(f"Error: {problem}", err=True)
    if found:
        raise SystemExit(1)
