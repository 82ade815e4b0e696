"""The source tree's layers as docs/design.md draws them ("The layers"): the folders of
csrc/ are the layers, and each includes only from its own, the ones below it and csrc/'s
own headers; design.md's map names every file of the op boundary, the runtime and the
planner. Reads the sources only: runs anywhere, without a build."""
from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
# From the op boundary down; csrc/'s own files are the boundary, built in every build.
LAYERS = ["runtime", "planner", "kernels"]
SOURCES = (".h", ".cpp", ".cu", ".cuh")


def _layer(path: pathlib.Path) -> str:
    parts = path.relative_to(CSRC).parts
    return parts[0] if len(parts) > 1 else "csrc"


def _includes(path: pathlib.Path) -> list[str]:
    return re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(), flags=re.MULTILINE)


def _sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in SOURCES)


def _target_layer(source: pathlib.Path, include: str) -> str | None:
    """The layer an include reaches into, or None for a file beside the includer."""
    if (source.parent / include).exists() and "/" not in include:
        return None
    first = include.split("/")[0]
    if first in LAYERS:
        return first
    assert (CSRC / include).exists(), f"{source.relative_to(ROOT)} includes {include!r}, which is not under csrc/"
    return "csrc"


def test_a_layer_includes_only_from_itself_and_below():
    upward = []
    for source in _sources():
        own = _layer(source)
        for include in _includes(source):
            target = _target_layer(source, include)
            if target is None or target == own or target == "csrc":
                continue
            # csrc/'s boundary may use the layers' plain data; a layer never reaches above itself.
            if own != "csrc" and LAYERS.index(target) < LAYERS.index(own):
                upward.append(f"{source.relative_to(CSRC)} includes {include}")
    assert not upward, "includes from a layer above:\n" + "\n".join(upward)


def test_the_kernels_include_nothing_of_torch_but_its_errors():
    """The kernels and their launchers are torch-free but for errors (c10's CUDA checks), so
    that the probes build them standalone."""
    with_torch = [f"{s.relative_to(CSRC)}: {header}" for s in _sources() if _layer(s) == "kernels"
                  for header in re.findall(r'#\s*include\s+[<"]((?:torch|ATen|c10)/[^>"]+)', s.read_text())
                  if header != "c10/cuda/CUDAException.h"]
    assert not with_torch, with_torch


def test_the_design_map_names_every_file_above_the_kernels():
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index("## The layers")
    layout = text[start:text.index("```", text.index("```", start) + 3)]
    unnamed = []
    for source in _sources():
        if _layer(source) == "kernels":
            continue  # drawn by family there, file by file in each family's header
        stem = source.name.rsplit(".", 1)[0]
        if not re.search(rf"(?<![\w.]){re.escape(stem)}(\.|\{{|,|\s)", layout):
            unnamed.append(str(source.relative_to(CSRC)))
    assert not unnamed, "files docs/design.md's map does not name: " + ", ".join(unnamed)
