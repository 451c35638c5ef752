"""`python -m hvdbench ...` is the same as the `hvdbench` console script."""

from hvdbench.cli.main import cli

if __name__ == "__main__":
    cli()
