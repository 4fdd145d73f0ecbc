"""The linearization and gradient-bounds reports and their generated conclusions
state a 95% bootstrap interval over seeds with every over-seed number: checked on the
committed runs (no unit is computed here) and on a one-seed cut of them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from experiments import _gradient_report, _linearization_report
from tests.experiments.test_experiment_tables import gen

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results"
LIN_RUNS = ("linearization", "linearization_subsets", "linearization_tiny")
GRAD_RUNS = ("gradient_bounds", "reach_tiny")

_NUM = r"-?\d[\d.]*(?:e[+-]?\d+)?%?"
#: a number with its interval, ``mean [lo, hi]``: the number directly before the
#: bracket (so the α grid "grid [0.01, 1000]" is no interval).
INTERVAL = re.compile(rf"{_NUM} \[{_NUM}, {_NUM}\]")
CELL = re.compile(rf"^{INTERVAL.pattern}$")
MEAN_ALONE = re.compile(rf"^{_NUM}$")


def _load(name: str) -> dict:
    path = RESULTS / name / "results.json"
    if not path.exists():
        pytest.skip(f"no committed {name} run")
    return json.loads(path.read_text())


def _report(name: str):
    return _gradient_report if name in GRAD_RUNS else _linearization_report


def _rows(markdown: str, header: str) -> list[list[str]]:
    """The body cells of the table whose header row starts with ``| header``."""
    lines = markdown.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {header}"))
    out = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        out.append([c.strip() for c in ln.strip("|").split("|")])
    return out


def _one_seed(name: str) -> dict:
    """Run ``name`` cut to its seed 0 (every other unit dropped), re-summarized."""
    data = copy.deepcopy(_load(name))
    data["units"] = {k: v for k, v in data["units"].items() if k.endswith("seed0")}
    data["summary"] = _report(name).summarize(data)
    return data


def test_the_interval_pattern_tells_an_interval_from_a_bare_number():
    assert INTERVAL.search("LCO-MSE, 1 step 0.046% [0.038%, 0.054%]")
    assert INTERVAL.search("ratio -0.07877 [-0.13, -0.028]")
    assert INTERVAL.search("σ_max 9.28e+04 [9.18e+04, 9.41e+04]")
    assert not INTERVAL.search("inside the grid [0.01, 1000]; LCO-MSE 0.046%")
    assert not INTERVAL.search("0.00596 ± 0.000386")


@pytest.mark.parametrize("name", [*LIN_RUNS, *GRAD_RUNS])
def test_the_committed_summary_is_the_summary_of_its_units(name):
    """``summary`` (with its intervals) is what the report module computes from the
    committed units now; floats to 1e-9 relative (summation order)."""
    data = _load(name)
    from experiments.runner import flatten, jsonable

    fresh = flatten(jsonable(_report(name).summarize(data)))
    committed = flatten(data["summary"])
    assert fresh.keys() == committed.keys()
    for key, value in fresh.items():
        assert committed[key] == pytest.approx(value, rel=1e-9, abs=1e-300), key
    assert any(k.endswith("/ci95/0") for k in committed)


def _threshold_ok(part: str, th: dict) -> bool:
    if re.fullmatch(r"\d+× (not reached|below grid)", part):
        return True
    ci = th.get("alpha_ci95")
    return bool(CELL.match(part) if ci else MEAN_ALONE.match(part))


@pytest.mark.parametrize("name", LIN_RUNS)
def test_every_linearization_cell_carries_its_interval(name):
    data = _load(name)
    md = _linearization_report.markdown(data, {})
    assert "95% percentile bootstrap interval" in md and "undercovers" in md
    assert "±" not in md
    rows = _rows(md, "setting")
    assert len(rows) == len(data["summary"])
    for cells, (key, r) in zip(rows, data["summary"].items()):
        assert cells[0] == key
        th = r["thresholds"]["residual_median"]
        for part, level in ((cells[3], "0.1"), (cells[4], "0.5")):
            for piece in part.split("; "):
                assert _threshold_ok(piece, th[level]), (key, level, piece)
        for cell in [cells[2], *cells[5:]]:
            for piece in cell.split(" / "):
                assert CELL.match(piece), (key, piece)


@pytest.mark.parametrize("name", GRAD_RUNS)
def test_every_gradient_cell_carries_its_interval(name):
    data = _load(name)
    md = _gradient_report.markdown(data, {})
    assert "95% percentile bootstrap interval" in md and "undercovers" in md
    assert "±" not in md
    s = data["summary"]
    if s["bounds"]:
        rows = _rows(md, "loss | ‖∇_θL‖")
        assert len(rows) == len(s["bounds"])
        for cells in rows:
            tight, span = cells[4].split(" (")
            assert CELL.match(tight) and re.fullmatch(r"\S+-\S+\)", span), cells
            for cell in (*cells[1:4], *cells[5:7]):
                # n/a: PPO has no loss-based bound
                assert CELL.match(cell) or (cell == "n/a" and cells[0] == "ppo"), cells
    if s["fixed"]:
        rows = _rows(md, "loss | loss ratio")
        assert len(rows) == len(s["fixed"])
        for cells in rows:
            for cell in (*cells[1:5], cells[10]):
                assert CELL.match(cell), cells
    if s.get("reach"):
        rows = _rows(md, "s |")
        assert len(rows) == len(s["reach"]["scales"])
        for cells in rows:
            for cell in cells[1:6]:
                assert CELL.match(cell), cells


@pytest.mark.parametrize("name", ["linearization", "gradient_bounds"])
def test_one_seed_renders_the_mean_alone(name):
    data = _one_seed(name)
    md = _report(name).markdown(data, {})
    rows = [ln for ln in md.split("\n") if ln.startswith("| ") and "---" not in ln]
    assert len(rows) > 3
    body = [ln for ln in rows if re.search(r"\d", ln)]
    assert body and not any("[" in ln for ln in body)
    assert any(MEAN_ALONE.match(c.strip()) for ln in body for c in ln.split("|"))
    assert "n = 1 seeds" in md


def _conclusions(name: str) -> str:
    blocks = gen.lco_blocks()
    key = {
        "linearization": "linearization-conclusions",
        "linearization_subsets": "linearization-subsets-conclusions",
        "gradient_bounds": "gradient-conclusions",
        "reach_tiny": "reach-tiny-conclusions",
        "linearization_tiny": "linearization-tiny",
    }[name]
    return blocks[key]


def _bullets(text: str) -> list[list[str]]:
    """Each top-level bullet with its nested items (a per-setting list)."""
    out: list[list[str]] = []
    for ln in text.split("\n"):
        if ln.startswith("- "):
            out.append([ln])
        elif ln.startswith("  - "):
            out[-1].append(ln)
    return out


@pytest.mark.parametrize("name", [*LIN_RUNS, *GRAD_RUNS])
def test_every_conclusion_bullet_carries_an_interval(name):
    """A bullet states its per-setting numbers with their intervals, itself or in
    its nested per-setting list (then every nested item carries one)."""
    _load(name)
    text = _conclusions(name)
    if name == "linearization_tiny":  # the scale line, then one paragraph
        bullets = [[text.split("\n\n")[-1]]]
    else:
        bullets = _bullets(text)
    assert bullets
    for bullet, *items in bullets:
        assert INTERVAL.search(" ".join([bullet, *items])), bullet
        for item in items:
            assert INTERVAL.search(item), item
    assert "±" not in text


@pytest.mark.parametrize(
    "key", ["linearization", "linearization-subsets", "gradient", "reach-tiny"]
)
def test_the_scale_line_names_the_interval(key):
    line = gen.lco_blocks()[f"{key}-scale"]
    if line.startswith("*Not measured"):
        pytest.skip("no committed run")
    assert "mean [95% percentile bootstrap interval] over the" in line
    assert "undercovers" in line and "standard error" not in line


@pytest.mark.parametrize("name", ["linearization", "linearization_subsets"])
def test_every_per_setting_number_of_a_linearization_bullet_has_its_interval(name):
    data = _load(name)
    text = _conclusions(name)
    for key, r in data["summary"].items():
        assert r["seeds"] >= 2
        for stat in ("residual_median", *gen.LIN_ERRORS):
            want = gen._a1_ci(r, stat)
            assert INTERVAL.fullmatch(want) and want in text, (key, stat)
        for level in ("0.1", "0.5"):
            if r["thresholds"]["residual_median"][level].get("alpha_ci95"):
                assert gen._alpha_ci(r, level) in text, (key, level)
        assert gen._ci(r["residual_slope"], digits=3) in text, key
    compared = 0
    for line in text.split("\n"):
        # a comparison of two settings' α: the loss bullets, the subset items
        if (
            "reaches a 10% residual at α" in line
            or line.startswith("  - ")
            and (": α " in line)
        ):
            compared += 1
            assert "intervals overlap" in line or "intervals disjoint" in line, line
            alphas, norms = line.split("‖Δθ‖")
            assert len(INTERVAL.findall(alphas)) == 2, line
            assert len(INTERVAL.findall(norms)) == 2, line
    assert compared


def test_the_overlap_of_two_thresholds_is_read_from_their_intervals():
    def row(lo, hi):
        return {"thresholds": {"residual_median": {"0.1": {"alpha_ci95": [lo, hi]}}}}

    assert gen._overlap(row(1, 2), row(3, 4)) == "intervals disjoint"
    assert gen._overlap(row(1, 3), row(2, 4)) == "intervals overlap"
    assert gen._overlap(row(3, 4), row(1, 3)) == "intervals overlap"
    one = {"thresholds": {"residual_median": {"0.1": {"alpha_ci95": None}}}}
    assert "no interval" in gen._overlap(one, row(1, 2))


def test_every_gradient_bullet_number_has_its_interval():
    data = _load("gradient_bounds")
    text = _conclusions("gradient_bounds")
    s = data["summary"]
    for r in s["bounds"].values():
        for stat in ("sigma_max", "tightness"):
            assert gen._ci(r[stat]) in text, stat
        assert gen._ci(r["sigma_growth"], digits=3) in text
    for x in s["reach"]["scales"]:
        assert gen._ci(x["residual"]) in text and gen._ci(x["ratio_dev"]) in text
    assert gen._ci(s["reach"]["residual_at_first_fail"]) in text
