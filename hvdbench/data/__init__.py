"""Datasets: writers (`hvdbench prepare ...`) and the framework-neutral readers.

    from hvdbench.data.readers import open_dataset   # what training and the storage bench use
"""
