"""torch_vecgemm.build_info(): what the build recorded, or that it is unknown, never an error."""
import json

import torch_vecgemm
from torch_vecgemm import _build


def test_exported_and_complete():
    info = torch_vecgemm.build_info()
    assert "build_info" in torch_vecgemm.__all__
    assert set(_build.KEYS) | {"known"} <= set(info)
    if info["known"]:  # built by setup.py: the record describes this installation
        assert info["version"] == torch_vecgemm.__version__
        assert info["cuda_kernels"] == torch_vecgemm._C.cuda_kernels_built()


def test_a_missing_record_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(_build, "BUILD_INFO", str(tmp_path / "_build_info.json"))
    info = torch_vecgemm.build_info()
    assert info["known"] is False and info["reason"].startswith("no build record")
    assert all(info[key] is None for key in _build.KEYS)


def test_an_unreadable_record_is_unknown(monkeypatch, tmp_path):
    for text in ("{not json", "[1, 2]"):
        path = tmp_path / "_build_info.json"
        path.write_text(text)
        monkeypatch.setattr(_build, "BUILD_INFO", str(path))
        info = torch_vecgemm.build_info()
        assert info["known"] is False and info["reason"].startswith("build record unreadable")


def test_a_record_is_read_and_completed(monkeypatch, tmp_path):
    path = tmp_path / "_build_info.json"
    path.write_text(json.dumps({"version": "0.1.0", "torch": "2.14.1", "cuda_kernels": False,
                                "sass_rewrite": {"enabled": False, "reason": "no CUDA kernels built", "loops": []}}))
    monkeypatch.setattr(_build, "BUILD_INFO", str(path))
    info = torch_vecgemm.build_info()
    assert info["known"] is True and info["version"] == "0.1.0" and info["cuda_kernels"] is False
    assert info["git_commit"] is None and info["cuda_toolkit"] is None  # absent keys are None
    assert info["sass_rewrite"]["reason"] == "no CUDA kernels built" and info["sass_rewrite"]["rewritten"] == 0
