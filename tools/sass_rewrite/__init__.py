"""sass_rewrite: regenerate the main loop of a built GEMM kernel below ptxas (sm_90), and
analyse its SASS. README.md says what it does, how the build uses it and how to refresh its
validated data; `python tools/sass_rewrite --help` lists the commands."""
from .build import rewrite_for_build
from .cubin import find_cuobjdump
from .loop import LoopError
from .rewrite import LibraryReport, LoopOutcome, Options, fingerprint, rewrite_library, rewrite_loop
from .validated import Validated, ValidatedLoop, load as load_validated

__all__ = [
    "LibraryReport",
    "LoopError",
    "LoopOutcome",
    "Options",
    "Validated",
    "ValidatedLoop",
    "find_cuobjdump",
    "fingerprint",
    "load_validated",
    "rewrite_loop",
    "rewrite_for_build",
    "rewrite_library",
]
