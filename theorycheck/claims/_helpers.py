"""Small adapters that turn the engines' answers into :class:`CheckResult` objects.

* :func:`from_proof`: a :class:`theorycheck.formal.ProofResult` (proved / refuted /
  unknown) as a check of a universal statement;
* :func:`property_check`: a hypothesis property run programmatically (seeded,
  derandomized, no example database), returning a bool or asserting; a falsifying
  example (False, or any exception of the property) is re-checked before it is
  reported, and "no counterexample in N examples" is what a pass says;
* :func:`compare`: two routes to the same numbers, within a stated tolerance;
* :func:`sympy_identity`: an exact identity ``difference == 0`` in SymPy;
* :func:`passed` / :func:`failed` / :func:`undecided`: a result built by hand;
  :func:`with_data`: a result with more measured numbers;
* :func:`float64`: the scoped float64 context every check runs in, and
  :func:`require_float64`, the assertion a numeric check starts with.

Examples:
    >>> import numpy as np
    >>> compare("1 + 1", np.array([2.0]), np.array([2.0]), rtol=0, atol=0).outcome
    <Outcome.PASS: 'pass'>
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from theorycheck.claims._types import CheckResult, Outcome


def passed(
    detail: str, data: Mapping[str, Any] | None = None, **more: Any
) -> CheckResult:
    """A PASS with its detail line and measured numbers (``data`` and ``more``).

    Examples:
        >>> passed("1 + 1 = 2", n=1).data
        {'n': 1}
    """
    return CheckResult(Outcome.PASS, detail, data={**(data or {}), **more})


def failed(
    detail: str,
    counterexample: Mapping[str, Any],
    data: Mapping[str, Any] | None = None,
    **more: Any,
) -> CheckResult:
    """A FAIL with its re-checked counterexample (required) and measured numbers."""
    return CheckResult(
        Outcome.FAIL,
        detail,
        counterexample=counterexample,
        data={**(data or {}), **more},
    )


def undecided(
    detail: str, data: Mapping[str, Any] | None = None, **more: Any
) -> CheckResult:
    """An UNKNOWN: the check could not decide (say why in ``detail``)."""
    return CheckResult(Outcome.UNKNOWN, detail, data={**(data or {}), **more})


def with_data(
    result: CheckResult, data: Mapping[str, Any] | None = None, **more: Any
) -> CheckResult:
    """``result`` with more measured numbers (outcome, detail, counterexample kept).

    Examples:
        >>> with_data(passed("ok", n=1), m=2).data
        {'n': 1, 'm': 2}
    """
    return CheckResult(
        result.outcome,
        result.detail,
        counterexample=result.counterexample,
        data={**result.data, **(data or {}), **more},
    )


@contextlib.contextmanager
def float64() -> Iterator[None]:
    """JAX in float64 inside the block only (``jax.enable_x64(True)``, thread-local);
    the process default (float32) is back when the block exits, also on an error.
    :func:`theorycheck.claims.run_check` runs every check inside it, so a check never
    switches ``jax_enable_x64`` itself (a global switch would leave every later
    computation of the process in float64).

    Examples:
        >>> import jax.numpy as jnp
        >>> with float64():
        ...     str(jnp.zeros(1).dtype)
        'float64'
    """
    import jax

    with jax.enable_x64(True):
        yield


def require_float64() -> None:
    """Raises unless JAX computes in float64 here: a numeric check (or a helper of
    one) calls it first, so that run outside :func:`float64` (the scope
    :func:`theorycheck.claims.run_check` gives every check) it stops rather than
    compute silently in float32.

    Examples:
        >>> with float64():
        ...     require_float64()
    """
    import jax

    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "float64 is off: run the check through theorycheck.claims (run_check / "
            "evaluate), or inside `with theorycheck.claims.float64():`"
        )


def exact(value: Any) -> Any:
    """Fractions as ``"p/q"`` strings (exact, JSON-able); other values unchanged."""
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): exact(v) for k, v in value.items()}
    return value


#: What building a formula can raise when it is not a formula z3 can take (a division
#: by zero leaves SymPy's ``zoo`` in it, a non-real or non-polynomial term, ...).
_BUILD_ERRORS = (TypeError, ValueError, ArithmeticError, NotImplementedError)


def from_proof(result: Any, what: str) -> CheckResult:
    """A z3 ``ProofResult`` (theorycheck.formal) for the universal statement ``what``.

    ``proved`` is a PASS, ``refuted`` a FAIL with the (already exactly re-checked)
    counterexample, ``unknown`` an UNKNOWN.

    ``result`` may also be a zero-argument callable that builds the formula and calls
    ``formal.prove``: a formula that cannot be built or encoded (``zoo`` from a
    division by zero, a term z3 cannot take) is then a clean UNKNOWN naming the
    reason, not an error.

    Examples:
        >>> def broken():
        ...     raise TypeError("cannot encode zoo")
        >>> from_proof(broken, "x >= 0").detail
        'z3 could not build the formula for: x >= 0 (TypeError: cannot encode zoo)'
    """
    if callable(result):
        try:
            result = result()
        except _BUILD_ERRORS as exc:
            return CheckResult(
                Outcome.UNKNOWN,
                f"z3 could not build the formula for: {what} "
                f"({type(exc).__name__}: {exc})",
                data={"reason": f"{type(exc).__name__}: {exc}"},
            )
    if result.status == "proved":
        return CheckResult(Outcome.PASS, f"z3 proved: {what}")
    if result.status == "refuted":
        cx = exact(result.counterexample)
        return CheckResult(
            Outcome.FAIL,
            f"z3 refuted: {what} (counterexample re-checked exactly)",
            counterexample=cx,
        )
    return CheckResult(Outcome.UNKNOWN, f"z3 unknown on: {what} ({result.detail})")


def seeded_settings(max_examples: int, **extra: Any):
    """The hypothesis ``settings`` every claim's property run uses: ``max_examples``,
    derandomized (reproducible), no example database, no deadline, no health checks.

    Examples:
        >>> seeded_settings(5).max_examples
        5
    """
    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        **extra,
    )


class _Falsified(Exception):
    """The harness's own signal to hypothesis that an example falsified the property
    (never an exception of the user's property, which is caught and recorded)."""


#: Calls that count as asserting (``np.testing.assert_allclose``, ``self.assertEqual``).
_ASSERT_CALL = re.compile(r"^assert", re.IGNORECASE)


def asserts(prop: Callable[..., Any]) -> bool:
    """True when ``prop``'s own source asserts: an ``assert`` or ``raise`` statement,
    or a call to a function whose name starts with ``assert`` (``np.testing.
    assert_allclose``). A lambda (no statements; its source line may hold other
    code) or a property without source (a builtin) does not assert.

    Examples:
        >>> def prop(x):
        ...     assert x >= 0
        >>> asserts(prop), asserts(lambda x: x >= 0)
        (True, False)
    """
    fn = inspect.unwrap(prop)
    if getattr(fn, "__name__", "<lambda>") == "<lambda>":
        return False
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if _ASSERT_CALL.match(name):
                return True
    return False


def _verdict(prop: Callable[..., Any], args: tuple, may_return_none: bool) -> Any:
    """One call of the user's property: None where it holds, else why it does not
    (``"returned False"``, ``"raised AssertionError: ..."``), or :data:`_REFUSED`
    where it returned something that is no verdict."""
    try:
        value = prop(*args)
    except Exception as exc:  # the user's property: every exception falsifies
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return f"raised {type(exc).__name__}" + (f": {first}" if first else "")
    if isinstance(value, (bool, np.bool_)):
        return None if value else "returned False"
    if value is None and may_return_none:
        return None  # an assert-style property that passed its asserts
    return _REFUSED


_REFUSED = object()


def property_check(
    prop: Callable[..., Any],
    *strategies: Any,
    what: str,
    examples: int = 200,
    quick_examples: int = 25,
    quick: bool = False,
    describe: Callable[..., Mapping[str, Any]] | None = None,
) -> CheckResult:
    """Runs the property ``prop(*drawn)`` under hypothesis, in either idiom.

    * **bool**: ``prop`` returns True where the statement holds, False where not;
    * **assert** (hypothesis style): ``prop`` asserts (``assert``, ``raise``, an
      ``assert...`` call such as ``np.testing.assert_allclose``, see :func:`asserts`)
      and returns None when its asserts pass.

    Any exception the property raises (``AssertionError`` included) falsifies the
    example, which hypothesis shrinks; the shrunk example is re-checked before it is
    reported. The harness signals hypothesis with its own exception, never the
    user's. A property that returns None without asserting anything in its source, or
    returns something that is not a bool, is refused (``TypeError``, one line; the
    check is then ``unknown``).

    Args:
        prop: the property (either idiom).
        *strategies: hypothesis strategies, one per argument of ``prop``.
        what: the property in words (for the detail line).
        examples: examples in a full run; ``quick_examples`` when ``quick``.
        quick_examples: examples in a quick run.
        quick: use ``quick_examples``.
        describe: maps a falsifying example to the counterexample mapping
            (default: the arguments as lists).

    Returns:
        PASS ("no counterexample in N examples"), FAIL with a re-checked
        counterexample (and how it failed), or UNKNOWN when a falsifying example does
        not reproduce or hypothesis cannot decide.

    Raises:
        TypeError: the property returned no verdict (see above).

    Examples:
        >>> from hypothesis import strategies as st
        >>> def below_half(x):
        ...     assert x < 0.5
        >>> property_check(below_half, st.floats(0, 1), what="x < 1/2").outcome
        <Outcome.FAIL: 'fail'>
    """
    from hypothesis import given
    from hypothesis import strategies as st
    from hypothesis.errors import HypothesisException

    n = quick_examples if quick else examples
    may_return_none = asserts(prop)
    failing: list[tuple[tuple, str]] = []
    calls, refused = [0], []

    @seeded_settings(n, print_blob=False)
    @given(st.tuples(*strategies))
    def _run(args):
        if refused:
            return
        calls[0] += 1
        why = _verdict(prop, args, may_return_none)
        if why is _REFUSED:
            refused.append(args)
        elif why is not None:
            failing.append((args, why))
            raise _Falsified(why)

    try:
        _run()
    except _Falsified:
        pass
    except HypothesisException as exc:
        return CheckResult(
            Outcome.UNKNOWN,
            f"hypothesis could not decide ({type(exc).__name__}): {what}",
        )
    if refused:
        raise TypeError(
            f"property_check: {getattr(prop, '__name__', prop)!r} returned no "
            "verdict: return a bool, or assert (assert/raise) and return None"
        )
    if not failing:
        return CheckResult(
            Outcome.PASS,
            f"hypothesis: no counterexample in {calls[0]} examples: {what}",
            data={"examples": calls[0]},
        )
    args, _ = failing[-1]
    why = _verdict(prop, args, may_return_none)
    if why is None or why is _REFUSED:
        return CheckResult(
            Outcome.UNKNOWN,
            f"hypothesis: a falsifying example did not reproduce: {what}",
        )
    cx = (
        describe(*args)
        if describe
        else {f"arg{i}": _plain(a) for i, a in enumerate(args)}
    )
    return CheckResult(
        Outcome.FAIL,
        f"hypothesis: falsified (re-checked; the property {why}) after {calls[0]} "
        f"examples: {what}",
        counterexample=cx,
        data={"failure": why},
    )


def _plain(x: Any) -> Any:
    return x.tolist() if hasattr(x, "tolist") else x


def compare(
    what: str,
    actual: Any,
    expected: Any,
    *,
    rtol: float,
    atol: float,
    inputs: Mapping[str, Any] | None = None,
) -> CheckResult:
    """Two routes to the same numbers: PASS within ``rtol``/``atol``, else FAIL.

    The FAIL's counterexample is the worst entry (both values, and ``inputs``).
    """
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    err = np.abs(a - e)
    bound = atol + rtol * np.abs(e)
    ok = bool(np.all(err <= bound))
    worst = int(np.argmax(err - bound)) if err.size else 0
    max_err = float(err.max()) if err.size else 0.0
    data = {"max_abs_error": max_err, "rtol": rtol, "atol": atol, "n": int(err.size)}
    if ok:
        return CheckResult(
            Outcome.PASS,
            f"{what}: {err.size} values agree, max |error| {max_err:.2e} "
            f"(rtol {rtol:g}, atol {atol:g}, float64)",
            data=data,
        )
    cx = {
        "index": worst,
        "actual": float(a.flat[worst]),
        "expected": float(e.flat[worst]),
        **(inputs or {}),
    }
    return CheckResult(
        Outcome.FAIL,
        f"{what}: disagree by {max_err:.3g} (rtol {rtol:g}, atol {atol:g}, float64)",
        counterexample=cx,
        data=data,
    )


def sympy_identity(
    difference: Any,
    *,
    what: str,
    points: Callable[[], Any] | None = None,
    tries: int = 8,
) -> CheckResult:
    """An exact identity ``difference == 0`` in SymPy.

    PASS when ``sympy.simplify`` reduces every entry to 0. Otherwise the entries are
    evaluated at the substitutions ``points()`` yields (exact rationals; the value at 50
    digits): a nonzero value is a FAIL with that point as the counterexample; if none is
    found the outcome is UNKNOWN (simplify is incomplete; it is never a pass).

    Args:
        difference: a SymPy expression or a list of them.
        what: the identity in words.
        points: a callable returning an iterable of ``{symbol: value}`` substitutions.
        tries: how many of the points to try.
    """
    import sympy as sp

    entries = (
        list(difference) if isinstance(difference, (list, tuple)) else [difference]
    )
    if all(sp.simplify(e) == 0 for e in entries):
        return CheckResult(Outcome.PASS, f"sympy: {what} (simplifies to 0)")
    for i, point in enumerate(points() if points else ()):
        if i >= tries:
            break
        for j, e in enumerate(entries):
            val = sp.N(e.xreplace(point), 50)
            if val.is_number and abs(val) > sp.Float("1e-30"):
                cx = {str(k): str(v) for k, v in point.items()}
                cx["entry"] = j
                cx["difference"] = str(sp.N(val, 15))
                return CheckResult(
                    Outcome.FAIL,
                    f"sympy: {what} is false: nonzero at an exact point (50 digits)",
                    counterexample=cx,
                )
    return CheckResult(
        Outcome.UNKNOWN, f"sympy could not simplify, and no point refutes: {what}"
    )
