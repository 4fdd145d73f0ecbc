"""The convexity report: its inputs (the loss, the ``--set`` values, the structure
fit) come as arguments beside the verdict record, and the plot evaluates them."""

from __future__ import annotations

from theorycheck.convexity import ConvexityResult, Verdict, write_report
from theorycheck.convexity._resolve import resolve


def _record(adv: float) -> ConvexityResult:
    # a verdict record that carries neither a resolved loss nor settings
    return ConvexityResult(
        loss="pg",
        verdict=Verdict.NOT_CONVEX if adv < 0 else Verdict.CONVEX,
        scope="V = 3",
        methods=[{"method": "m", "status": "confirmed", "detail": "d"}],
        counterexample=None,
        condition=None,
        params={"adv": adv},
    )


def test_report_plots_the_loss_and_settings_it_is_given(tmp_path):
    # pg = -Â log π_k: λ_min < 0 on the whole π_k slice at Â = -1, never at Â = +1.
    # The record is the same object both times: only the settings argument differs.
    rec = _record(-1.0)
    assert rec.resolved is None and rec.settings == {}
    pg = resolve("pg")
    neg = write_report(rec, tmp_path / "neg", resolved=pg, settings={"adv": -1.0})
    pos = write_report(rec, tmp_path / "pos", resolved=pg, settings={"adv": 1.0})
    neg_md, pos_md = neg.read_text(), pos.read_text()
    assert "λ_min < 0 for 199 of 199 grid points" in neg_md
    assert "λ_min < 0 for 0 of 199 grid points" in pos_md
    for md in (neg_md, pos_md):  # the text is the verdict record's
        assert "- verdict: **not_convex** (V = 3)" in md
        assert "- parameters: adv = -1.0" in md
        assert "| m | confirmed | d |" in md
    assert (tmp_path / "neg" / "convexity_pg.png").stat().st_size > 1000
