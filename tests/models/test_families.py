"""The FAMILIES table: every Family has one module, and each module is complete."""

import pytest

from theorycheck.models import Family, ModelConfig
from theorycheck.models._families import FAMILIES
from theorycheck.models._hf_config import ARCHITECTURES


def test_every_family_has_exactly_one_module():
    assert set(FAMILIES) == set(Family)
    for family, module in FAMILIES.items():
        assert module.family is family
    names = [a for m in FAMILIES.values() for a in m.hf_architectures]
    assert len(names) == len(set(names)) == len(ARCHITECTURES)
    assert all(ARCHITECTURES[a].family in FAMILIES for a in names)


def _config(family, **kw):
    return ModelConfig(
        family=family,
        vocab_size=7,
        hidden_size=8,
        num_layers=2,
        num_heads=2,
        num_kv_heads=2,
        head_dim=4,
        intermediate_size=12,
        max_positions=16,
        **kw,
    )


#: each family with every optional tensor switched on
FULL = {
    Family.LLAMA: dict(attention_bias=True, qk_norm=True, tie_embeddings=False),
    Family.GPT2: dict(attention_bias=True),
    Family.GEMMA: dict(tie_embeddings=False),
}


@pytest.mark.parametrize("family", list(Family))
def test_a_family_names_every_tensor_it_shapes(family):
    """The family's HF (and GGUF) names cover every key of its shapes; its init and
    top keys are keys it shapes."""
    cfg = _config(family, **FULL[family])
    module = FAMILIES[family]
    shapes = module.shapes(cfg)
    keys = set(shapes["top"]) | set(shapes["block"])
    assert {module.init_value(k) for k in keys} <= {"ones", "zeros", "normal"}
    assert set(module.top_keys) <= set(shapes["top"])
    _, top, block = module.hf_names([])
    assert set(shapes["top"]) <= set(top) and set(shapes["block"]) <= set(block)
    if module.gguf_architectures:
        top, block = module.gguf_names
        assert set(shapes["top"]) <= set(top) and set(shapes["block"]) <= set(block)


def test_model_config_refuses_an_unknown_family():
    with pytest.raises(ValueError, match="ModelConfig.family = 'mamba'"):
        _config("mamba")
