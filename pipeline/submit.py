"""A file spark-submit can run: it runs a Python application only from a path ending in ``.py``.

    spark-submit --master spark://host:7077 $(python -m rill.pipeline.submit) archive --url ... --streams a,b ...

Run as a module (``python -m rill.pipeline.submit``) it prints its own path.  Run as a file (what
spark-submit does) it is ``rill-pipeline``: the arguments are a job and its options.
"""

from __future__ import annotations

import os
import sys


def path() -> str:
    """The absolute path of this file, to give spark-submit as the primary resource."""
    return os.path.abspath(__file__)


if __name__ == "__main__":
    if __spec__ is not None:  # python -m rill.pipeline.submit
        print(path())
    else:  # spark-submit <this file> JOB ...
        # A script's own directory goes first on sys.path; it is the package's directory, whose
        # module names (cli, conn, ...) must not shadow anything.
        here = os.path.dirname(path())
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        from rill.pipeline.cli import main

        raise SystemExit(main(sys.argv[1:]))
