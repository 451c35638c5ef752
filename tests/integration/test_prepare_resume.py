"""Resume: prepare killed mid-run (SIGKILL, whole process group) and rerun gives the complete dataset."""

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import launch_env, run

pytestmark = [pytest.mark.integration]


@pytest.mark.timeout(300)
def test_killed_prepare_resumes_to_the_same_dataset(tmp_path, hvdbench_bin):
    out = tmp_path / "ds"
    argv = [hvdbench_bin, "prepare", "synthetic", "--like", "images", "--samples", "6000", "--size", "96",
            "--samples-per-shard", "100", "--workers", "1", "--out", str(out)]
    proc = subprocess.Popen(argv, env=launch_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("*.h5"))) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)  # the group we started, by its id
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "prepare finished before it could be interrupted"
    assert not (out / "manifest.json").exists()
    kept = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("*.h5")}
    assert 3 <= len(kept) < 60

    proc = run(argv)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["samples"] + manifest["splits"]["val"]["samples"] == 6000
    for name, stamp in kept.items():  # finished shards were kept, not rewritten
        assert (out / name).stat().st_ino == stamp[0] and (out / name).stat().st_mtime_ns == stamp[1]
    assert not list(out.glob("*.partial"))
    run([hvdbench_bin, "prepare", "verify", out])

    # The resumed dataset is the one an uninterrupted run makes.
    fresh = tmp_path / "fresh"
    run(argv[:-1] + [str(fresh)])
    assert json.loads((fresh / "manifest.json").read_text())["splits"] == manifest["splits"]
