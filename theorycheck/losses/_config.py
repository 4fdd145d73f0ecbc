"""What a trainer configuration computes: ``theorycheck conventions --config FILE``.

Reads a verl or SkyRL configuration (Hydra/OmegaConf YAML, with ``key=value`` overrides
as on their command lines), a TRL ``GRPOConfig`` (YAML or JSON) or a Miles launch
(argparse flags), picks the trainer's resolver (one module each, the interface in
``_resolve_common``) and the version named by ``--framework NAME@VERSION`` (default:
the newest the resolvers know), and returns which registry rule, reduction, advantage,
δ, cap, anchor, corrections and extra terms the run computes, the traps found, the
settings that version refuses at startup, and every key of the file either read or
listed with why it is not interpreted.
"""

from __future__ import annotations

from pathlib import Path

from theorycheck._bounded import (
    MAX_CONFIG_BYTES,
    check_interpolations,
    parse_config_text,
    read_bounded_text,
    refuse_nan,
)
from theorycheck._errors import BadInput
from theorycheck.losses import (
    _resolve_miles,
    _resolve_skyrl,
    _resolve_trl,
    _resolve_verl,
)

#: framework -> its resolver module (the interface: ``_resolve_common``).
RESOLVERS = {
    m.FRAMEWORK: m
    for m in (_resolve_verl, _resolve_trl, _resolve_skyrl, _resolve_miles)
}
#: the trainer versions the resolvers know: name -> description.
VERSIONS = {k: v for m in RESOLVERS.values() for k, v in m.VERSIONS.items()}
DEFAULT_VERSION = {name: m.DEFAULT for name, m in RESOLVERS.items()}


def _flatten(tree, prefix=""):
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v:
                out.update(_flatten(v, key + "."))
            else:
                out[key] = v
    return out


