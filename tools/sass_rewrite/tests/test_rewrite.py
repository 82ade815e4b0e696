"""Rewriting the loops of a library: fingerprints, the options, what is written and when."""
import dataclasses
import os
import shutil

import pytest
from handmade import code, loop_body

from sass_rewrite import Options, find_cuobjdump, fingerprint, rewrite as rewrite_module
from sass_rewrite.rewrite import (ALREADY, CHECK_FAILED, LEFT, NOT_VALIDATED, OUTPUT_MISMATCH, REWRITTEN,
                                  output_fingerprint, rewrite_library)
from sass_rewrite.validated import Validated, ValidatedLoop, load, summarize

NEW_WORD = (0x999, 0x7F1 << 41)  # the "rewritten" second instruction of the loop


def test_fingerprint_is_the_loops_instruction_words():
    body = loop_body()
    fp = fingerprint(body)
    outside = [body[0][:2] + (0x999, body[0][3])] + body[1:]
    assert fingerprint(outside) == fp
    inside = body[:2] + [body[2][:2] + (0x999, body[2][3])] + body[3:]
    assert fingerprint(inside) != fp
    assert fingerprint(body[:3]) is None  # no back branch, no loop
    new = [(0x20, *NEW_WORD, "FFMA R7, R5, R6, R7")]
    assert output_fingerprint(body, (2, 1, 3), new) == fingerprint(body[:2] + [body[2][:2] + NEW_WORD] + body[3:])


