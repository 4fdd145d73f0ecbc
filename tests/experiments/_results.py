"""Reading an experiment's ``results.json``, and comparing two runs of one config."""

import json


def read(path):
    """The JSON object at ``path``."""
    return json.loads(path.read_text())


#: provenance entries that differ between two runs of one config by nature.
VOLATILE = ("started", "load_average_start", "load_average_end", "wall_s")


def stable(data: dict) -> dict:
    """A results object without its volatile provenance entries, its record of the
    invocations that computed it and its folder."""
    data = json.loads(json.dumps(data))
    for key in VOLATILE:
        data["provenance"].pop(key, None)
    data.pop("runs", None)  # one entry per computing invocation: differs by design
    # the commit that computed each unit: differs when HEAD moves between two runs
    data.pop("unit_commits", None)
    data["config"]["out"] = data["provenance"]["config"]["out"] = "OUT"
    return data


def assert_same_results(got_path, want_path):
    """Two runs' results are equal, except for the folder they were written to and
    the volatile provenance (start time, load average, wall time)."""
    assert stable(read(got_path)) == stable(read(want_path))


def assert_report_only_computes_nothing(module, argv, tiny_run, tmp_path, monkeypatch):
    """``--report-only`` on a copy of a finished run with one unit removed: nothing is
    computed (every ``*_unit`` function of ``module`` raises), the removed unit is
    listed as unfinished in results.json and report.md, the rest is summarized, and the
    commits that computed the units (here an older one) are kept and named."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(tiny_run, out)
    data = read(out / "results.json")
    dropped = sorted(data["units"])[0]
    del data["units"][dropped]
    assert set(data["unit_commits"]) >= set(data["units"])  # each unit has its commit
    data["unit_commits"] = {u: "c0ffee" for u in data["units"]}  # an older commit
    (out / "results.json").write_text(json.dumps(data))

    def computes(*args, **kwargs):
        raise AssertionError("--report-only computed a unit")

    for name in [n for n in vars(module) if n.endswith("_unit")]:
        monkeypatch.setattr(module, name, computes)
    assert module.main([*argv, "--out", str(out), "--report-only"]) == 0
    after = read(out / "results.json")
    assert dropped not in after["units"] and after["missing_units"] == [dropped]
    assert set(after["units"]) == set(data["units"])
    assert after["unit_commits"] == data["unit_commits"]
    report = (out / "report.md").read_text()
    assert dropped in report
    assert f"`c0ffee` ({len(data['units'])} units)" in report


def assert_fresh_report_only_refused(module, argv, tmp_path, capsys):
    """``--fresh --report-only`` together would discard everything: exit 2."""
    out = ["--out", str(tmp_path / "x"), "--fresh", "--report-only"]
    assert module.main([*argv, *out]) == 2
    assert "--fresh with --report-only" in capsys.readouterr().err
