"""Vocabulary-scale logit Hessian numerics at V = 151936 (Qwen vocabulary).

Measures, in one run (ratios against baselines of the same run, never absolute claims):

* one Hessian-vector product vs one gradient (baseline) of the same loss;
* ``min_eigenvalue`` by Lanczos (iterations to converge, residual, wall time including
  compile) vs the exact O(V) closed form for the sampled-token family, and their
  agreement;
* three points: an interior point, a near-boundary point (pi_k ~ 1e-6, logits in
  [-30, 30]) for the importance-sampling surrogate -adv * pi_k / mu_k (isolated
  negative eigenvalue), and cross-entropy (PSD, clustered spectrum near 0: hard case).

Usage: ``python benchmarks/bench_hessian.py [--vocab V] [--repeats N] [--json]
[--json-out PATH]``. ``--json`` prints the results document (measurements, the target
on the cold first call, provenance) to stdout instead of the table; ``--json-out PATH``
also writes it to PATH (``make bench``: ``benchmarks/results/bench_hessian.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import _results
import jax
import jax.numpy as jnp
import numpy as np

from theorycheck.numeric._curvature_sampled import sampled_token_min_eigenvalue
from theorycheck.numeric._hessian import hvp_fn, min_eigenvalue

# a first min_eigenvalue call at V = 151936, compile included, in under 5 s
COLD_TARGET_S, COLD_TARGET_VOCAB = 5.0, 151936


def is_surrogate(z, sampled, adv, behavior_logp):
    return -adv * jnp.exp(jax.nn.log_softmax(z)[sampled] - behavior_logp[sampled])


def cross_entropy(z, sampled):
    return -jax.nn.log_softmax(z)[sampled]


def _median_time(fn, repeats):
    jax.block_until_ready(fn())  # warm-up / compile
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def _points(size, rng):
    interior = rng.standard_normal(size) * 2.0
    boundary = np.clip(rng.standard_normal(size) * 6.0, -30.0, 30.0)
    others = np.log(np.sum(np.exp(np.delete(boundary, 7))))
    boundary[7] = others + np.log(1e-6)  # pi_k = 1e-6 / (1 + 1e-6)
    return {"interior": interior, "boundary": boundary}


def _measure(point, z, loss_name, k, behavior_logp, rng, repeats):
    """One row: HVP vs gradient, Lanczos vs closed form, at one point."""
    size = z.shape[0]
    p = _softmax(z)
    if loss_name == "is_surrogate":
        loss, inputs = is_surrogate, {"adv": 1.0, "behavior_logp": behavior_logp}
        r = p[k] / np.exp(behavior_logp[k])
        f1 = f2 = -r  # f(x) = -adv exp(x) / mu_k
    else:
        loss, inputs = cross_entropy, {}
        f1, f2 = -1.0, 0.0  # f(x) = -x
    zj = jnp.asarray(z)
    u = jnp.asarray(rng.standard_normal(size))
    hvp = hvp_fn(loss, **inputs)
    t_hvp = _median_time(lambda: hvp(zj, k, u), repeats)
    grad = jax.jit(jax.grad(lambda y: loss(y, k, **inputs)))
    t_grad = _median_time(lambda: grad(zj), repeats)

    def fresh(y, s, **kw):  # a new function object: the first call compiles
        return loss(y, s, **kw)

    t = time.perf_counter()
    res = min_eigenvalue(fresh, z, k, inputs=inputs)
    t_first = time.perf_counter() - t
    t_again = _median_time(lambda: min_eigenvalue(fresh, z, k, inputs=inputs).value, 2)
    t = time.perf_counter()
    closed = sampled_token_min_eigenvalue(f1, f2, p, k)
    t_closed = time.perf_counter() - t
    return {
        "point": point,
        "loss": loss_name,
        "pi_k": float(p[k]),
        "hvp_s": t_hvp,
        "hvp_over_grad": t_hvp / t_grad,
        "lanczos_iters": res.num_iters,
        "lanczos_value": res.value,
        "lanczos_residual": res.residual,
        "closed_form_value": closed,
        "abs_diff": abs(res.value - closed),
        "min_eig_first_call_s": t_first,
        "min_eig_warm_s": t_again,
        "closed_form_s": t_closed,
        "lanczos_over_closed": t_again / t_closed,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--json-out",
        metavar="PATH",
        help="also write the measurements and their provenance as JSON to PATH",
    )
    args = parser.parse_args(argv)
    doc = _results.start("bench_hessian", args)
    jax.config.update("jax_enable_x64", True)
    size, k = args.vocab, 7
    rng = np.random.default_rng(0)
    behavior_logp = np.log(_softmax(rng.standard_normal(size) * 2.0))
    points = _points(size, rng)
    jnp.zeros(1).block_until_ready()  # backend start-up is not part of the timing
    t = time.perf_counter()
    cold = min_eigenvalue(
        is_surrogate,
        points["boundary"],
        k,
        inputs={"adv": 1.0, "behavior_logp": behavior_logp},
    )
    t_cold = time.perf_counter() - t
    rows = [
        _measure(point, z, loss_name, k, behavior_logp, rng, args.repeats)
        for point, z in points.items()
        for loss_name in ("is_surrogate", "cross_entropy")
    ]
    cold_row = {"value": cold.value, "iters": cold.num_iters, "seconds": t_cold}
    cold_row["target"] = _results.target("<", COLD_TARGET_S)
    cold_row["target_vocab"] = COLD_TARGET_VOCAB
    cold_row["met"] = (
        _results.met(t_cold, cold_row["target"]) if size == COLD_TARGET_VOCAB else None
    )
    doc.update(vocab=size, k=k, cold_min_eigenvalue=cold_row, rows=rows)
    _results.finish(doc)
    if args.json_out:
        _results.write(args.json_out, doc)
    if args.json:
        print(json.dumps(doc))
        return 0
    print(f"V = {size}, jax {jax.__version__}, {jax.devices()[0].platform}")
    print(
        f"cold min_eigenvalue (IS surrogate, boundary point, first call in the process,"
        f" compile included): {t_cold:.2f} s, {cold.num_iters} Lanczos iterations,"
        f" lambda_min = {cold.value:.6e}"
    )
    head = (
        "| point | loss | pi_k | HVP ms | HVP/grad | iters | Lanczos lambda_min "
        "| closed form | abs diff | residual | first call s | warm s | closed s "
        "| Lanczos/closed |"
    )
    print(head)
    print("|" + "---|" * 14)
    for r in rows:
        print(
            f"| {r['point']} | {r['loss']} | {r['pi_k']:.2e} | {1e3 * r['hvp_s']:.2f} "
            f"| {r['hvp_over_grad']:.2f} | {r['lanczos_iters']} "
            f"| {r['lanczos_value']:.6e} | {r['closed_form_value']:.6e} "
            f"| {r['abs_diff']:.1e} | {r['lanczos_residual']:.1e} "
            f"| {r['min_eig_first_call_s']:.2f} | {r['min_eig_warm_s']:.2f} "
            f"| {r['closed_form_s']:.3f} | {r['lanczos_over_closed']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
