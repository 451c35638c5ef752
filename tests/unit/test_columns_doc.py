"""docs/columns.md, the report's column dictionary, is generated from the typed rows and up to date."""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.results.records.rows import ReportRow
from hvdbench.results import columns


def _row_classes(cls=ReportRow):
    for sub in cls.__subclasses__():
        yield sub
        yield from _row_classes(sub)


def test_docs_columns_md_is_what_the_rows_generate():
    # a column added, renamed or explained anew without regenerating fails here
    assert columns.DOC.read_text(encoding="utf-8") == columns.document(), \
        "docs/columns.md is stale: run .venv/bin/python -m hvdbench.results.columns"


def test_every_table_is_in_the_dictionary():
    columns.document()  # the report's and compare's modules imported: every row class is defined
    tables = {c for c in _row_classes() if c.__module__.startswith("hvdbench.results.")}
    assert tables <= set(columns.ROWS)
    assert "## compare.csv (CompareRow)" in columns.document()
    assert "## compare_environment.csv (EnvRow)" in columns.document()


def test_every_column_of_every_table_has_a_meaning():
    # a column added without a comment beside its field (or a MEANINGS entry) fails here, naming it
    missing = [f"{cls.__name__}.{name}" for cls in columns.ROWS for name in cls.columns()
               if not columns.meaning(cls, name).strip()]
    assert not missing, f"columns without a meaning: {', '.join(missing)}"


def test_a_field_without_a_comment_has_no_meaning():
    # the test above can fail: a row class whose field says nothing is found out
    @dataclass(frozen=True)
    class Bare(ReportRow):
        """bare.csv"""
        unexplained_thing: int = 0
        said: int = 0  # what it is

    assert columns.meaning(Bare, "unexplained_thing") == ""
    assert columns.meaning(Bare, "said") == "what it is"


def test_the_columns_issue_58_named_have_their_unit_and_meaning():
    text = columns.document()
    scaling = text.split("## scaling.csv")[1].split("\n## ")[0]
    for name, unit in (("throughput_mean", "samples/s"), ("efficiency", "fraction (1 = 100 %)"), ("cv", "fraction"),
                       ("step_cv", "fraction"), ("system", ""), ("layout_source", "")):
        line = next(x for x in scaling.splitlines() if x.startswith(f"| `{name}` |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2] == unit and cells[3], line
    waterfall = text.split("## waterfall.csv")[1].split("\n## ")[0]
    for name in ("ideal", "comm_loss"):
        assert f"| `{name}` | float" in waterfall and "| samples/s |" in next(
            x for x in waterfall.splitlines() if x.startswith(f"| `{name}` |"))
    assert columns.main(["--check"]) == 0
