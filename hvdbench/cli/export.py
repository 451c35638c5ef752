"""`hvdbench export --mlperf OUT`: time-to-accuracy sweeps as an MLPerf results tree."""

import json
from pathlib import Path

import click


def _ruleset(ctx, param, value: str) -> str:
    import re

    if not re.fullmatch(r"\d+\.\d+\.\d+", value or ""):
        raise click.BadParameter(f"{value!r}: a training ruleset such as 4.0.0")
    return value


@click.command()
@click.argument("sweeps", nargs=-1, required=True, metavar="SWEEP_DIR...", type=click.Path(path_type=Path))
@click.option("--mlperf", "out", required=True, type=click.Path(path_type=Path),
              help="New folder for the MLPerf tree: results/<system>/<benchmark>/result_N.txt and "
              "systems/<system>.json (the folder of one submitter).")
@click.option("--env", "env_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="`hvdbench env --json` output from the cluster the sweep ran on, for the system "
              "descriptions [default: run hvdbench env on this machine].")
@click.option("--ruleset", default="4.0.0", show_default=True, callback=_ruleset,
              help="MLPerf training ruleset the tree is for (its benchmarks; the summarizer's checks).")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Score the tree with the official result summarizer and print its score beside hvdbench's.")
def export(sweeps, out, env_file, ruleset, check):
    """Write the time-to-accuracy runs of SWEEP_DIR(s) as an MLPerf training results tree that the
    official tools read: each run's mllog.txt, unchanged, as results/<system>/<benchmark>/result_N.txt
    (one <system> per device, layout NxGxBATCHxACCUM, framework and flavor), and systems/<system>.json
    filled from what the runs recorded and `hvdbench env`. Then, with --check, runs
    `python -m mlperf_logging.result_summarizer OUT training RULESET` and prints its score beside
    hvdbench's olympic mean.

    \b
    Example:
      hvdbench export results/demo --mlperf mlperf-demo
      hvdbench env --json > env.json      # on the cluster
      hvdbench export results/a100 --mlperf mlperf-a100 --env env.json --ruleset 4.0.0
    """
    from hvdbench.errors import ConfigError
    from hvdbench.files import check_writable_dir
    from hvdbench.results import export as ex

    check_writable_dir(out, "--mlperf")
    if env_file:
        try:
            env = json.loads(env_file.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"--env {env_file}: not the JSON of `hvdbench env --json` ({e})") from None
        if not isinstance(env, dict):
            raise ConfigError(f"--env {env_file}: not the JSON of `hvdbench env --json`")
    else:
        from hvdbench import envinfo

        click.echo("system facts: hvdbench env on this machine (give --env FILE from the cluster)")
        env = envinfo.collect()
    result = ex.export_mlperf(list(sweeps), out, env, ruleset)
    if check:
        ex.check(result)
    for b in result.benchmarks:
        ours = "DNF" if b.minutes is None else f"{b.minutes:.4f} min"
        line = f"{b.folder}: {len(b.runs)} run(s); hvdbench: {ours} ({b.rule})"
        if check:
            line += "; summarizer: " + (f"no score ({ex.no_score_reason(b)})" if b.official is None
                                        else f"{b.official:.4f} min")
        click.echo(line)
    for note in result.notes:
        click.echo(note)
    for system in result.systems:
        click.echo(f"wrote {out / 'systems' / (system + '.json')}")
    click.echo("score it: " + " ".join(["python", *result.summarizer_command[1:]]))
