"""Studies: several models, their layouts and repeats from one file (hvdbench/studies/*.yaml: package data)."""
