"""The validated loops (validated.json): which ptxas outputs the build rewrites, with which
options, into which rewrite; and what a library's rewrite did with each of them."""
import dataclasses
import json
import os
import re

from .rewrite import ALREADY, LEFT, REWRITTEN, Options

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validated.json")
INPUT_MISMATCH = "input fingerprint mismatch"  # no loop found is the validated ptxas output
NO_FUNCTION = "no matching function"  # no function's name matches the loop's pattern
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


@dataclasses.dataclass(frozen=True)
class ValidatedLoop:
    kernel: str  # what the loop is, for people
    function: str  # regex over the mangled names of the functions that may hold it
    input: str  # fingerprint of ptxas' loop
    output: str  # fingerprint of its validated rewrite
    options: Options


@dataclasses.dataclass(frozen=True)
class Validated:
    toolkit: str
    architecture: str
    loops: tuple

    @property
    def function_pattern(self):
        """A regex matching the names any validated loop's pattern matches."""
        return "|".join(f"(?:{loop.function})" for loop in self.loops)

    @property
    def by_input(self):
        return {loop.input: loop for loop in self.loops}

    @property
    def outputs(self):
        return {loop.output for loop in self.loops}


def load(path=DATA):
    """The validated loops of a data file; ValueError naming what is wrong if it is not
    well-formed (fields, fingerprints, patterns, options, a fingerprint twice)."""
    with open(path) as f:
        raw = json.load(f)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: not a JSON object")
    for key in ("toolkit", "architecture"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"{path}: {key!r} must be a non-empty string")
    if not isinstance(raw.get("loops"), list) or not raw["loops"]:
        raise ValueError(f"{path}: 'loops' must be a non-empty list")
    loops, seen = [], set()
    for k, item in enumerate(raw["loops"]):
        where = f"{path}: loop {k}"
        keys = {"kernel", "function", "input_fingerprint", "output_fingerprint", "options"}
        if not isinstance(item, dict) or set(item) != keys:
            raise ValueError(f"{where}: must have exactly the fields {', '.join(sorted(keys))}")
        for key in ("kernel", "function"):
            if not isinstance(item[key], str) or not item[key]:
                raise ValueError(f"{where}: {key!r} must be a non-empty string")
        try:
            re.compile(item["function"])
        except re.error as e:
            raise ValueError(f"{where}: the function pattern does not compile ({e})") from None
        for key in ("input_fingerprint", "output_fingerprint"):
            if not isinstance(item[key], str) or not _FINGERPRINT.fullmatch(item[key]):
                raise ValueError(f"{where}: {key!r} must be 16 lower-case hex digits")
            if item[key] in seen:
                raise ValueError(f"{where}: fingerprint {item[key]} appears twice")
            seen.add(item[key])
        if not isinstance(item["options"], dict):
            raise ValueError(f"{where}: 'options' must be an object")
        try:
            options = Options.from_dict(item["options"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: {e}") from None
        loops.append(ValidatedLoop(item["kernel"], item["function"], item["input_fingerprint"],
                                   item["output_fingerprint"], options))
    return Validated(raw["toolkit"], raw["architecture"], tuple(loops))


def entry_record(loop, state, reason=None, detail="", function=None, address=None):
    """A validated loop and what was done with it, as the build records it."""
    return {"kernel": loop.kernel, "function_pattern": loop.function, "input_fingerprint": loop.input,
            "output_fingerprint": loop.output, "state": state, "reason": reason, "detail": detail,
            "function": function, "address": None if address is None else f"{address:#x}"}


def summarize(validated, report):
    """[entry_record] of each validated loop after `rewrite_library` gave `report`: the
    outcome of the loop found with its input fingerprint (rewritten first, where several
    functions hold it), else rewritten already, else why none was found."""
    preference = {REWRITTEN: 0, ALREADY: 1, LEFT: 2}
    records = []
    for loop in validated.loops:
        found = [o for o in report.loops if o.input == loop.input]
        found += [o for o in report.loops if o.input == loop.output]
        if found:
            o = min(found, key=lambda o: preference[o.state])
            records.append(entry_record(loop, o.state, o.reason, o.detail, o.function, o.address))
            continue
        near = [o for o in report.loops if re.search(loop.function, o.function)]
        if near:
            seen = ", ".join(f"{o.input} at {o.address:#x}" for o in near)
            detail = (f"the functions matching the pattern hold loops {seen}, none the validated ptxas output "
                      f"{loop.input} (validated with {validated.toolkit} for {validated.architecture})")
            records.append(entry_record(loop, LEFT, INPUT_MISMATCH, detail))
        else:
            detail = "no function's name matches the pattern"
            if report.unreadable_cubins:
                detail += f" (cuobjdump could not read {len(report.unreadable_cubins)} cubins)"
            records.append(entry_record(loop, LEFT, NO_FUNCTION, detail))
    return records
