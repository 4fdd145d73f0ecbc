"""``commands._output``: one JSON line, output paths checked before work, flag names."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.commands._output import (
    check_output_dir,
    check_output_path,
    emit_json,
    flag_names,
    to_jsonable,
)


def test_emit_json_is_one_line_with_null_for_non_finite(capsys):
    emit_json({"a": np.float64(math.inf), "b": np.arange(3), "c": {"d": math.nan}})
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == {"a": None, "b": [0, 1, 2], "c": {"d": None}}
    assert to_jsonable((np.float32(0.5),)) == [0.5]


def test_check_output_path_accepts_a_new_or_existing_file(tmp_path):
    assert check_output_path("--plot", tmp_path / "a.PNG", (".png",)).name == "a.PNG"
    (tmp_path / "b.svg").write_text("old")
    assert check_output_path("--plot", str(tmp_path / "b.svg"), (".png", ".svg"))
    assert check_output_path("--out", tmp_path / "any.thing", None)


@pytest.mark.parametrize(
    "name,needle",
    [
        ("DIR", "is a directory"),
        ("chart.txt", "expected a .png or .pdf file"),
        ("missing/chart.png", "does not exist"),
    ],
)
def test_check_output_path_refuses(tmp_path, name, needle):
    path = tmp_path if name == "DIR" else tmp_path / name
    with pytest.raises(BadInput, match=needle) as err:
        check_output_path("--plot", path, (".png", ".pdf"))
    assert str(err.value).startswith(f"--plot {str(path)!r}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_check_output_path_refuses_an_unwritable_directory(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(BadInput, match="not writable"):
            check_output_path("--plot", locked / "a.png", (".png",))
    finally:
        locked.chmod(0o700)


def test_check_output_dir(tmp_path):
    assert check_output_dir("--report", tmp_path / "new" / "deeper") is not None
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInput, match="is a file; expected a directory"):
        check_output_dir("--report", tmp_path / "file")
    with pytest.raises(BadInput, match="not a writable directory"):
        check_output_dir("--report", tmp_path / "file" / "below")


def test_flag_names_translates_the_leading_argument_only():
    names = flag_names(max_len="--max-len", lengths="--lengths")
    for _ in range(2):  # reusable
        with pytest.raises(BadInput, match=r"^--max-len 3 is below 5$"):
            with names:
                raise BadInput("max_len 3 is below 5")
    with pytest.raises(BadInput, match=r"^max_length 3$"):  # a longer name: kept
        with names:
            raise BadInput("max_length 3")
    with pytest.raises(BadInput, match=r"^shape \(2,\): lengths differ$"):
        with names:
            raise BadInput("shape (2,): lengths differ")
    with pytest.raises(ValueError, match="other"):  # not BadInput: untouched
        with names:
            raise ValueError("other")
