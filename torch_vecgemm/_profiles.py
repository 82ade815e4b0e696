"""The device profiles: the figures the cost model prices a kind of GPU with, measured
there, one JSON file each in ``profiles/`` (``h200.json`` says what each field is). Loaded
into the planner at import; the planner picks a device's profile by its compute capability
and SM count (``serves``), and prices a GPU that no file serves with ``neutral.json``.

A new GPU's profile is a new file here: its rates, its kernels' efficiencies and its 3xTF32
rows' figures (docs/design.md, "Adding to it", says how each is measured). A file that
names a kernel this build lacks, leaves a figure out or gives one out of range is refused
at import with a message that says which.
"""
from __future__ import annotations

import json
import pathlib

from . import _C

FOLDER = pathlib.Path(__file__).with_name("profiles")
# The file's sections whose figures the planner reads as one table of scalars.
SCALAR_SECTIONS = ("rates", "costs")


def _figures(table):
    """A table without its comments (keys that start with '_')."""
    return {k: v for k, v in table.items() if not k.startswith("_")}


def as_planner_data(doc: dict) -> dict:
    """A profile file's contents in the form _C._add_device_profile takes (device_facts.h,
    ProfileData): the sections of scalars merged, the comments and notes left out."""
    serves = doc["serves"] or {"capability": 0, "sms": 0}
    scalars = {"unmeasured_scalar_load_percent": doc["unmeasured_scalar_load_percent"]}
    for section in SCALAR_SECTIONS:
        for name, value in _figures(doc[section]).items():
            if name in scalars:
                raise ValueError(f"the figure {name!r} is given twice")
            scalars[name] = value
    # The hand-off rule: null where the profile hands nothing to torch.matmul.
    handoff = doc["torch_handoff"]
    weights = None if handoff is None else {k: v for k, v in _figures(handoff).items() if k != "configs"}
    configs = {} if handoff is None else _figures(handoff["configs"])
    return dict(
        name=doc["name"], capability=serves["capability"], sms=serves["sms"], scalars=scalars,
        order_percent=doc["order_percent"], kernel_percent=_figures(doc["kernel_percent"]),
        scalar_load_percent=_figures(doc["scalar_load_percent"]),
        tf32x3={row: _figures(figures) for row, figures in _figures(doc["tf32x3"]).items()},
        torch_handoff=weights, torch_handoff_configs=configs,
    )


def load(folder: pathlib.Path = FOLDER) -> list[str]:
    """Every profile of `folder` into the planner, in the order of their file names; their
    names. A build without CUDA kernels has no planner, and loads none."""
    if not _C.cuda_kernels_built():
        return []
    names = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            _C._add_device_profile(as_planner_data(doc))
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise ImportError(f"torch_vecgemm: the device profile {path} cannot be used ({type(e).__name__}: {e}); "
                              "restore it from the package, or fix what the message names") from e
        names.append(doc["name"])
    return names
