"""Dataset kinds: what a prepared dataset (a manifest's `kind`) holds and how it is checked.

A model folder's data.py subclasses `DatasetKind` and lists the instance in `ModelSpec.kinds`;
`hvdbench prepare verify DIR` and the readers reach the data only through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pathlib import Path


class DatasetKind:
    """One kind of prepared dataset (the manifest's `kind`): its fields, the manifest keys a model
    needs, how `prepare verify` checks values, and random data shaped like it.

    Subclass it in the model folder's data.py and list the instance in `ModelSpec.kinds`.
    """

    name: str = ""
    # Manifest keys handed to the model (`build(cfg, **info)`) and to `synthetic()`: the data's
    # sizes (classes, image size, vocabulary, sequence length...). A missing one is a DatasetError.
    info_keys: tuple[str, ...] = ()
    # True when prepare wrote the samples in random order: readers may then shuffle runs of
    # consecutive samples (sequential reads) instead of single samples.
    shuffled_when_written: bool = False
    samples_per_shard: int = 1024  # `prepare synthetic`'s default
    synthetic_defaults: dict = {}  # info values `prepare synthetic --like NAME` uses unless given
    # Shorthand options of `prepare synthetic` for this kind's whole-number sizes: option name (no
    # dashes) -> info key, e.g. {"size": "image_size"}: `--size 224` is `--info image_size=224`.
    synthetic_flags: dict[str, str] = {}

    def fields(self, info: dict) -> dict[str, dict]:
        """The per-sample shape and dtype of every field, as the manifest's `fields` holds them."""
        raise NotImplementedError

    def limits(self, manifest: dict) -> dict[str, tuple[float, float]]:
        """Inclusive value range of the fields that have one (`prepare verify` checks every value)."""
        return {}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`n` random samples with the fields, shapes and dtypes of this kind's shards."""
        raise NotImplementedError

    def mlperf_samples(self, batch: dict[str, np.ndarray]) -> int | None:
        """How many of MLPerf's samples these rows hold where MLPerf counts something else than rows
        (packed BERT: the sequences, ~2 a row), so a run reports the rate MLPerf's logs count beside
        its rows/s; None where a row is one of MLPerf's samples (the default)."""
        return None

    def synthetic_files(self, out: "Path", info: dict) -> dict:
        """Write any side files a synthetic dataset needs (a vocabulary); its extra manifest keys."""
        return {}

    def host_decode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's on-device preprocessing done with numpy on the host (what `hvdbench bench
        io` times as the host-side cost a loader would add); default: nothing to do."""
        return batch

    def data_info(self, manifest: dict, where: str) -> dict:
        """The `info_keys` of a manifest; DatasetError naming the file for a missing key."""
        from hvdbench.errors import DatasetError

        missing = [k for k in self.info_keys if k not in manifest]
        if missing:
            raise DatasetError(f"{where}: key {missing[0]!r} missing (a {self.name!r} dataset needs "
                               f"{', '.join(self.info_keys)})")
        return {k: manifest[k] for k in self.info_keys}

    def __repr__(self) -> str:
        return f"<dataset kind {self.name}>"
