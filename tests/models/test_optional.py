"""The checkpoint formats are an optional extra: importing the models package does not
need them, and a missing one names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from theorycheck.models._optional import require


def test_models_import_without_checkpoint_packages():
    code = (
        "import sys, theorycheck.models; "
        "print(','.join(m for m in ('gguf', 'tokenizers', 'safetensors') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def test_require_names_the_extra():
    with pytest.raises(ImportError, match=r"pip install 'theorycheck\[checkpoints\]'"):
        require("theorycheck_no_such_module")
    assert require("json").__name__ == "json"
