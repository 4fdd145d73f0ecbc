"""Look-up and validation of rule names and hyperparameters (bad input -> BadInput).

Every message names the bad value and, for an unknown name or key, lists the valid ones.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping

from theorycheck._errors import BadInput
from theorycheck.losses._registry import LOSSES
from theorycheck.losses._spec import LossSpec

#: keys whose values must be whole numbers.
_INTEGER_KEYS = ("topk", "length")
#: the largest whole-number value (JAX's default integers are 32-bit).
_LARGEST_INTEGER = 2**31 - 1


def get_rule(name: str, *, token: bool = False) -> LossSpec:
    """The registry entry ``name``; with ``token=True`` only rules with a coefficient.

    Args:
        name: a registered name.
        token: require an analytic coefficient.

    Returns:
        The :class:`LossSpec`.

    Raises:
        BadInput: unknown name (the valid names are listed).
    """
    valid = sorted(
        n for n, s in LOSSES.items() if not token or s.coefficient is not None
    )
    if name not in valid:
        raise BadInput(f"unknown rule {name!r}; valid: {', '.join(valid)}")
    return LOSSES[name]


def parse_assignments(items: list[str]) -> dict[str, float]:
    """``["KEY=VALUE", ...]`` -> ``{key: float}``: the one parser of parameter
    assignments (the CLI's ``--set``).

    ``inf`` is allowed (e.g. ``log_ratio_clamp=inf``); NaN, a missing ``=``, an empty
    key, a value that is not a number, a nonzero finite number that float64 rounds to
    0 or to infinity (``1e-400``, ``1e400``) and a key given twice are refused with a
    :class:`BadInput` that starts ``assignment 'ITEM':`` (the commands name their flag
    instead, through ``commands._output.flag_names``).

    Examples:
        >>> parse_assignments(["adv=-1", "q=0.3"])
        {'adv': -1.0, 'q': 0.3}
    """
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"assignment {item!r}: expected KEY=VALUE")
        try:
            number = float(value)
        except ValueError:
            raise BadInput(f"assignment {item!r}: {value!r} is not a number") from None
        if math.isnan(number):
            raise BadInput(f"assignment {item!r}: NaN is not a valid value")
        if number == 0 or math.isinf(number):  # the decimal text may say otherwise
            try:
                exact = decimal.Decimal(value.strip().replace("_", ""))
            except decimal.InvalidOperation:
                exact = None
            if exact is not None and exact.is_finite() and exact != 0:
                what = "underflows to 0" if number == 0 else f"overflows to {number}"
                raise BadInput(
                    f"assignment {item!r}: {value.strip()} {what} in float64"
                )
        if key in out:
            raise BadInput(f"assignment {item!r}: {key!r} is given twice")
        out[key] = number
    return out


def _finite_nonnegative(v: float) -> bool:
    return v >= 0 and math.isfinite(v)


def _positive(v: float) -> bool:
    return v > 0


#: key -> (the test its value must pass, what the error says when it does not).
_RANGES = {
    "topk": (lambda v: v >= 0, "must be >= 0"),
    "length": (lambda v: v >= 1, "must be >= 1"),
    "eps_low": (lambda v: 0 <= v < 1, "must lie in [0, 1)"),
    "eps_high": (_finite_nonnegative, "must be finite and >= 0"),
    "delta": (_finite_nonnegative, "must be finite and >= 0"),
    "divergence": (_finite_nonnegative, "must be finite and >= 0"),
    # 0 is a real window edge: SkyRL's CISPO and TRL's windows start at 0
    "low": (_finite_nonnegative, "must be finite and >= 0"),
    "kappa": (lambda v: v > 1 and math.isfinite(v), "must be finite and > 1"),
    **{
        k: (_positive, "must be > 0")
        for k in ("high", "cap", "tau_pos", "tau_neg", "beta", "neg_beta_scale")
    },
    "log_ratio_clamp": (_positive, "must be > 0"),
}


def check_rule_value(name: str, key: str, value: float) -> float | int:
    """Validates one hyperparameter of registry rule ``name`` (cast to int where the
    key is a whole number, e.g. ``topk``).

    Raises:
        BadInput: the value is out of the key's range.
    """
    _check_value(name, key, value)
    return int(value) if key in _INTEGER_KEYS else value


def _check_value(name: str, key: str, v: float) -> None:
    def bad(why):
        raise BadInput(f"{name}: {key}={v!r} {why}")

    if key in _INTEGER_KEYS and not float(v).is_integer():
        bad("must be a whole number")
    if key in _INTEGER_KEYS and abs(v) > _LARGEST_INTEGER:  # before it reaches JAX
        bad(f"must be at most {_LARGEST_INTEGER} (a 32-bit integer)")
    ok, why = _RANGES.get(key, (lambda v: True, ""))
    if not ok(v):
        bad(why)
    if not math.isfinite(v) and key != "log_ratio_clamp":
        bad("must be finite")


def resolve_params(
    name: str, overrides: Mapping[str, float], *, allow_inputs: bool = False
) -> tuple[dict, dict]:
    """Merges ``overrides`` into the rule's defaults and validates every value.

    Args:
        name: a registered rule.
        overrides: ``{key: value}`` from the user.
        allow_inputs: also accept the coefficient's extra inputs
            (``LossSpec.coefficient_inputs``, e.g. ``divergence``).

    Returns:
        ``(params, inputs)``: hyperparameters (defaults + overrides) and extra inputs.

    Raises:
        BadInput: an unknown key (the valid keys are listed), a bad value, or a
            missing required input.
    """
    spec = get_rule(name)
    input_keys = spec.coefficient_inputs if allow_inputs else ()
    valid = list(spec.defaults) + list(input_keys)
    params, inputs = dict(spec.defaults), {}
    for key, value in overrides.items():
        if key not in valid:
            raise BadInput(
                f"{name}: unknown parameter {key!r}; valid: "
                f"{', '.join(valid) or '(none)'}"
            )
        _check_value(name, key, value)
        if key in input_keys:
            inputs[key] = int(value) if key in _INTEGER_KEYS else value
        else:
            params[key] = int(value) if key in _INTEGER_KEYS else value
    if "low" in params and "high" in params and not params["low"] < params["high"]:
        raise BadInput(
            f"{name}: low={params['low']!r} must be < high={params['high']!r}"
        )
    required = {"divergence", "ddot"} & set(input_keys)
    missing = sorted(required - set(inputs))
    if allow_inputs and missing:
        raise BadInput(
            f"{name} needs whole distributions; give the inputs "
            + ", ".join(f"{m}=VALUE" for m in missing)
        )
    return params, inputs
