"""The probe section of reproduce, quick mode (the tiny model, in a subprocess)."""

import pytest

from theorycheck.reproduce import probe_section

pytestmark = pytest.mark.slow


def test_probe_section_quick_reports_the_base_table(tmp_path):
    result = probe_section(tmp_path, quick=True)
    assert "| ntk2 |" in result.markdown and "base rate" in result.markdown
    assert (tmp_path / "sign_agreement" / "results.json").exists()
    assert all((tmp_path / f).exists() for f in result.figures)
    assert "--tiny" in result.config["command"]
