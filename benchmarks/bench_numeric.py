"""Benchmark of the numeric core at vocabulary scale (ratios within one run, CPU).

Times, on ``[rows, V]`` float32 logits and behavior log-probs:

* ``jax full``: :func:`theorycheck.numeric.token_stats` with ``parts=("full",)``:
  full-vocabulary KL and TV, binary KL/TV, the exact Ḋ for KL and TV (local and global
  terms), the ratio, and every mask of those (PPO, DPPO binary KL/TV, predictive KL/TV);
* ``jax all``: the same plus top-K D, the three top-K estimators, second order, radius;
* ``numpy naive`` (whole-array ops; timed on at most 512 rows and scaled linearly, to
  bound its memory) and ``numpy chunked`` (16-row blocks, in-place): the same quantities
  as ``jax full``, checked against it;
* ``log-softmax``: one bare log-softmax pass over the same logits (whole-array jit and
  ``lax.map`` over row blocks; the faster is the baseline);
* ``top-K``: :func:`theorycheck.numeric.topk_predict` (K = 20, O(K) per row, from the
  engine's top-K behavior and the trainer's policy log-probs) against the
  full-vocabulary KL D + Ḋ from logits.

Usage::

    python benchmarks/bench_numeric.py             # [2048, 49152] and [2048, 151936]
    python benchmarks/bench_numeric.py --rows 64 --vocab 4096 --repeats 2   # quick
    python benchmarks/bench_numeric.py --scale         # once: [8192, 151936], peak RSS

Prints a markdown table; each time is the median over ``--repeats`` runs after warm-up.
With ``--json-out PATH`` it also writes the measurements, the same-run ratios with their
targets, and the run's provenance as JSON (``make bench`` writes
``benchmarks/results/bench_numeric.json``; ``--scale --json-out
benchmarks/results/bench_numeric_scale.json`` records the scale check).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import _results
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from theorycheck.numeric import MaskConfig, TopKBehavior, token_stats, topk_predict
from theorycheck.numeric._ddot import full_ddot
from theorycheck.numeric._divergence import full_divergence

DELTA_KL, DELTA_TV, EPS = 0.05, 0.15, 0.2


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def timed(fn, repeats: int) -> tuple[float, object]:
    out = fn()
    jax.block_until_ready(out)  # warm-up (and compile)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def make_inputs(rows: int, vocab: int, seed: int = 0, block: int = 8):
    """Logits, behavior log-probs (a perturbed softmax), sampled tokens, advantages.

    Generated row block by row block inside one jit, so no full-size temporaries.
    """

    @jax.jit
    def gen(key):
        keys = jr.split(key, rows // block)

        def one(k):
            k1, k2, k3 = jr.split(k, 3)
            z = 3.0 * jr.normal(k1, (block, vocab), jnp.float32)
            b = jax.nn.log_softmax(z + 0.5 * jr.normal(k2, (block, vocab), jnp.float32))
            s = jr.categorical(k3, b, axis=-1)
            return z, b, s

        z, b, s = jax.lax.map(one, keys)
        return z.reshape(rows, vocab), b.reshape(rows, vocab), s.reshape(rows)

    z, b, s = gen(jr.key(seed))
    adv = jr.normal(jr.key(seed + 1), (rows,), jnp.float32)
    return z, b, s.astype(jnp.int32), adv


def numpy_stats(z, b, k, adv):
    """The ``jax full`` quantities with whole-array numpy ops (naive)."""
    m = z.max(1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(1, keepdims=True))
    pi, mu = np.exp(logp), np.exp(b)
    rows = np.arange(z.shape[0])
    lp_k, lm_k = logp[rows, k], b[rows, k]
    p_k, q_k = pi[rows, k], mu[rows, k]
    out = {"kl": (mu * (b - logp)).sum(1), "tv": 0.5 * np.abs(mu - pi).sum(1)}
    out["ratio"] = np.exp(lp_k - lm_k)
    out["binary_tv"] = np.abs(q_k - p_k)
    out["binary_kl"] = q_k * (lm_k - lp_k) + (1 - q_k) * (
        np.log1p(-q_k) - np.log1p(-p_k)
    )
    out["ddot_kl_full"] = (p_k - q_k) + (pi * (mu - pi)).sum(1)
    s = np.sign(pi - mu)
    s_bar = (s * pi).sum(1)
    out["ddot_tv_full"] = 0.5 * p_k * (s[rows, k] - s_bar) - 0.5 * (
        pi * pi * (s - s_bar[:, None])
    ).sum(1)
    _masks(out, adv)
    return out


def numpy_chunked_stats(z, b, k, adv, rows: int = 16):
    """The same, 16 rows at a time with in-place temporaries (one core)."""
    n, v = z.shape
    names = (
        "kl",
        "tv",
        "ratio",
        "binary_tv",
        "binary_kl",
        "ddot_kl_full",
        "ddot_tv_full",
    )
    out = {name: np.empty(n, np.float32) for name in names}
    e = np.empty((rows, v), np.float32)
    mu = np.empty((rows, v), np.float32)
    t = np.empty((rows, v), np.float32)
    for i in range(0, n, rows):
        zb, bb, kb = z[i : i + rows], b[i : i + rows], k[i : i + rows]
        r = zb.shape[0]
        ee, mm, tt = e[:r], mu[:r], t[:r]
        lse = zb.max(1)
        np.subtract(zb, lse[:, None], out=ee)
        lse = lse + np.log(np.exp(ee, out=tt).sum(1))
        np.subtract(zb, lse[:, None], out=ee)  # ee = log pi
        np.exp(bb, out=mm)  # mm = mu
        np.subtract(bb, ee, out=tt)
        out["kl"][i : i + r] = np.einsum("ij,ij->i", mm, tt)
        np.exp(ee, out=ee)  # ee = pi
        ar = np.arange(r)
        p_k, q_k = ee[ar, kb], mm[ar, kb]
        lp_k, lm_k = zb[ar, kb] - lse, bb[ar, kb]
        np.subtract(mm, ee, out=tt)  # tt = mu - pi
        glob = np.einsum("ij,ij->i", ee, tt)
        out["ddot_kl_full"][i : i + r] = (p_k - q_k) + glob
        np.abs(tt, out=mm)
        out["tv"][i : i + r] = 0.5 * mm.sum(1)
        np.sign(tt, out=tt)
        np.negative(tt, out=tt)  # tt = s = sign(pi - mu)
        s_bar = np.einsum("ij,ij->i", tt, ee)
        s_k = tt[ar, kb]
        np.subtract(tt, s_bar[:, None], out=tt)
        np.multiply(tt, ee, out=tt)
        out["ddot_tv_full"][i : i + r] = 0.5 * p_k * (s_k - s_bar) - 0.5 * np.einsum(
            "ij,ij->i", tt, ee
        )
        out["ratio"][i : i + r] = np.exp(lp_k - lm_k)
        out["binary_tv"][i : i + r] = np.abs(q_k - p_k)
        out["binary_kl"][i : i + r] = q_k * (lm_k - lp_k) + (1 - q_k) * (
            np.log1p(-q_k) - np.log1p(-p_k)
        )
    _masks(out, adv)
    return out


def _masks(out, adv):
    r = out["ratio"]
    up, down = (adv > 0) & (r > 1), (adv < 0) & (r < 1)
    out["mask_ppo"] = ~(((adv > 0) & (r > 1 + EPS)) | ((adv < 0) & (r < 1 - EPS)))
    out["mask_dppo_binary_kl"] = ~((out["binary_kl"] > DELTA_KL) & (up | down))
    out["mask_dppo_binary_tv"] = ~((out["binary_tv"] > DELTA_TV) & (up | down))
    out["mask_pred_kl_full"] = ~(
        (out["kl"] > DELTA_KL) & (adv * out["ddot_kl_full"] > 0)
    )
    out["mask_pred_tv_full"] = ~(
        (out["tv"] > DELTA_TV) & (adv * out["ddot_tv_full"] > 0)
    )


def log_softmax_fns(block: int):
    whole = jax.jit(lambda z: jax.nn.log_softmax(z, axis=-1))

    @jax.jit
    def blocked(z):
        n, v = z.shape
        out = jax.lax.map(
            lambda x: jax.nn.log_softmax(x, axis=-1), z.reshape(n // block, block, v)
        )
        return out.reshape(n, v)

    return whole, blocked


def full_kl_fn(block: int):
    """Full-vocabulary KL D + exact Ḋ from logits, row-blocked (the top-K reference)."""

    @jax.jit
    def f(b, z, k):
        n, v = z.shape

        def rows(a):
            logp = jax.nn.log_softmax(a[1], axis=-1)
            return full_divergence(a[0], logp, "kl"), full_ddot(
                a[0], logp, a[2], "kl"
            ).ddot

        xs = (b.reshape(-1, block, v), z.reshape(-1, block, v), k.reshape(-1, block))
        d, dd = jax.lax.map(rows, xs)
        return d.reshape(n), dd.reshape(n)

    return f


def max_rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / (np.abs(b) + 1e-6)))


def bench_shape(rows: int, vocab: int, repeats: int, block: int, topk: int) -> dict:
    z, b, k, adv = make_inputs(rows, vocab)
    zn, bn, kn, an = (np.asarray(x) for x in (z, b, k, adv))  # zero-copy CPU views
    cfg = MaskConfig(
        topk=topk, delta_kl=DELTA_KL, delta_tv=DELTA_TV, eps_low=EPS, eps_high=EPS
    )
    res = {"shape": f"[{rows}, {vocab}]", "rows": rows, "vocab": vocab}
    res["jax full"], jfull = timed(
        lambda: token_stats(
            b, z, k, adv, config=cfg, block_rows=block, check=False, parts=("full",)
        ),
        repeats,
    )
    res["jax all"], _ = timed(
        lambda: token_stats(b, z, k, adv, config=cfg, block_rows=block, check=False),
        repeats,
    )
    whole, blocked = log_softmax_fns(block)
    res["log-softmax (whole)"], _ = timed(lambda: whole(z), repeats)
    res["log-softmax (blocked)"], _ = timed(lambda: blocked(z), repeats)
    res["numpy chunked"], nch = timed(
        lambda: numpy_chunked_stats(zn, bn, kn, an), repeats
    )
    # naive numpy keeps ~6 full-size temporaries: time it on at most 512 rows and
    # scale linearly (rows are independent), to bound the peak memory
    sub = min(rows, 512)
    t_naive, nnv = timed(
        lambda: numpy_stats(zn[:sub], bn[:sub], kn[:sub], an[:sub]), max(1, repeats - 1)
    )
    res["numpy naive"] = t_naive * rows / sub
    res["numpy naive rows timed"] = sub
    err = 0.0
    for name in ("kl", "tv", "binary_kl", "ddot_kl_full", "ddot_tv_full"):
        err = max(
            err,
            max_rel_err(nch[name], jfull[name]),
            max_rel_err(nnv[name], np.asarray(jfull[name])[:sub]),
        )
    mask_diff = sum(
        int(np.sum(np.asarray(jfull[name]).astype(bool) != nch[name]))
        for name in nch
        if name.startswith("mask")
    )
    res["max rel err numpy vs jax"] = err
    res["mask disagreements"] = mask_diff
    # top-K: engine top-K behavior and trainer log-probs exist before the step
    vals, ids = jax.lax.top_k(b, topk)
    tb = TopKBehavior(vals, ids, jnp.take_along_axis(b, k[:, None], -1)[:, 0])
    logp = blocked(z)
    full = full_kl_fn(block)
    res["full-vocab KL D+Ddot"], fref = timed(lambda: full(b, z, k), repeats)
    for est in ("topk_aggregated", "topk_uniform"):
        res[f"top-K {est[5:]}"], _ = timed(
            lambda est=est: topk_predict(
                tb, logp, k, kind="kl", estimator=est, check=False
            ),
            repeats,
        )
    res["peak RSS GB"] = peak_rss_gb()
    return res


def scale_check(rows: int, vocab: int, block: int) -> dict:
    t = time.perf_counter()
    z, b, k, adv = make_inputs(rows, vocab)
    jax.block_until_ready((z, b))
    gen = time.perf_counter() - t
    t = time.perf_counter()
    out = jax.block_until_ready(token_stats(b, z, k, adv, block_rows=block))
    took = time.perf_counter() - t
    finite = all(bool(jnp.all(jnp.isfinite(x) | jnp.isinf(x))) for x in out.values())
    res = {
        "rows": rows,
        "vocab": vocab,
        "inputs_gb": 2 * z.nbytes / 1e9,
        "generate_s": gen,
        "token_stats_first_call_s": took,
        "nan_free": finite,
        "peak_rss_gb": peak_rss_gb(),
    }
    print(
        f"scale check [{rows}, {vocab}] float32: inputs {res['inputs_gb']:.1f} GB, "
        f"generated in {gen:.1f} s; token_stats (checks + all parts, first call "
        f"incl. compile) {took:.1f} s; outputs NaN-free: {finite}; "
        f"peak RSS {res['peak_rss_gb']:.1f} GB"
    )
    return res


LOG_SOFTMAX = ("log-softmax (whole)", "log-softmax (blocked)")
NOT_SECONDS = ("max rel err numpy vs jax", "mask disagreements", "peak RSS GB")
NOT_SECONDS += ("numpy naive rows timed",)
# (name, numerator, denominators (the fastest is used), target, vocab it applies to)
RATIOS = [
    ("numpy chunked / jax full", "numpy chunked", ("jax full",), (">=", 1.5), None),
    ("numpy naive / jax full", "numpy naive", ("jax full",), None, None),
    ("jax full / best log-softmax", "jax full", LOG_SOFTMAX, ("<=", 1.5), None),
    ("jax all / best log-softmax", "jax all", LOG_SOFTMAX, None, None),
    (
        "full-vocab KL D+Ddot / top-K aggregated",
        "full-vocab KL D+Ddot",
        ("top-K aggregated",),
        (">=", 100.0),
        151936,
    ),
    (
        "full-vocab KL D+Ddot / top-K uniform",
        "full-vocab KL D+Ddot",
        ("top-K uniform",),
        (">=", 100.0),
        151936,
    ),
]


def ratios(results: list[dict]) -> list[dict]:
    """Every same-run ratio per shape, with its target and whether it is met."""
    out = []
    for name, num, dens, tgt, vocab in RATIOS:
        values = [r[num] / min(r[d] for d in dens) for r in results]
        target = None if tgt is None else _results.target(*tgt)
        out.append(
            {
                "name": name,
                "numerator": num,
                "denominators": list(dens),
                "values": values,
                "target": target,
                "target_vocab": vocab,
                "met": [
                    _results.met(v, target)
                    if vocab is None or r["vocab"] == vocab
                    else None
                    for v, r in zip(values, results)
                ],
            }
        )
    return out


def print_tables(results: list[dict], table: list[dict]) -> None:
    cols = [c for c in results[0] if c not in ("shape", "rows", "vocab")]
    print("| quantity | " + " | ".join(r["shape"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for c in cols:
        cells = [
            f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for r in results
        ]
        unit = " (s)" if c not in NOT_SECONDS else ""
        print(f"| {c}{unit} | " + " | ".join(cells) + " |")
    print()
    print("| ratio | " + " | ".join(r["shape"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for row in table:
        name = row["name"]
        tgt, vocab = row["target"], row["target_vocab"]
        if tgt is not None:
            where = "" if vocab is None else f" at V = {vocab}"
            name += f" (target {tgt['op']} {tgt['bound']:g}{where})"
        print(f"| {name} | " + " | ".join(f"{v:.3g}" for v in row["values"]) + " |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--vocab", type=int, nargs="+", default=[49152, 151936])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--block", type=int, default=4)
    p.add_argument("--topk", type=int, default=20)
    p.add_argument(
        "--scale", action="store_true", help="run only the [8192, 151936] scale check"
    )
    p.add_argument(
        "--json-out",
        metavar="PATH",
        help="also write the measurements and their provenance as JSON to PATH",
    )
    args = p.parse_args(argv)
    doc = _results.start("bench_numeric_scale" if args.scale else "bench_numeric", args)
    print(f"jax {jax.__version__}, devices {jax.devices()}, numpy {np.__version__}")
    if args.scale:
        doc["scale_check"] = scale_check(8192, 151936, args.block)
    else:
        results = [
            bench_shape(args.rows, v, args.repeats, args.block, args.topk)
            for v in args.vocab
        ]
        table = ratios(results)
        print_tables(results, table)
        units = {c: "" if c in NOT_SECONDS else "s" for c in results[0]}
        for c in ("shape", "rows", "vocab"):
            del units[c]
        units["peak RSS GB"] = "GB"
        doc.update(shapes=results, units=units, ratios=table)
    if args.json_out:
        _results.write(args.json_out, _results.finish(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
