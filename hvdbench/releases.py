"""The PyTorch releases hvdbench is tested on, and what a recorded version says against them.

`hvdbench env` (this Python's torch), `hvdbench train` (the worker's, said once at start) and
`hvdbench report` (the torch each run recorded) all say it the same way:

    torch_tested("2.15.0+cu130")          # True
    range_words("2.16.0")                 # '2.16.0 (OUTSIDE the tested range, 2.11 to 2.15: ...)'

Framework-free (a version is read as text, with packaging's PEP 440 parser), so the report and the
core read it without importing torch.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

# The PyTorch releases hvdbench is tested on, oldest and newest (minor versions): CI's torch tiers
# (scripts/test_torch_tier.sh) run these two, `make setup` one between; setup.cfg's torch extra admits
# this range only (tests/unit/test_hardware.py holds the three together).
TESTED_TORCH = ("2.11", "2.15")
TESTED_WORDS = f"{TESTED_TORCH[0]} to {TESTED_TORCH[1]}"


def release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string ('2.15.0+cu130', '2.16.0.dev20261101'); None where the text
    is not a version (a record edited by hand, a vendor's build string that is not PEP 440)."""
    try:
        parsed = Version(version.strip())
    except (InvalidVersion, AttributeError):
        return None
    return (parsed.release + (0,))[:2]


def torch_tested(version: str) -> bool | None:
    """Whether a torch version is inside TESTED_TORCH; None where `version` is not a version at all."""
    found = release(version)
    if found is None:
        return None
    return release(TESTED_TORCH[0]) <= found <= release(TESTED_TORCH[1])


def range_words(version: str) -> str:
    """The version as `env`, `train` and the report print it, with where it stands against the range."""
    tested = torch_tested(version)
    if tested is None:
        return (f"{version!r} (not a version hvdbench can read, so not known to be inside the tested range, "
                f"{TESTED_WORDS})")
    return version + (f" (inside the tested range, {TESTED_WORDS})" if tested else
                      f" (OUTSIDE the tested range, {TESTED_WORDS}: hvdbench may break or measure differently)")