def load_config(path, overrides=()) -> dict:
    """A config file (YAML or JSON) merged with ``key=value`` overrides, as a dict.

    Raises:
        BadInput: the file is missing, unreadable, not YAML/JSON, not a mapping, or an
            override is not ``key=value``.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    p = Path(path)
    if not p.is_file():
        raise BadInput(f"config {str(path)!r}: no such file")
    what = f"config {str(path)!r}"
    text = read_bounded_text(p, what, MAX_CONFIG_BYTES)  # bounded: theorycheck._bounded
    raw = parse_config_text(text, p.name, what)
    if not isinstance(raw, dict):
        raise BadInput(
            f"config {str(path)!r}: holds a {type(raw).__name__}, not a mapping"
        )
    bad = [o for o in overrides if "=" not in o or o.startswith("=")]
    if bad:
        raise BadInput(f"override {bad[0]!r}: expected key=value")
    try:
        cfg = OmegaConf.merge(
            OmegaConf.create(raw),
            OmegaConf.from_dotlist([o.lstrip("+") for o in overrides]),
        )
        check_interpolations(OmegaConf.to_container(cfg), what)  # overrides too
        out = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        line = str(err).splitlines()[0]
        raise BadInput(f"config {str(path)!r}: {line}") from None
    refuse_nan(out, what)
    return out


def detect_framework(flat: dict) -> str:
    """The first trainer whose keys the config has (verl, SkyRL, TRL, Miles)."""
    for name in ("verl", "skyrl", "trl", "miles"):
        if RESOLVERS[name].looks_like(flat):
            return name
    raise BadInput(
        "config: neither a verl config (actor_rollout_ref / algorithm), a SkyRL one "
        "(trainer.algorithm), a TRL GRPOConfig (loss_type / epsilon / beta) nor Miles "
        "flags (--advantage-estimator ...); name it with --framework"
    )


def _pick(flat_or_none, framework, version):
    """``--framework NAME[@VERSION]`` and ``--trainer-version NAME@VERSION`` -> the
    trainer and the version name its resolver knows."""
    name, _, spec = (framework or "").partition("@")
    vname, _, vspec = (version or "").partition("@")
    if version and not vspec:
        vname, vspec = name, vname
    name = name or vname
    if not name:
        if flat_or_none is None:
            return None, None
        name = detect_framework(flat_or_none)
    if name not in RESOLVERS:
        raise BadInput(f"framework {name!r}: expected {', '.join(RESOLVERS)}")
    if vname and vname != name:
        raise BadInput(f"trainer version {version!r}: not a {name} version")
    spec = spec or vspec
    return name, RESOLVERS[name].version_of(spec) if spec else RESOLVERS[name].DEFAULT


def _weights(out, batch_shape, lengths, micro_batch_size):
    import dataclasses

    from theorycheck.losses._conventions import _per_token, batch_mask
    from theorycheck.losses._reductions import reduction_weights

    mask, gid = batch_mask(tuple(batch_shape), lengths)
    mb = batch_shape[1] if micro_batch_size is None else int(micro_batch_size)
    if mb < 1:
        raise BadInput(f"micro_batch_size {mb} must be >= 1")
    red = dataclasses.replace(
        out["reduction"], micro_batch_size=mb if out["per_micro_batch"] else None
    )
    w = reduction_weights(mask, red, group_ids=gid, num_groups=batch_shape[0])
    return _per_token(w, mask).tolist()


def _load(path, overrides, fw):
    """The trainer and the flattened config: Miles flags, or YAML/JSON with
    ``key=value`` overrides."""
    if fw == "miles" or (fw is None and _resolve_miles.is_flag_file(path)):
        return "miles", _resolve_miles.load_flags(path, overrides)
    import yaml

    try:
        return fw, _flatten(load_config(path, overrides))
    except yaml.YAMLError:  # a value OmegaConf parses as YAML; name the override
        raise BadInput(
            f"override {_bad_override(overrides)!r}: not valid YAML"
        ) from None


def _resolved(path, overrides, framework, version):
    """``(framework, version, flat config, the resolver's answer)``."""
    fw, ver = _pick(None, framework, version)
    fw, flat = _load(path, overrides, fw)
    if ver is None:
        fw, ver = _pick(flat, fw, None)
    _check_named(fw, flat)
    return fw, ver, flat, RESOLVERS[fw].resolve(flat, ver)


def _check_named(fw, flat):
    """A named trainer whose keys the config lacks while it has another's."""
    if RESOLVERS[fw].looks_like(flat):
        return
    other = [n for n, m in RESOLVERS.items() if n != fw and m.looks_like(flat)]
    if other:
        raise BadInput(
            f"config: --framework {fw}, but it has no {fw} keys and looks like a "
            f"{other[0]} config"
        )


def _bad_override(overrides):
    """The first ``key=value`` whose value OmegaConf cannot parse."""
    import yaml
    from omegaconf import OmegaConf

    for o in overrides:
        try:
            OmegaConf.from_dotlist([o.lstrip("+")])
        except yaml.YAMLError:
            return o
    return ",".join(overrides)


def resolve_config(
    path,
    *,
    overrides=(),
    framework=None,
    version=None,
    batch_shape=None,
    lengths=None,
    micro_batch_size=None,
) -> dict:
    """Reads a config and says what it computes (JSON-ready).

    Args:
        path: YAML or JSON file (verl, SkyRL, TRL) or a file of Miles flags.
        overrides: ``key=value`` strings (a Hydra command line), applied last; for
            Miles, ``--flag value`` / ``--flag=value`` / ``flag=value`` items.
        framework: ``"verl"``, ``"trl"``, ``"skyrl"``, ``"miles"``, optionally with
            ``@VERSION`` (``None``: detected from the keys).
        version: ``NAME@VERSION`` or ``VERSION`` (``None``: the newest known).
        batch_shape: optional ``(B, G, T)``: then the per-token weight of each
            response under the run's reduction is included.
        lengths: ``B*G`` response lengths (``None``: a spread 1..T).
        micro_batch_size: rows per micro-batch (``None``: G).

    Returns:
        ``{"framework", "version", "version_range", "rule", "loss_mode", "params",
        "reduction" (mode name), "reduction_name", "per_micro_batch", "delta", "cap",
        "anchor", "advantage", "corrections", "extra_terms", "fails_at_startup",
        "traps", "read", "not_interpreted" (key -> why), "unknown_keys",
        "per_token_weight"}``.
    """
    fw, ver, flat, out = _resolved(path, overrides, framework, version)
    weights = (
        None
        if batch_shape is None
        else _weights(out, batch_shape, lengths, micro_batch_size)
    )
    out["reduction"] = str(out["reduction"].mode)
    skipped = out.pop("skipped")
    missing = set(flat) - set(out["read"]) - set(skipped)
    assert not missing, f"keys neither read nor skipped: {sorted(missing)}"
    return {
        "framework": fw,
        "version": ver,
        "version_range": VERSIONS[ver],
        "unknown_keys": [],
        **out,
        "not_interpreted": skipped,
        "per_token_weight": weights,
    }


def config_corrections(path, framework=None) -> dict:
    """A config's corrections and reduction, for applying to a batch.

    Returns:
        ``{"version", "corrections", "reduction" (micro-batches ignored),
        "reduction_name"}``.
    """
    import dataclasses

    _, ver, _, out = _resolved(path, (), framework, None)
    return {
        "version": ver,
        "corrections": out["corrections"],
        "reduction": dataclasses.replace(out["reduction"], micro_batch_size=None),
        "reduction_name": out["reduction_name"],
    }
