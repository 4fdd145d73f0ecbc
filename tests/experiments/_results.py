"""Reading an experiment's ``results.json``, and comparing two runs of one config."""

import json


def read(path):
    """The JSON object at ``path``."""
    return json.loads(path.read_text())


def assert_same_results(got_path, want_path):
    """Two runs' results are equal, except for the folder they were written to."""
    got, want = read(got_path), read(want_path)
    got["config"]["out"] = want["config"]["out"]
    got["provenance"]["config"]["out"] = want["provenance"]["config"]["out"]
    assert got == want
