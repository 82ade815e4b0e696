"""The build step fails soft: whatever goes wrong, ptxas' loops, a reason, no exception."""
import pytest
from handmade import validated_file

from sass_rewrite import build
from sass_rewrite.rewrite import LibraryReport, LoopOutcome
from sass_rewrite.validated import load


@pytest.fixture
def lines():
    return []


def test_off(tmp_path, lines):
    record = build.rewrite_for_build(str(tmp_path / "lib.so"), disabled_by="VECGEMM_SASS_REWRITE=0", say=lines.append)
    assert not record["enabled"] and record["reason"] == "VECGEMM_SASS_REWRITE=0"
    assert [(r["state"], r["reason"]) for r in record["loops"]] == [("left alone", "VECGEMM_SASS_REWRITE=0")] * 3
    assert record["validated_for"] == {"toolkit": "nvcc 13.0", "architecture": "sm_90"}
    assert lines == ["VECGEMM_SASS_REWRITE=0; loops left as ptxas wrote them"]


def test_no_cuobjdump(monkeypatch, tmp_path, lines):
    monkeypatch.setattr(build, "find_cuobjdump", lambda cuda_home=None: None)
    record = build.rewrite_for_build(str(tmp_path / "lib.so"), say=lines.append)
    assert not record["enabled"] and record["reason"] == build.NO_CUOBJDUMP
    assert {r["reason"] for r in record["loops"]} == {build.NO_CUOBJDUMP} and record["rewritten"] == 0
    assert lines[0].startswith("no cuobjdump (")


def test_an_error_in_the_tool_leaves_the_loops(monkeypatch, tmp_path, lines):
    monkeypatch.setattr(build, "find_cuobjdump", lambda cuda_home=None: "/bin/true")

    def broken(*args, **kwargs):
        raise RuntimeError("cuobjdump crashed")

    monkeypatch.setattr(build, "rewrite_library", broken)
    record = build.rewrite_for_build(str(tmp_path / "lib.so"), say=lines.append)
    assert record["enabled"] and record["cuobjdump"] == "/bin/true"
    assert {(r["state"], r["reason"]) for r in record["loops"]} == {("left alone", build.ERROR)}
    assert "RuntimeError: cuobjdump crashed" in record["loops"][0]["detail"] and lines[0].startswith("error (")


def test_unreadable_data(tmp_path, lines):
    path = validated_file(tmp_path, lambda raw: raw["loops"][0].update(input_fingerprint="nope"))
    record = build.rewrite_for_build(str(tmp_path / "lib.so"), say=lines.append, data=path)
    assert not record["enabled"] and record["loops"] == [] and "validated data unreadable" in record["reason"]


def test_what_the_build_says_per_loop(monkeypatch, tmp_path, lines):
    data = load()
    monkeypatch.setattr(build, "find_cuobjdump", lambda cuda_home=None: "/bin/true")
    plain, waves, tail = data.loops
    report = LibraryReport([LoopOutcome("f1", 0x17D0, plain.input, "rewritten", output=plain.output),
                            LoopOutcome("f2", 0x1900, waves.output, "rewritten already"),
                            LoopOutcome("g", 0x1E90, tail.input, "left alone", "check failed", "no register")],
                           [], True)
    monkeypatch.setattr(build, "rewrite_library", lambda *a, **k: report)
    record = build.rewrite_for_build(str(tmp_path / "lib.so"), say=lines.append)
    assert [(r["state"], r["reason"], r["address"]) for r in record["loops"]] == [
        ("rewritten", None, "0x17d0"), ("rewritten already", None, "0x1900"), ("left alone", "check failed", "0x1e90")]
    assert record["rewritten"] == 2 and lines[-1].startswith("2 of 3 validated loops rewritten")
    assert lines[2].endswith("left alone (check failed: no register)")
