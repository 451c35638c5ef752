"""Studies: several models, their layouts and repeats from one file (studies/*.yaml)."""
