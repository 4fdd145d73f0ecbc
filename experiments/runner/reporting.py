"""Pieces every experiment's report shares: the unfinished-units and computing-commit
lines, and saving a figure."""

from __future__ import annotations

from theorycheck._atomic import save_figure_atomic


def unfinished_line(data: dict) -> list[str]:
    """Report lines: the units a report-only run found unfinished, and the commits
    that computed the units when they are not all the report's own commit (a resumed
    or report-only run)."""
    out = []
    missing = data.get("missing_units")
    if missing:
        units = ", ".join(missing)
        out += [f"**Unfinished units (not in any number below):** {units}.", ""]
    by_commit: dict = {}
    for unit, sha in sorted(data.get("unit_commits", {}).items()):
        if unit in data.get("units", {}):
            by_commit.setdefault(sha, []).append(unit)
    prov = data.get("provenance", {})
    own = prov.get("commit")
    own = f"{own}+dirty" if own and prov.get("dirty") else own
    if set(by_commit) - {own}:
        parts = [f"`{sha}` ({len(units)} units)" for sha, units in by_commit.items()]
        out += [f"**Units computed at commits:** {', '.join(parts)}.", ""]
    return out


def savefig(fig, path: str) -> None:
    """Saves a small PNG (whole or absent) and closes the figure."""
    save_figure_atomic(fig, path, dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
