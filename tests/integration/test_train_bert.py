"""`hvdbench train bert` (the debug flavor) under real two-rank Horovod launches on the built-in
pydoc corpus, unpacked (Gloo) and packed (MPI, through `--attention varlen`: each sequence of a pack
attends alone, the GPU lever of issue 37): masked-LM accuracy rises well above chance and
above the best constant guess, both ranks end with the same parameters, and the event log counts
BERT's progress in samples, as MLPerf does, and passes the compliance checker."""

import json
from collections import Counter

import numpy as np
import pytest
from compliance import UNAVOIDABLE, checker_failures, logged_values, without_keys
from conftest import run

from hvdbench.contracts import get_spec
from hvdbench.data.readers import open_dataset
from hvdbench.results.mllog import read_event_dicts as read_events
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration

VOCAB = 4000  # the vocabulary of tests/conftest.py's pydoc


def best_constant_guess(path) -> float:
    """Accuracy of always predicting the validation split's most frequent masked token."""
    ds = open_dataset(path)
    counts = Counter()
    for batch in ds.loader("val", 256, shuffle=False, drop_last=False):
        real = batch["masked_lm_weights" if ds.kind == "bert_packed" else "masked_lm_positions"] > 0
        counts.update(np.asarray(batch["masked_lm_ids"])[real].tolist())
    return counts.most_common(1)[0][1] / sum(counts.values())


@pytest.mark.timeout(420)
@pytest.mark.parametrize("kind, controller, division", [("bert", "gloo", "closed"), ("bert_packed", "mpi", "open")])
def test_debug_bert_learns_masked_tokens(kind, controller, division, pydoc, tmp_path, horovodrun, hvdbench_bin):
    """The gloo launch is also BERT's closed-division run (test_closed_division.py's docstring): one
    launch where two were."""
    out = tmp_path / "run"
    # The debug flavor's own target (0.12: 480x chance, 2x the constant guess), evaluating every
    # 1600 samples; it is reached in about half an epoch (~30 s on two cores).
    target = get_spec("bert").target("debug")
    run([horovodrun, "-np", "2", "-H", "localhost:2", f"--{controller}", hvdbench_bin, "train", "bert",
         "--flavor", "debug", "--data", pydoc[kind], "--eval-every", "1600", "--max-epochs", "1.5",
         "--set", f"submission.division={division}",
         *(["--attention", "varlen"] if kind == "bert_packed" else []), "--out", out])
    record, config = read_result(out / "result.json")
    assert config["submission"]["division"] == division
    assert (record.model, record.metric_name) == ("bert", "masked_lm_accuracy")
    assert record.global_batch == 2 * config["batch_per_gpu"]
    assert (record.status, record.target) == ("success", target) and record.dataset == str(pydoc[kind])
    assert config["eval_unit"] == "samples"
    assert config["attention"] == ("varlen" if kind == "bert_packed" else "mask")

    evals = [e["metric"] for e in json.loads((out / "checks.json").read_text())["evals"]]
    baseline = best_constant_guess(pydoc[kind])
    assert len(evals) >= 2 and evals[-1] == pytest.approx(record.final_metric)
    assert evals[-1] > evals[0] + 0.01  # rising
    assert record.final_metric >= target > 1.8 * baseline > 100 / VOCAB, (evals, baseline)
    print(f"{kind}: masked-LM accuracy {record.final_metric:.4f} after {record.epochs:.2f} epochs; "
          f"constant guess {baseline:.4f}, chance {1 / VOCAB:.5f}")

    digests = json.loads((out / "checks.json").read_text())["param_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]

    events = read_events(out / "mllog.txt")
    blocks = [e["metadata"]["samples_count"] for e in events if e["key"] == "block_start"]
    assert blocks[0] == 0 and all(b % record.global_batch == 0 for b in blocks) and blocks == sorted(blocks)
    assert not [e for e in events if e["key"] == "epoch_start"]  # BERT counts samples, not epochs
    if division == "open":
        assert checker_failures(out / "mllog.txt", tmp_path, "open") == set()
        return
    # Closed: LAMB's keys as the reference logs them; the checker fails only the quality target.
    logged = logged_values(events)
    assert logged["submission_division"] == "closed" and logged["opt_name"] == "lamb" and record.final_metric < 0.720
    assert (logged["opt_lamb_beta_1"], logged["opt_lamb_beta_2"], logged["opt_lamb_epsilon"]) == (0.9, 0.999, 1e-6)
    assert logged["opt_lamb_weight_decay_rate"] == config["weight_decay"]
    assert logged["num_warmup_steps"] == logged["opt_learning_rate_warmup_steps"] > 0
    assert logged["start_warmup_step"] == 0
    assert checker_failures(out / "mllog.txt", tmp_path) == UNAVOIDABLE["bert"]
    control = without_keys(out / "mllog.txt", ["opt_lamb_beta_1"], tmp_path / "control.txt")
    assert checker_failures(control, tmp_path) == {
        "Required EXACTLY_ONE occurrence of 'opt_lamb_beta_1' but found 0", *UNAVOIDABLE["bert"]}


def _loader(path, split, batch):
    return open_dataset(path).loader(split, batch, shuffle=False, drop_last=False, prefetch=1)


def test_packed_data_really_packs(pydoc):
    plain = open_dataset(pydoc["bert"])
    for split in ("train", "val"):
        lens = np.concatenate([b["packed_input_len"] for b in _loader(pydoc["bert_packed"], split, 512)])
        assert (lens > 0).sum() == plain.num_samples(split)  # every sequence, once
        assert (lens[:, 1] > 0).mean() > 0.05, "too few multi-sequence packs to test packing"


def test_packed_dataset_scores_like_unpacked(pydoc):
    """`hvdbench prepare pack`'s output, read by the BERT model, scores exactly as the unpacked
    data: the same masked-LM cross-entropy, correct predictions and next-sentence loss summed over
    the val split (a sum, because packing reorders the sequences)."""
    import torch

    from hvdbench.models.bert import torch as bert

    torch.manual_seed(0)
    model = bert.build(get_spec("bert").flavor("debug"), vocab_size=VOCAB, max_seq_len=64).eval()
    totals = {}
    for kind in ("bert", "bert_packed"):
        sums = Counter()
        with torch.no_grad():
            for b in _loader(pydoc[kind], "val", 128):
                per = bert.sequence_losses(model, {k: torch.from_numpy(v) for k, v in b.items()})
                for key in ("mlm_loss_sum", "mlm_count", "mlm_correct", "nsp_loss"):
                    sums[key] += per[key].double().sum().item()
                sums["sequences"] += int(per["valid"].sum())
        totals[kind] = sums
    plain, packed = totals["bert"], totals["bert_packed"]
    assert plain["mlm_count"] == packed["mlm_count"] > 1000
    assert plain["sequences"] == packed["sequences"] == open_dataset(pydoc["bert"]).num_samples("val")
    for key in ("mlm_loss_sum", "mlm_correct", "nsp_loss"):
        assert packed[key] == pytest.approx(plain[key], rel=1e-4), key
