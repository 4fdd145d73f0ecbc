"""Committed measurements: written only by --remeasure, read back only when the
settings and the measuring code match, otherwise measured now (and said so)."""

from __future__ import annotations

import json

from theorycheck.claims import measured, remeasuring

CALLS: list[int] = []


def _measure():
    CALLS.append(1)
    return {"value": 7, "pair": (1, 2)}


def _other_measure():
    CALLS.append(1)
    return {"value": 8}


def test_remeasure_writes_and_a_plain_run_reads_back(tmp_path):
    store = tmp_path / "m.json"
    CALLS.clear()
    with remeasuring():
        first = measured(store, {"n": 3}, _measure)
    assert first.fresh and "written to" in first.source and len(CALLS) == 1
    saved = json.loads(store.read_text())
    assert saved["data"] == {"value": 7, "pair": [1, 2]}
    prov = saved["provenance"]
    assert prov["command"] == "theorycheck prove --remeasure"
    assert prov["settings"] == {"n": 3} and len(prov["code_sha256"]) == 16
    again = measured(store, {"n": 3}, _measure)
    assert not again.fresh and len(CALLS) == 1  # read back, not recomputed
    assert again.data == saved["data"]
    assert again.source.startswith("the committed measurement")
    assert "theorycheck prove --remeasure" in again.source


def test_other_settings_code_or_quick_measure_now_and_leave_the_file(tmp_path):
    store = tmp_path / "m.json"
    with remeasuring():
        measured(store, {"n": 3}, _measure)
    before = store.read_text()
    other = measured(store, {"n": 4}, _measure)
    assert other.fresh and "other settings" in other.source
    code = measured(store, {"n": 3}, _other_measure)
    assert code.fresh and "other code" in code.source and code.data == {"value": 8}
    quick = measured(store, {"n": 3}, _measure, quick=True)
    assert quick.fresh and "quick" in quick.source
    assert store.read_text() == before


def test_missing_or_broken_file_measures_now(tmp_path):
    store = tmp_path / "m.json"
    assert "no committed" in measured(store, {}, _measure).source
    assert not store.exists()
    store.write_text("not json")
    assert "not a measurement file" in measured(store, {}, _measure).source
