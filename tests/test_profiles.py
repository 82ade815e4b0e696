"""The device profiles as data (torch_vecgemm/profiles/*.json, torch_vecgemm/_profiles.py):
every shipped file loads and serves the GPUs it names, a new file serves a new GPU, and a
file that does not fit this build is refused at import with a message that names what is
wrong. That the H200's figures price as before is test_recorded_device's plans of record.
No GPU needed: the planner runs on recorded devices.
"""
from __future__ import annotations

import copy
import json
import re

import pytest

import torch_vecgemm
from torch_vecgemm import _C, _profiles
from conftest import TF32X3_KERNELS, requires_kernels
from test_recorded_device import WGMMA, facts, plan

pytestmark = requires_kernels
_testing = _C._testing


def shipped(name):
    return json.loads((_profiles.FOLDER / name).read_text())


def test_every_shipped_profile_serves_the_gpus_it_names():
    files = sorted(_profiles.FOLDER.glob("*.json"))
    assert {f.name for f in files} >= {"h200.json", "neutral.json"}
    for f in files:
        doc = json.loads(f.read_text())
        if doc["serves"] is None:
            continue
        device = _testing.add_recorded_device(facts(doc["serves"]["capability"], doc["serves"]["sms"]))
        assert _testing.profile_name(device) == doc["name"]
    # Exactly one neutral profile, and it prices what no file serves.
    assert sum(json.loads(f.read_text())["serves"] is None for f in files) == 1
    assert _testing.profile_name(_testing.add_recorded_device(facts(86, 84))) == "neutral"


def test_a_new_file_serves_a_new_gpu_with_its_own_figures(tmp_path):
    """A GPU of its own capability and SM count, its figures the neutral ones with device
    memory and the FMA rate at a quarter: it is planned with them, and a compute-bound
    product is priced several times slower than under the neutral figures."""
    doc = shipped("neutral.json")
    neutral_device = _testing.add_recorded_device(facts(87, 16))
    before = plan(neutral_device, 4096, 4096, 4096)["predicted_us"]
    doc.update(name="a GPU of the test", serves={"capability": 87, "sms": 16})
    doc["rates"]["macs_per_ns_per_sm"] /= 4
    doc["rates"]["bytes_per_ns"] /= 4
    (tmp_path / "test_gpu.json").write_text(json.dumps(doc))
    assert _profiles.load(tmp_path) == ["a GPU of the test"]
    # The device planned before is planned anew (its plan was cached under the old
    # profile), and so is one recorded now.
    assert _testing.profile_name(neutral_device) == "a GPU of the test"
    assert plan(neutral_device, 4096, 4096, 4096)["predicted_us"] > 3 * before
    device = _testing.add_recorded_device(facts(87, 16))
    assert plan(device, 4096, 4096, 4096)["predicted_us"] > 3 * before
    # Other GPUs are unchanged.
    assert _testing.profile_name(_testing.add_recorded_device(facts(90, 132))) == "NVIDIA H200"


@pytest.fixture(scope="module")
def unserved():
    """The GPU the broken profiles would serve (a process keeps at most 64 recorded devices)."""
    return _testing.add_recorded_device(facts(11, 3))


def _broken(change):
    doc = copy.deepcopy(shipped("h200.json"))
    doc.update(name="a broken profile", serves={"capability": 11, "sms": 3})
    change(doc)
    return doc


def _set(path, value):
    def change(doc):
        *parents, last = path
        table = doc
        for key in parents:
            table = table[key]
        if value is None:
            del table[last]
        else:
            table[last] = value
    return change


