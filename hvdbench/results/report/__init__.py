"""The report as a library: what `hvdbench report` and `hvdbench predict` run, and what a notebook
or a test can call.

    from hvdbench.results.report import Options, build, load, write
    from hvdbench.topology import Layout
    loaded = load(["results/demo"], mllogs=["training_results_v4.0/Oracle"])   # every file read once
    report = build(loaded, Options(baseline=Layout(1, 1), predict_layouts=[Layout(2, 2)]))  # the sections
    print(report.text)
    write(report, Path("results/demo/report"), ("csv", "md", "png"))          # OUT owned: folder.py

    load.py     the one reader of sweep, study and bench folders and published MLPerf trees
    build.py    the ordered sections (tables, benches, compute, waterfall, engines, time to train,
                convergence, studies, predictions, plots): typed rows, Markdown, files; one more is one
                module in analyses/ and one entry in build.SECTIONS
    folder.py   the --out folder a report owns: its record of what it wrote, its lock
"""

from hvdbench.results.report.build import (SECTIONS, Options, Predictions, Report, Section, build, layout_parts,
                                           predictions)
from hvdbench.results.report.folder import REPORT_LOCK, REPORT_RECORD, owned_folder, write
from hvdbench.results.report.load import Loaded, load

__all__ = ["SECTIONS", "Options", "Predictions", "Report", "Section", "build", "layout_parts", "predictions",
           "REPORT_LOCK", "REPORT_RECORD", "owned_folder", "write", "Loaded", "load"]
