"""What every trainer resolver shares: the interface, and checked numbers.

A resolver module (``_resolve_verl``, ``_resolve_trl``, ``_resolve_skyrl``,
``_resolve_miles``) defines

- ``FRAMEWORK``: its name;
- ``VERSIONS``: version name -> the repository, commit and date it was read at;
- ``DEFAULT``: the newest version it knows;
- ``version_of(spec)``: the version name a ``NAME@SPEC`` string means (``BadInput`` for
  one it does not know);
- ``looks_like(flat)``: whether a flattened config has this trainer's keys;
- ``resolve(flat, version)``: a dict with ``rule``, ``loss_mode``, ``params``,
  ``reduction_name``, ``reduction`` (a :class:`~theorycheck.losses.Reduction`),
  ``per_micro_batch``, ``delta``, ``cap``, ``anchor``, ``advantage``, ``corrections``,
  ``extra_terms``, ``traps``, ``read`` (the keys interpreted) and ``skipped``
  (key -> why it is not interpreted).

Every key a config sets ends in ``read`` or in ``skipped`` (with the reason), so that no
value is silently dropped.
"""

from __future__ import annotations

import math

from theorycheck._errors import BadInput


def number(cfg, key, *, positive=False):
    """``cfg[key]`` as a finite float (``None`` stays ``None``).

    Raises:
        BadInput: naming the key, for a non-numeric value, a boolean, NaN, an
            infinity, or (``positive``) a value <= 0.
    """
    v = cfg[key]
    if v is None:
        return None
    return parse_number(key, v, positive=positive)


def parse_number(key, v, *, positive=False):
    """One value of ``key`` as a finite float; see :func:`number`."""
    if isinstance(v, bool):
        raise BadInput(f"config key {key} = {v!r}: expected a number, not a boolean")
    try:
        x = float(str(v).strip()) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        raise BadInput(f"config key {key} = {v!r}: expected a number") from None
    if not math.isfinite(x):
        raise BadInput(f"config key {key} = {v!r}: expected a finite number")
    if positive and x <= 0:
        raise BadInput(f"config key {key} = {v!r}: expected a number > 0")
    return x


def lower_upper(key, spec):
    """A ``"lower_upper"`` threshold string (verl's IcePop / k1 form) or one number.

    Returns:
        ``(lower or None, upper)``, both finite and > 0, lower <= upper.

    Raises:
        BadInput: naming the key and the bad part.
    """
    text = str(spec).strip()
    if isinstance(spec, str) and "_" in text:
        try:
            lo, hi = (parse_number(key, t, positive=True) for t in text.split("_", 1))
        except BadInput as err:
            why = str(err).rpartition(": ")[2]
            raise BadInput(
                f"config key {key} = {spec!r}: 'lower_upper' bounds, each {why[9:]}"
            ) from None
        if lo > hi:
            raise BadInput(f"config key {key} = {spec!r}: lower bound > upper bound")
        return lo, hi
    return None, parse_number(key, spec, positive=True)


def flag(cfg, key) -> bool:
    """A boolean setting (``true``/``false`` strings as a shell passes them)."""
    v = cfg[key]
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no", "null", "none", ""):
            return False
        raise BadInput(f"config key {key} = {v!r}: expected true or false")
    return bool(v)


def absent(v) -> bool:
    """Unset as a trainer reads it: ``None`` or the strings ``null`` / ``none``."""
    return v is None or (isinstance(v, str) and v.strip().lower() in ("null", "none"))


def settle(flat, read, reasons, default_reason):
    """``skipped``: every key of ``flat`` not in ``read``, with why.

    Args:
        flat: the config's keys.
        read: keys interpreted.
        reasons: ``(prefix, why)`` pairs, first match wins.
        default_reason: why for a key no prefix matches.
    """
    out = {}
    for k in sorted(set(flat) - set(read)):
        out[k] = next((why for p, why in reasons if k.startswith(p)), default_reason)
    return out


def single_version(framework: str, commit: str, description: str):
    """``(VERSIONS, DEFAULT, version_of)`` of a trainer known at one commit."""
    name = f"{framework}@{commit}"

    def version_of(spec: str) -> str:
        if spec.strip()[:7] == commit:
            return name
        raise BadInput(
            f"{framework} version {spec!r}: unknown; known: {commit} ({description})"
        )

    version_of.__doc__ = f"``{commit}`` (or a longer prefix) -> ``{name}``."
    return {name: description}, name, version_of


def entry(name, params, note="", *, applied=True):
    """One correction as the resolvers report it: registry name, parameters,
    whether it is applied, and a line of text."""
    shown = ", ".join(f"{k}={v:g}" for k, v in params.items())
    return {
        "correction": name,
        "params": params,
        "applied": applied,
        "text": f"{name}({shown})" + (f" ({note})" if note else ""),
    }


def kl_term(coef, kind, reduction=None, note=""):
    """The KL-to-reference term's line."""
    text = f"+ {coef:g} x {kind} KL to the reference, per token"
    text += f", reduced by {reduction}" if reduction else ""
    return text + (f" ({note})" if note else "")


def entropy_term(coef):
    """The entropy bonus's line."""
    return f"- {coef:g} x entropy, per token"


def opsm(delta):
    """Off-policy sequence masking (TRL ``off_policy_mask_threshold``, Miles
    ``--use-opsm``): a sequence with A < 0 and mean KL > delta is masked."""
    return entry("opsm", {"delta": delta}, "sequences with A<0 and mean KL > delta")
