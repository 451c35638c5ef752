"""What a person reads and pastes: whole lines in one write, rich output never wrapped or cut in a
pipe, and progress lines while long work runs (train, prepare)."""

import io
import subprocess
import sys
from types import SimpleNamespace

from hvdbench.output import console, line
from hvdbench.train.loop import Progress


class Writes(io.StringIO):
    def __init__(self):
        super().__init__()
        self.calls = []

    def write(self, text):
        self.calls.append(text)
        return super().write(text)


def test_a_line_is_one_write():
    out = Writes()
    line("[hvdbench] throughput: 1.0 samples/s", out)
    assert out.calls == ["[hvdbench] throughput: 1.0 samples/s\n"]


def test_piped_rich_output_is_never_wrapped_or_cut():
    """A table with a 150-character path, printed to a pipe, keeps every cell whole on one line."""
    path = "/scratch/" + "a-rather-long-folder-name/" * 5 + "runs.csv"
    code = ("from rich.table import Table\nfrom hvdbench.output import console\n"
            "t = Table(title='report')\nt.add_column('sequences')\nt.add_column('file')\n"
            f"t.add_row('12345', {path!r})\nconsole().print(t)\n"
            f"console().print('wrote ' + {path!r})\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and "sequences" in proc.stdout
    assert any(path in row for row in proc.stdout.splitlines())  # the path in one piece
    assert f"wrote {path}" in proc.stdout.splitlines()
    assert console().width >= 1000  # under pytest stdout is not a terminal either


def test_printed_text_is_never_read_as_markup():
    """A worker's error quotes a path in brackets: rich read '[/tmp/.../http_store.cc:54]' as a closing
    tag and raised MarkupError, which ended the sweep reporting the failed run (issue 55's cluster test)."""
    error = "3x1-r1  failed  RuntimeError: [/tmp/gloo/rendezvous/http_store.cc:54] [bold]connect timed out"
    for stderr in (False, True):
        out = io.StringIO()
        shown = console(stderr)
        shown.file = out
        shown.print(error)
        assert out.getvalue().rstrip("\n") == error


def test_progress_lines_come_at_the_interval_with_rate_and_time_left(monkeypatch, capsys):
    clock = [100.0]
    monkeypatch.setattr("hvdbench.train.loop.time.monotonic", lambda: clock[0])
    progress = Progress(SimpleNamespace(rank=0), total_steps=100, samples_per_step=32, steps_per_epoch=20,
                        interval_s=10)
    clock[0] = 101.0
    progress.tick(1)  # the first step: said at once, without a rate
    clock[0] = 105.0
    progress.tick(10)  # 4 s after the last line: too soon
    clock[0] = 111.0
    progress.tick(20)
    progress.metric = "top1_accuracy 0.5000"
    clock[0] = 125.0
    progress.tick(50)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["[hvdbench] step 1/100 (epoch 0.1/5), first step done",
                     "[hvdbench] step 20/100 (epoch 1.0/5), 58 samples/s, at most 0:44 left",
                     "[hvdbench] step 50/100 (epoch 2.5/5), 64 samples/s, top1_accuracy 0.5000, at most 0:25 left"]


def test_only_rank_0_reports_progress(capsys):
    progress = Progress(SimpleNamespace(rank=1), total_steps=10, samples_per_step=1, interval_s=0.0001)
    progress.tick(5)
    assert capsys.readouterr().out == ""


def test_prepare_progress_is_plain_lines_in_a_pipe(monkeypatch, capsys):
    from hvdbench.data import parallel

    monkeypatch.setattr(parallel, "PLAIN_PROGRESS_S", 0.0)
    with parallel.progress("digits", total=3) as advance:
        for _ in range(3):
            advance()
    assert capsys.readouterr().err.splitlines()[-1].startswith("digits: 3/3 shards, ")


def test_the_sweep_view_shows_the_workers_last_progress_line(tmp_path):
    from hvdbench.sweep.display import current_line, latest_progress

    log = tmp_path / "launch.log"
    log.write_text("[1,0]<stdout>:[hvdbench] resnet50/debug torch fp32: 2 rank(s)\n"
                   "[1,0]<stdout>:[hvdbench] step 120/600 (epoch 2.0/10), 812 samples/s, at most 0:40 left\n"
                   "[1,1]<stderr>:some warning\n")
    assert latest_progress(log) == "step 120/600 (epoch 2.0/10), 812 samples/s, at most 0:40 left"
    assert latest_progress(tmp_path / "missing.log") == ""
    import time

    fields = {"run": "running 1x2-r1", "run_start": time.monotonic() - 65, "log": log}
    assert current_line(fields) == "running 1x2-r1 1:05  step 120/600 (epoch 2.0/10), 812 samples/s, at most 0:40 left"
    assert current_line({}) == ""
