"""The LCO section of reproduce, quick mode (the tiny model, in subprocesses)."""

import pytest

from theorycheck.reproduce import linearization_section

pytestmark = pytest.mark.slow


def test_linearization_section_quick_reports_both_experiments(tmp_path):
    result = linearization_section(tmp_path, quick=True)
    assert "α (10%)" in result.markdown and "Prop. 4.7" in result.markdown
    assert set(result.data) == {"linearization", "gradient_bounds"}
    assert (tmp_path / "linearization" / "results.json").exists()
    assert all((tmp_path / f).exists() for f in result.figures)
    assert all("--tiny" in c for c in result.config["commands"])
