"""Drawing the report: tables.py (CSV, Markdown, one table's NAME.csv and NAME.png) and plots.py (the
four scaling plots, and the figure context, axes and waterfall bars every analysis's figure shares)."""
