"""The tool's tests: hand-made instructions and listings, no GPU, no cuobjdump (a test that
needs a real library says so when it skips)."""
import os
import sys

TOOLS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

