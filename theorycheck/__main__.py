"""``python -m theorycheck``: the same as the ``theorycheck`` console script."""

from theorycheck.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
