"""The `hvdbench` root command. Subcommands are imported only when invoked, so `--help` is instant."""

import importlib

import click

from hvdbench.errors import HvdbenchError, UsageError, os_error_line

# name -> (module, attribute, one-line help). The help is here so `hvdbench --help` needs no imports.
COMMANDS = {
    "env": ("hvdbench.cli.env", "env", "Report the software and hardware stack (for bug reports)."),
    "prepare": ("hvdbench.cli.prepare", "prepare", "Prepare datasets into HDF5 shards (images, BERT, packed)."),
    "train": ("hvdbench.cli.train", "train", "Train a model as a Horovod worker (run under horovodrun/mpirun/srun)."),
    "sweep": ("hvdbench.cli.sweep", "sweep", "Run a model over every nodes x GPUs layout and repeat."),
    "study": ("hvdbench.cli.study", "study", "Run a study file: several models x layouts x repeats (`study list`)."),
    "report": ("hvdbench.cli.report", "report", "Scaling, layout and time-to-train tables and plots from sweeps."),
    "predict": ("hvdbench.cli.predict", "predict", "Predict the throughput of layouts not run (e.g. 8x8) from a sweep."),
    "compare": ("hvdbench.cli.compare", "compare", "Two sweeps or studies side by side: what changed, against the noise."),
    "bundle": ("hvdbench.cli.bundle", "bundle", "A sweep's evidence archive with a sha256 manifest, and its check."),
    "export": ("hvdbench.cli.export", "export", "Time-to-accuracy sweeps as an MLPerf results tree (result_summarizer)."),
    "cluster": ("hvdbench.cli.cluster", "cluster", "An emulated multi-node cluster on this machine (root)."),
    "bench": ("hvdbench.cli.bench", "bench", "Benchmarks: allreduce, links, storage, compute; a model's FLOPs."),
}


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.splitlines() if part.strip()) or "failed"


class Command(click.Command):
    """A command whose library code may raise hvdbench's UsageError (options that do not go together):
    shown as click shows its own usage errors, under this command's usage line (exit 2). Where a
    command is not one of these, LazyGroup shows it under the command's name alone."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as e:
            raise click.UsageError(_one_line(str(e)), ctx=ctx) from None


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx):
        # A user error is one line on stderr and exit 1 (options that do not go together: exit 2 under
        # the command's usage, as click says its own), never a traceback. An OSError that no
        # command turned into a HvdbenchError (a read-only --out, a full disk, a path under /proc)
        # is one too, naming the file: this is the one place that does it.
        try:
            return super().invoke(ctx)
        except UsageError as e:  # the library's, from a command that is not a Command (click's own pass through)
            name = ctx.invoked_subcommand
            command = click.Context(self.get_command(ctx, name), info_name=name, parent=ctx) if name else ctx
            raise click.UsageError(_one_line(str(e)), ctx=command) from None
        except HvdbenchError as e:
            raise click.ClickException(_one_line(str(e))) from None
        except OSError as e:
            raise click.ClickException(_one_line(os_error_line(e))) from None

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hvdbench")
def cli():
    """Measure how ML training scales on your cluster.

    \b
    Example:
      hvdbench prepare digits --out data/digits
      hvdbench sweep resnet50 --hostfile hostfiles/localhost --out results/demo -- --flavor debug --data data/digits
      hvdbench report results/demo
    """


if __name__ == "__main__":
    cli()
