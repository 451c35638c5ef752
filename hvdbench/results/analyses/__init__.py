"""The report's sections, one module each with its row class (a frozen records/rows.py ReportRow: its
CSV's columns), its rows, its figure and its Markdown: waterfall.py, stragglers.py, links.py,
engines.py, efficiency.py (the compute table), ttt.py, convergence.py, failures.py, study_tables.py,
bench_tables.py. A new one is one more module here and one entry in
hvdbench/results/report/build.py's SECTIONS (issue 45)."""
