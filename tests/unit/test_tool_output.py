"""nvidia-smi as it misbehaves (issue 50, item 15), a real executable on PATH in a temporary folder:
garbage, bytes that are not UTF-8, megabytes of output, or a hang leave the hardware record's GPU fields
empty with a note; `hvdbench env` and a run's interference reading go through that one tolerant path."""

import os
import sys

import pytest

from hvdbench import envinfo, hardware, interference


def fake_smi(folder, body: str):
    """`nvidia-smi` in `folder`: a Python script doing `body` (its argv in sys.argv)."""
    folder.mkdir(exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nimport os, sys, time\n{body}\n")
    smi.chmod(0o755)
    return smi


CASES = {
    "not UTF-8": ("sys.stdout.buffer.write(b'0, NVIDIA \\xff\\xfe H100, 81559, 550.54.15, 0000:18:00.0\\n')",
                  "output not UTF-8 (byte 10): its fields left empty"),
    "garbage": ("print('NVIDIA-SMI has failed because it could not communicate; fields: ???')",
                "--query-gpu: output not understood"),
    "huge": ("sys.stdout.write('0, x, 1, 2, 3\\n' * 200_000)", "more than 1 MiB of output: its fields left empty"),
    "hang": ("time.sleep(60)", "no answer in 1 s: its fields left empty"),
    "fails": ("sys.exit(9)", "exit status 9: its fields left empty"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_misbehaving_nvidia_smi_leaves_the_gpu_fields_empty_with_a_note(tmp_path, monkeypatch, case):
    body, said = CASES[case]
    smi = fake_smi(tmp_path / "bin", body)
    monkeypatch.setattr(hardware, "TOOL_TIMEOUT_S", 1.0)  # the hang case: its timeout, not 10 s of the suite's
    record = hardware.host_record(smi=str(smi))
    assert (record["gpus"], record["driver"], record["gpu_topology"]) == ([], "", {})
    assert any(said in note for note in record["notes"]), record["notes"]
    assert record["cpu"]["cores"] >= 1  # the rest of the record is read as ever
    assert envinfo._gpus(record) == []


def test_envs_gpus_come_from_the_hardware_records_one_query(tmp_path):
    smi = fake_smi(tmp_path / "bin", "print('0, NVIDIA H100 80GB HBM3, 81559, 550.54.15, 00000000:18:00.0')")
    record = hardware.host_record(smi=str(smi))
    assert envinfo._gpus(record) == [{"name": "NVIDIA H100 80GB HBM3", "memory": "81559 MiB", "driver": "550.54.15"}]
    assert record["notes"] == []


def test_a_run_reading_the_gpus_processes_survives_a_non_utf8_nvidia_smi(tmp_path, monkeypatch):
    fake_smi(tmp_path / "bin", "sys.stdout.buffer.write(b'\\xff\\xfe12\\n')")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert interference.gpu_processes() is None  # unknown, as without nvidia-smi: not a failed run
