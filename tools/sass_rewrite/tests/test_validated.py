"""The validated data: the file loads and is well-formed, and what a malformed one says."""
import re

import pytest
from handmade import validated_file

from sass_rewrite.rewrite import Options
from sass_rewrite.validated import load

# t816 cr instances as the kernels' templates mangle them, before and after TileShape lost
# its last parameters to a policy of its own; and an rc instance, which no pattern takes.
NAMES = {
    "plain": ["_ZN7vecgemm11sgemm_tiledINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16ELi2ELb1ELb0ELi12ELi0ELin1EEE"
              "LNS_6LayoutE1ELS3_0ELi4ELb0EEEvNS_10GemmParamsE",
              "_ZN7vecgemm11sgemm_tiledINS_11KernelShapeINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16EEENS_14"
              "MainloopPolicyILi2ELb1ELb0ELi12EEEEELNS_6LayoutE1ELS7_0ELi4ELb0EEEvNS_10GemmParamsE"],
    "waves": ["_ZN7vecgemm11sgemm_tiledINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16ELi2ELb1ELb0ELi12ELi0ELin1EEE"
              "LNS_6LayoutE1ELS3_0ELi4ELb1EEEvNS_10GemmParamsE"],
    "tail": ["_ZN7vecgemm14sgemm_stream_kINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16ELi2ELb1ELb0ELi12ELi0ELin1EEE"
             "LNS_6LayoutE1ELS3_0EEEvNS_10GemmParamsENS_7StreamKE",
             "_ZN7vecgemm14sgemm_stream_kINS_11KernelShapeINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16EEENS_14"
             "MainloopPolicyILi2ELb1ELb0ELi12EEEEELNS_6LayoutE1ELS7_0EEEvNS_10GemmParamsENS_7StreamKE"],
}
RC = ("_ZN7vecgemm11sgemm_tiledINS_9TileShapeILi128ELi128ELi8ELi64ELi64ELi8ELi16ELi2ELb1ELb0ELi12ELi0ELin1EEE"
      "LNS_6LayoutE0ELS3_1ELi4ELb0EEEvNS_10GemmParamsE")


def test_the_data_file_loads():
    data = load()
    assert (data.toolkit, data.architecture) == ("nvcc 13.0", "sm_90")
    assert [(loop.input, loop.output) for loop in data.loops] == [
        ("e47db9bea447614a", "6ac2698df36943eb"), ("50986927a9a4047b", "0e0df856fd71770f"),
        ("f768b14b21f523e9", "3b8b286d6f9400e0")]
    assert [loop.options for loop in data.loops] == [
        Options(order_from="walk24"), Options(order_from="walk24"), Options(order_from="model", conflict_weight=0)]
    assert len(data.by_input) == 3 and data.outputs == {loop.output for loop in data.loops}


def test_each_pattern_takes_its_kernel_only():
    data = load()
    for loop, kind in zip(data.loops, ("plain", "waves", "tail")):
        for other, names in NAMES.items():
            for name in names:
                assert bool(re.search(loop.function, name)) == (other == kind), (loop.kernel, name)
        assert not re.search(loop.function, RC)
    assert all(re.search(data.function_pattern, n) for names in NAMES.values() for n in names)


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw.pop("toolkit"), "'toolkit' must be"),
    (lambda raw: raw.update(loops=[]), "'loops' must be a non-empty list"),
    (lambda raw: raw["loops"][0].pop("options"), "must have exactly the fields"),
    (lambda raw: raw["loops"][0].update(extra=1), "must have exactly the fields"),
    (lambda raw: raw["loops"][1].update(input_fingerprint="E47DB9BEA447614A"), "16 lower-case hex digits"),
    (lambda raw: raw["loops"][1].update(input_fingerprint="e47db9bea447614a"), "appears twice"),
    (lambda raw: raw["loops"][2].update(function="sgemm_(tiled"), "does not compile"),
    (lambda raw: raw["loops"][2]["options"].update(order_from="spiral"), "loop 2: order_from 'spiral'"),
    (lambda raw: raw["loops"][0]["options"].update(fill_stall=2), "unknown rewrite options: fill_stall"),
])
def test_a_malformed_file_says_what_is_wrong(tmp_path, change, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load(validated_file(tmp_path, change))
