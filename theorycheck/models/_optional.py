"""Dependencies that only some commands need, imported when first used.

Reading checkpoints needs ``gguf``, ``safetensors`` and ``tokenizers`` (the
``checkpoints`` extra); a synthetic model (``init_params``) does not.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str = "checkpoints") -> ModuleType:
    """``import module``, or an ImportError that names the extra to install.

    Examples:
        >>> require("numpy").__name__
        'numpy'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{module} is not installed; it comes with the '{extra}' extra: "
            f"pip install 'theorycheck[{extra}]'"
        ) from err
