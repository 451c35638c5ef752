"""The report's sections, one module each with its rows, its figure and its Markdown: waterfall.py,
ttt.py, convergence.py, engines.py, study_tables.py, bench_tables.py. A new one (compute efficiency,
energy, memory) is one more module here."""
