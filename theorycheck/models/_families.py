"""The one table of model families: :class:`~theorycheck.models.Family` -> its module.

Adding a family is one module (``_<family>.py`` building a
:class:`~theorycheck.models._family.FamilyModule`), its ``Family`` member and one entry
here; the forward pass, ``init_params``/``split_params``, the KV cache and the HF/GGUF
loaders read everything else from the record.
"""

from __future__ import annotations

from theorycheck.models._config import VALIDATORS, Family
from theorycheck.models._family import FamilyModule
from theorycheck.models._gemma import GEMMA
from theorycheck.models._gpt2 import GPT2
from theorycheck.models._llama import LLAMA

FAMILIES: dict[Family, FamilyModule] = {
    Family.LLAMA: LLAMA,
    Family.GPT2: GPT2,
    Family.GEMMA: GEMMA,
}

# the configs' own check reads the families' validators from here (the family
# modules import ``_config``, so ``_config`` never imports them back)
VALIDATORS.update({family: module.validate for family, module in FAMILIES.items()})