def test_options_are_checked_and_frozen():
    assert Options() == Options.from_dict({})
    o = Options.from_dict({"order_from": "walk24", "conflict_weight": 0})
    assert (o.order_from, o.conflict_weight, o.beam, o.per_bank, o.reuse_on) == ("walk24", 0, 32, True, True)
    assert Options.from_dict(o.to_dict()) == o and hash(o) == hash(Options.from_dict(o.to_dict()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.beam = 8
    for bad in ({"order_from": "spiral"}, {"beam": 0}, {"beam": True}, {"conflict_weight": -1},
                {"per_bank": 1}, {"reuse_on": "yes"}):
        with pytest.raises(ValueError):
            Options.from_dict(bad)
    with pytest.raises(ValueError, match="unknown rewrite options: swap_all"):
        Options.from_dict({"swap_all": True})


@pytest.fixture
def library(monkeypatch, tmp_path):
    """A one-function "library" whose loop is loop_body's, and a hand-set rewrite of it:
    its second instruction replaced by NEW_WORD. cuobjdump is faked: `listing` reads back
    `readback` {address: text}."""
    body = loop_body()
    lib = tmp_path / "lib.so"
    lib.write_bytes(code(body))
    lines = [(addr, text) for addr, text, *_w in body]
    calls = []
    monkeypatch.setattr(rewrite_module, "functions_in",
                        lambda data, pattern, cuobjdump, unreadable=None: [(0, len(data), "f", 0, lines)])

    def fake_rewrite(body_, bounds, options):
        calls.append(options)
        return [(0x20, *NEW_WORD, "FFMA R7, R5, R6, R7")], {"ffma": 2}

    monkeypatch.setattr(rewrite_module, "rewrite_loop", fake_rewrite)
    readback = dict(lines)
    monkeypatch.setattr(rewrite_module, "listing", lambda data, cuobjdump: {"f": sorted(readback.items())})
    new_fp = fingerprint(body[:2] + [body[2][:2] + NEW_WORD] + body[3:])
    return dict(body=body, lib=lib, out=tmp_path / "out.so", fp=fingerprint(body), new_fp=new_fp, calls=calls,
                readback=readback)


def validated(input_fp, output_fp, **options):
    loop = ValidatedLoop("a loop", "f", input_fp, output_fp, Options(**options))
    return Validated("nvcc 13.0", "sm_90", (loop,))


def test_only_validated_loops_are_touched(library):
    lib, out, fp = library["lib"], library["out"], library["fp"]
    before = lib.read_bytes()
    report = rewrite_library(str(lib), str(out), validated("0" * 16, "1" * 16), cuobjdump="cuobjdump")
    [outcome] = report.loops
    assert (outcome.state, outcome.reason) == (LEFT, NOT_VALIDATED) and fp in outcome.detail
    assert summarize(validated("0" * 16, "1" * 16), report)[0]["reason"] == "input fingerprint mismatch"
    report = rewrite_library(str(lib), str(out), validated("0" * 16, fp), cuobjdump="cuobjdump")
    assert report.loops[0].state == ALREADY
    assert summarize(validated("0" * 16, fp), report)[0]["state"] == ALREADY
    assert not library["calls"] and not report.written
    assert not out.exists() and lib.read_bytes() == before


def test_an_output_fingerprint_mismatch_refuses_to_write(library):
    lib, out = library["lib"], library["out"]
    before = lib.read_bytes()
    report = rewrite_library(str(lib), str(lib), validated(library["fp"], "2" * 16, order_from="walk24"),
                             cuobjdump="cuobjdump")
    [outcome] = report.loops
    assert library["calls"] == [Options(order_from="walk24")]  # the loop's own options
    assert (outcome.state, outcome.reason, outcome.output) == (LEFT, OUTPUT_MISMATCH, library["new_fp"])
    assert "2" * 16 in outcome.detail and not report.written
    assert lib.read_bytes() == before and not out.exists()


def test_the_validated_rewrite_is_written(library):
    lib, out = library["lib"], library["out"]
    before = lib.read_bytes()
    report = rewrite_library(str(lib), str(out), validated(library["fp"], library["new_fp"]), cuobjdump="cuobjdump")
    assert report.loops[0].state == REWRITTEN and report.written
    assert lib.read_bytes() == before  # out is a new file
    assert out.read_bytes() == before[:0x20] + code([(0, "", *NEW_WORD)])[:0x10] + before[0x30:]
    record = summarize(validated(library["fp"], library["new_fp"]), report)[0]
    assert (record["state"], record["reason"], record["function"], record["address"]) == (REWRITTEN, None, "f", "0x10")


def test_a_loop_that_reads_back_differently_is_not_written(library):
    lib, out = library["lib"], library["out"]
    library["readback"][0x20] = "FFMA R7, R5, R6, R8"  # not the text the rewrite meant
    report = rewrite_library(str(lib), str(out), validated(library["fp"], library["new_fp"]), cuobjdump="cuobjdump")
    [outcome] = report.loops
    assert (outcome.state, outcome.reason) == (LEFT, CHECK_FAILED) and "read back differently" in outcome.detail
    assert not report.written and not out.exists()


def test_without_validated_data_every_loop_is_rewritten_with_the_options_given(library):
    lib, out = library["lib"], library["out"]
    report = rewrite_library(str(lib), str(out), None, "f", Options(order_from="rows"), cuobjdump="cuobjdump")
    assert library["calls"] == [Options(order_from="rows")] and report.loops[0].state == REWRITTEN
    assert report.written and out.exists()


REAL = os.environ.get("SASS_REWRITE_LIBRARY")


@pytest.mark.skipif(not REAL, reason="set SASS_REWRITE_LIBRARY to a library built with VECGEMM_SASS_REWRITE=0 "
                                     "by the validated toolkit (nvcc 13.0, sm_90) to rewrite it for real")
@pytest.mark.skipif(find_cuobjdump() is None, reason="no cuobjdump (PATH, CUDA_HOME/bin, triton's wheel)")
def test_the_validated_loops_of_a_real_library(tmp_path):
    """Every validated loop rewritten into its validated rewrite; with SASS_REWRITE_EXPECTED
    (a library the build rewrote), byte for byte that library."""
    data = load()
    lib = tmp_path / "lib.so"
    shutil.copy(REAL, lib)
    report = rewrite_library(str(lib), str(lib), data)
    records = summarize(data, report)
    assert [(r["state"], r["reason"]) for r in records] == [(REWRITTEN, None)] * len(data.loops), records
    again = rewrite_library(str(lib), str(tmp_path / "again.so"), data)
    assert [r["state"] for r in summarize(data, again)] == [ALREADY] * len(data.loops)
    if os.environ.get("SASS_REWRITE_EXPECTED"):
        assert lib.read_bytes() == open(os.environ["SASS_REWRITE_EXPECTED"], "rb").read()