@pytest.mark.parametrize("change, message", [
    (_set(("rates", "launch_ns"), None), "has no figure 'launch_ns'"),
    (_set(("rates", "bytes_per_ns"), -1.0), "bytes_per_ns must be a positive number"),
    (_set(("costs", "tf32x3_model_slack"), None), "has no figure 'tf32x3_model_slack'"),
    (_set(("costs", "stream_k_cots"), 1.05), "'stream_k_cots' that this build does not know"),
    (_set(("kernel_percent", "tiled_999x1x1"), [90, 90, 90, 90]), "no kernel config 'tiled_999x1x1'"),
    (_set(("kernel_percent", "tiled_128x128x8"), [95, 92, 91]), "one percentage for each storage order"),
    (_set(("scalar_load_percent", "tiled_128x128x8"), [95, 92, 91, 190]), "whole number from 1 to 100"),
    (_set(("order_percent",), [96, 94, 100, 95.5]), "whole number from 1 to 100"),
    (_set(("tf32x3", "tf32x3_128x64_mma"), None), "has no figures for tf32x3_128x64_mma"),
    (_set(("tf32x3", "tf32x3_128x64_mma", "k_tile_ns"), None), "needs k_tile_ns"),
    (_set(("tf32x3", "tf32x3_128x64_mma", "k_tile_ns"), 0.0), "k_tile_ns (above 0)"),
    (_set(("tf32x3", "tf32x3_128x64_mma", "warps"), 4.0), "and nothing else"),
    (_set(("tf32x3", "tf32x3_128x128_wgmma", "b_split_ns"), None), "needs b_split_ns"),
    (_set(("tf32x3", "tf32x3_128x128_wgmma", "a_split_ns"), -1150.0), "(k_tile_ns plus either, or both, still above 0)"),
    (_set(("tf32x3", "tf32x3_128x128_wgmma", "a_split_m_major_ns"), -1150.0),
     "a_split_m_major_ns must be a number that leaves k_tile_ns plus it, and plus b_split_ns too, above 0"),
    (_set(("tf32x3", "tf32x3_nonexistent"), {"k_tile_ns": 1.0}), "no 3xTF32 row 'tf32x3_nonexistent'"),
    (_set(("tf32x3", "tf32x3_few_rows_mma", "rr_percent"), 0.0), "(above 0, at most 1000)"),
    (_set(("tf32x3", "tf32x3_128x64_mma", "unaligned_percent"), 2000.0), "(above 0, at most 1000)"),
    (_set(("tf32x3", "tf32x3_128x64_mma", "rx_percent"), 100.0), "nothing else"),
    (_set(("torch_handoff", "copies"), None), "torch_handoff needs copies"),
    (_set(("torch_handoff", "log_k"), 0.1), "a weight 'log_k' that this build does not know"),
    (_set(("torch_handoff", "configs", "tiled_999x1x1"), -1.0), "torch_handoff names no kernel config 'tiled_999x1x1'"),
    (_set(("torch_handoff", "configs"), {}), "speaks for no config"),
    (_set(("serves",), {"capability": 90, "sms": 0}), "both positive"),
    (_set(("name",), ""), "needs a name"),
])
def test_a_profile_that_does_not_fit_the_build_is_refused(change, message, unserved):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _C._add_device_profile(_profiles.as_planner_data(_broken(change)))
    # Refused means not kept: the GPU it would serve is still priced with the neutral one.
    assert _testing.profile_name(unserved) == "neutral"


def test_import_names_the_file_that_cannot_be_used(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(_broken(_set(("rates", "launch_ns"), None))))
    with pytest.raises(ImportError, match=r"a\.json cannot be used .*no figure 'launch_ns'"):
        _profiles.load(tmp_path)
    (tmp_path / "a.json").write_text("{ not json")
    with pytest.raises(ImportError, match=r"a\.json cannot be used \(JSONDecodeError"):
        _profiles.load(tmp_path)
    (tmp_path / "a.json").write_text(json.dumps({"name": "no sections"}))
    with pytest.raises(ImportError, match=r"a\.json cannot be used \(KeyError"):
        _profiles.load(tmp_path)


def test_the_package_loaded_the_shipped_profiles():
    assert torch_vecgemm._profiles is _profiles
    assert _testing.profile_name(_testing.add_recorded_device(facts(90, 132))) == "NVIDIA H200"


def test_a_3xtf32_row_is_planned_only_on_the_storage_its_profile_prices(tmp_path):
    """A 3xTF32 row's storage figures (rr_percent .. cc_percent, unaligned_percent) price it
    on each storage against the one its other figures were fitted on; one left out keeps
    auto from planning the row there, while the strict op still runs it. Decode (8 tokens
    through a 4096 x 4096 weight) on an sm_89 GPU of the H200's SM count priced with the
    H200's figures, whose narrow rows are priced on aligned rc alone."""
    doc = shipped("h200.json")
    doc.update(name="a GPU of the storage test", serves={"capability": 89, "sms": 132})
    (tmp_path / "storage.json").write_text(json.dumps(doc))
    assert _profiles.load(tmp_path) == [doc["name"]]
    device = _testing.add_recorded_device(facts(89, 132, {WGMMA: "needs sm_90a"} if WGMMA in TF32X3_KERNELS else {}))

    def decode(orders, aligned=True, variant="auto"):
        return _testing.recorded_plan(device, 8, 4096, 4096, orders, aligned, aligned, "3xtf32", variant=variant)

    rc = decode("rc")
    assert rc["kernel"] == "tf32x3_few_rows_mma", rc
    for orders, aligned in (("rr", True), ("cr", True), ("cc", True), ("rc", False)):
        assert decode(orders, aligned)["kernel"] != "tf32x3_few_rows_mma", (orders, aligned)
        forced = decode(orders, aligned, variant="tf32x3_few_rows_mma")
        assert forced["kernel"] == "tf32x3_few_rows_mma" and forced["predicted_us"] == rc["predicted_us"], forced
    # Priced on rr at its fitted speed: planned there, at rc's price; at half of it, priced
    # at over 1.5x (the launch and the split's reduction are the same).
    rows = doc["tf32x3"]["tf32x3_few_rows_mma"]
    for percent in (100, 50):
        rows["rr_percent"] = percent
        (tmp_path / "storage.json").write_text(json.dumps(doc))
        _profiles.load(tmp_path)
        forced = decode("rr", variant="tf32x3_few_rows_mma")
        if percent == 100:
            assert decode("rr")["kernel"] == "tf32x3_few_rows_mma" and forced["predicted_us"] == rc["predicted_us"]
        else:
            assert forced["predicted_us"] > 1.5 * rc["predicted_us"], forced
