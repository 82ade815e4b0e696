"""The tuning cache's file format (the rest of the ops' contract is in test_op_contract.py)."""
from __future__ import annotations

import json

import pytest

import torch_vecgemm


def test_tuning_cache_roundtrip(tmp_path):
    path = tmp_path / "tuning.json"
    if not torch_vecgemm._C.cuda_kernels_built():
        torch_vecgemm.save_tuning_cache(path)
        assert torch_vecgemm.load_tuning_cache(path) == 0
        return
    config = next(n for n in torch_vecgemm.variants() if n.startswith("tiled_"))
    torch_vecgemm._C.add_tuning_entry("b1_m8_n8_k8_rr_v4", config, 2)
    torch_vecgemm._C.add_tuning_entry("b1_m9_n8_k8_rr_v4", config, 1, stream_k=True)
    torch_vecgemm.save_tuning_cache(path)
    torch_vecgemm._C.clear_tuning_cache()
    assert torch_vecgemm.tuning_cache() == {}
    assert torch_vecgemm.load_tuning_cache(path) == 2
    assert torch_vecgemm.tuning_cache() == {"b1_m8_n8_k8_rr_v4": (config, 2, False), "b1_m9_n8_k8_rr_v4": (config, 1, True)}
    torch_vecgemm._C.clear_tuning_cache()
    # A cache saved before the stream-K tail existed (format 1) loads with the tail off.
    path.write_text(json.dumps({"format": 1, "entries": {"b1_m8_n8_k8_rr_v4": {"config": config, "splits": 3}}}))
    assert torch_vecgemm.load_tuning_cache(path) == 1
    assert torch_vecgemm.tuning_cache() == {"b1_m8_n8_k8_rr_v4": (config, 3, False)}
    torch_vecgemm._C.clear_tuning_cache()
    with pytest.raises(RuntimeError, match="unknown tiled configuration"):
        torch_vecgemm._C.add_tuning_entry("k", "no_such_config", 1)
