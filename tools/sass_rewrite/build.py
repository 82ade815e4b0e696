"""The rewrite as a build step: the validated loops of a freshly linked library rewritten in
place, failing soft, and a record of what was done for the build's report."""
import traceback

from .cubin import find_cuobjdump
from .rewrite import LEFT, rewrite_library
from .validated import DATA, entry_record, load, summarize

NO_CUOBJDUMP = "no cuobjdump"
ERROR = "error"


def rewrite_for_build(lib, disabled_by=None, cuda_home=None, say=print, data=DATA):
    """Rewrite the validated loops of the library at `lib` in place; never raises. Whatever
    stops a loop's rewrite (`disabled_by`, a reason to not run at all; no cuobjdump; a
    fingerprint that differs; a failed check; an error) leaves ptxas' loop, and says why.

    Returns {"enabled": whether the rewrite ran, "reason": why not, "cuobjdump": its path,
    "validated_for": {"toolkit", "architecture"}, "rewritten": how many validated loops the
    library now has rewritten, "loops": [validated.entry_record per validated loop]}."""
    record = {"enabled": False, "reason": None, "cuobjdump": None, "validated_for": None, "rewritten": 0,
              "loops": []}
    try:
        validated = load(data)
    except Exception as e:  # noqa: BLE001 - the build goes on without the rewrite
        record["reason"] = f"{ERROR}: validated data unreadable ({type(e).__name__}: {e})"
        say(f"{record['reason']}; loops left as ptxas wrote them")
        return record
    record["validated_for"] = {"toolkit": validated.toolkit, "architecture": validated.architecture}

    def left_alone(reason, detail=""):
        record["loops"] = [entry_record(loop, LEFT, reason, detail) for loop in validated.loops]
        say(f"{reason}{f' ({detail})' if detail else ''}; loops left as ptxas wrote them")
        return record

    if disabled_by:
        record["reason"] = disabled_by
        return left_alone(disabled_by)
    cuobjdump = find_cuobjdump(cuda_home)
    if cuobjdump is None:
        record["reason"] = NO_CUOBJDUMP
        return left_alone(NO_CUOBJDUMP, "not on PATH, in the toolkit's bin or in triton's wheel")
    record.update(enabled=True, cuobjdump=cuobjdump)
    try:
        report = rewrite_library(lib, lib, validated, cuobjdump=cuobjdump)
        record["loops"] = summarize(validated, report)
    except Exception as e:  # noqa: BLE001 - nothing was written: the library is ptxas'
        last = traceback.extract_tb(e.__traceback__)[-1]
        return left_alone(ERROR, f"{type(e).__name__}: {e} at {last.filename}:{last.lineno}")
    for loop in record["loops"]:
        if loop["reason"] is None:
            say(f"{loop['kernel']}: {loop['state']} ({loop['function']}, loop at {loop['address']})")
        else:
            say(f"{loop['kernel']}: {loop['state']} ({loop['reason']}: {loop['detail']})")
    record["rewritten"] = sum(loop["reason"] is None and loop["state"] != LEFT for loop in record["loops"])
    say(f"{record['rewritten']} of {len(validated.loops)} validated loops rewritten ({cuobjdump})")
    return record
