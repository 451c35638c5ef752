"""Results, by concern; imports run one way, down this list (tests/unit/test_import_rules.py):

    report/     the report as a library: load (the one reader of sweep, study and bench folders and
                published trees), build (its sections, in order), write (the --out folder it owns)
    predict/    layouts not run: throughput and time to train, one least-squares fit between them
    export.py   our sweeps as an MLPerf training results tree (`hvdbench export`)
    analyses/   the report's sections, one module each with its rows, its figure and its Markdown
    render/     the report's tables (CSV, Markdown) and plots, and the figure context the analyses share
    stats/      run records grouped into the report's rows: mean, two-sigma, speed-up, flags
    mllog/      published MLPerf logs read into run records
    records/    what a run is (the one schema of every CSV) and the sweep folder's append-only store
"""
