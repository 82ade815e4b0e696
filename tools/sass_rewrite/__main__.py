"""`python tools/sass_rewrite ...` (or `python -m sass_rewrite ...` with tools/ on the path)."""
import os
import sys

if not __package__:  # run as a directory: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sass_rewrite.cli import main  # noqa: E402

sys.exit(main())
