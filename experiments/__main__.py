"""``python -m experiments section NAME RUN_DIR``: the markdown of experiment NAME's
section (its report's ``section(data)``) for the results file in RUN_DIR, on stdout.

This is how ``theorycheck reproduce`` renders an experiment it ran, without
importing the repository's experiments into the library. Bad input (an undeclared
name, a missing or unreadable results file) exits 2 with one line.
"""

from __future__ import annotations

import json
import os
import sys

from experiments import EXPERIMENTS, report

USAGE = "usage: python -m experiments section NAME RUN_DIR"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 3 or args[0] != "section":
        print(f"experiments: error: {USAGE}", file=sys.stderr)
        return 2
    _, name, run_dir = args
    if name not in EXPERIMENTS:
        known = ", ".join(EXPERIMENTS)
        print(
            f"experiments: error: no experiment {name!r} (one of {known})",
            file=sys.stderr,
        )
        return 2
    path = os.path.join(run_dir, "results.json")
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError) as err:
        print(f"experiments: error: {path}: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(report(name).section(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
