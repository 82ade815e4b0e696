"""benchmarks/train.py on the CPU, at the tiny preset: the synthetic language, the whole
benchmark end to end (both models, the agreement check, the compiled path, the records it
writes), and that the agreement check fails on a real defect.

The compiled path runs with the aot_eager backend: it traces the models with
fullgraph=True through dynamo and AOTAutograd, the custom op's fake and autograd formula
included, as inductor would; inductor's C++ code generation itself would add about 15 s a
graph on two cores (eight graphs), past this file's budget. The GPU run uses inductor."""
from __future__ import annotations

import json
import math

import pytest
import torch

from benchmarks import records, train
from torch_vecgemm import linear as vecgemm_linear
from torch_vecgemm.nn import Linear

CONFIGS = train.load_configs()
TINY = CONFIGS["models"]["tiny-gpt"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny models' products are too small to share between threads, and on a CPU
    busy with other work OpenMP's waits for a second thread made this file take 121 s
    instead of 22 s (load average 4.7 on 2 cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_language_is_seeded_and_follows_its_chain():
    def make():
        return train.Language(TINY["vocab"], **CONFIGS["language"])

    lang = make()
    x = lang.sample(64, 40)
    assert torch.equal(x, make().sample(64, 40))  # the same stream on every run
    # Every token after the first is one of its predecessor's successors ...
    assert (lang.succ[x[:, :-1]] == x[:, 1:, None]).any(-1).all()
    # ... and the one in the slot that the token before it makes most likely comes as
    # often as the slot probabilities say (counting the other slots that hold the same
    # token: a small vocabulary repeats successors). 2432 draws: a standard error of 0.01.
    s = lang.successors
    b, a, nxt = x[:, :-2], x[:, 1:-1], x[:, 2:]
    likely = lang.succ[a, b % s]
    same = lang.succ[a] == likely[..., None]  # (sequences, positions, slots)
    slot_p = lang.slot_probs[(torch.arange(s) - b[..., None]) % s]
    expected = (same * slot_p).sum(-1).mean().item()
    assert abs((nxt == likely).float().mean().item() - expected) < 0.04
    assert expected > 1.5 / s  # the token before matters: far from uniform over the slots
    bounds = lang.entropy_bounds()
    assert bounds["order2"] < bounds["order1"] == pytest.approx(math.log(8))


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "train"
    status = train.main(["--preset", "tiny", "--steps", "40", "--windows", "2", "--steps-per-window", "2",
                         "--compile-backend", "aot_eager", "--device", "cpu", "--out", str(out)])
    return status, out


def test_benchmark_runs_end_to_end_and_writes_its_record(record):
    status, out = record
    assert status == 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert {"machine", "settings", "models"} <= data.keys()
    assert {"date", "torch", "git_commit", "build"} <= data["machine"].keys()
    assert list(data["models"]) == ["tiny-gpt", "tiny-mlp"]
    for name, m in data["models"].items():
        assert m["swapped_layers"] == (4 * TINY["layers"] + 1 if name == "tiny-gpt" else 2 * TINY["layers"] + 2)
        curves = m["loss"]
        assert set(curves) == set(train.CURVES)
        assert all(len(c) == 40 for c in curves.values())
        # It learns: from about ln(vocab) at the start to well below it.
        assert curves[train.TORCH][0] == pytest.approx(math.log(TINY["vocab"]), rel=0.05)
        assert sum(curves[train.VECGEMM][-5:]) / 5 < curves[train.VECGEMM][0] - 0.4
        a = m["agreement"]
        assert a["ok"] and not a["failed"]
        # The twin really differs from the reference: it has none of its rounding errors.
        assert max(a["twin"].values()) > 0
        # On the CPU the switch and TF32 change nothing: their curves are the reference's.
        for linear in (train.SWITCH_3XTF32, train.TORCH_TF32):
            assert curves[linear] == curves[train.TORCH]
            assert m["drift"][linear]["ok"]
        rows = {(r["linear"], r["mode"], r["compiled"]): r for r in m["throughput"]}
        assert len(rows) == 2 * 2 * len(train.LINEARS)
        for (_, _, compiled), r in rows.items():
            assert r["tokens_per_s"] > 0 and len(r["windows_tokens_per_s"]) == 2
            assert r["fullgraph"] is (True if compiled else None) and r["graph_break"] is None
    text = out.with_suffix(".md").read_text()
    assert "tiny-gpt" in text and "inference, compiled" in text
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_records_regenerate_the_training_report_from_its_json(record, tmp_path, monkeypatch):
    _, out = record
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "train.json").write_text(out.with_suffix(".json").read_text())
    (tmp_path / "README.md").write_text("<!-- records:begin -->\n<!-- records:end -->\n")
    readme = tmp_path / "MAIN.md"
    readme.write_text(f"{records.report.BEGIN}\n{records.report.END}\n{records.TRAIN_BEGIN}\nold\n{records.TRAIN_END}\n")
    monkeypatch.setattr(records, "ROOT", str(tmp_path))
    monkeypatch.setattr(records, "INDEX", str(tmp_path / "README.md"))
    monkeypatch.setattr(records, "README", str(readme))
    assert records.main(["--report-only", "--readme", "yes"]) == 0
    assert "tiny-mlp" in (tmp_path / "cpu" / "train.md").read_text()
    assert (tmp_path / "cpu" / "train.png").stat().st_size > 10_000
    assert "tiny-mlp" in readme.read_text() and "old" not in readme.read_text()
    assert "(cpu/train.md)" in (tmp_path / "README.md").read_text()


class BiasNotTrained(Linear):
    """A defect of the kind the check is for: the op's bias gradient lost (as if the
    autograd formula returned None for C); the forward is right."""

    def forward(self, x):
        return vecgemm_linear(x, self.weight, None if self.bias is None else self.bias.detach())


def test_agreement_check_fails_on_a_defect():
    training = {**CONFIGS["training"], "steps": 20}
    lang = train.Language(TINY["vocab"], **CONFIGS["language"])
    batches = lang.sample(20 * TINY["batch"], TINY["context"] + 1).view(20, TINY["batch"], -1)
    base = train.build(TINY, 0)
    curves = {}
    for linear in (train.TORCH, train.TWIN):
        curves[linear] = train.loss_curve(train.variant(base, linear)[0], batches, training, linear)
    broken, _ = train.variant(base, train.VECGEMM)
    for m in broken.modules():
        if type(m) is Linear:
            m.__class__ = BiasNotTrained
    curves[train.VECGEMM] = train.loss_curve(broken, batches, training, "defect")
    agreement = {**CONFIGS["agreement"], "final_window": 5}
    verdict = train.check_agreement(curves, agreement)
    # Step 0 agrees (the biases start at zero, the forward is right); training then departs.
    assert not verdict["ok"] and "step0" not in verdict["failed"] and "early" in verdict["failed"]
    # And the correct model passes the same check against the same reference.
    curves[train.VECGEMM] = train.loss_curve(train.variant(base, train.VECGEMM)[0], batches, training, "swapped")
    assert train.check_agreement(curves, agreement)["ok"]


def test_agreement_check_fails_on_nan():
    curve = [3.0, 2.5, 2.0]
    agreement = {**CONFIGS["agreement"], "final_window": 2}
    verdict = train.check_agreement({train.TORCH: curve, train.TWIN: curve, train.VECGEMM: [3.0, float("nan"), 2.0]}, agreement)
    assert verdict["failed"] == ["early", "final"]


def test_reports_set_every_way_beside_the_reference(record):
    _, out = record
    data = json.loads(out.with_suffix(".json").read_text())
    table = train.headline(data, "train.md")
    for label in train.COMPARED.values():
        assert f"| tiny-gpt | {label} |" in table, table
    assert "3xTF32, torch_vecgemm.enable()" in train.markdown(data)


def test_the_switchs_drift_gates_the_record(record):
    _, out = record
    data = json.loads(out.with_suffix(".json").read_text())
    assert train.failures(data) == []
    drift = data["models"]["tiny-mlp"]["drift"]
    drift[train.SWITCH_3XTF32].update(ok=False, failed=["final"])
    drift[train.TORCH_TF32].update(ok=False, failed=["early"])  # reported, not a failure
    assert train.failures(data) == [("tiny-mlp", train.SWITCH_3XTF32, ["final"])]
