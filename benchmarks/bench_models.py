"""Benchmark of the JAX causal LM on the embedded SmolLM2-135M (CPU, float32).

Measures, in one run: load + dequantise time and peak RSS after loading; compile time
of the forward pass with ``lax.scan`` over stacked layers against an unrolled Python
loop over the same blocks (the baseline); forward tokens/s at batch x length; the
JVP-to-forward and VJP-to-forward cost ratios. Timings are medians of ``--repeats``
runs; on a shared machine read the ratios, not the absolute numbers.

Usage: python benchmarks/bench_models.py [--batch 8] [--seq 256] [--repeats 5]
[--json-out PATH]. With ``--json-out`` it also writes every measurement, the same-run
ratios, the targets and the run's provenance as JSON (``make bench`` writes
``benchmarks/results/bench_models.json``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import _results

# (quantity or ratio, operator, bound): the float32 model in under 2 GB, the lax.scan
# forward compiled in under 10 s, a JVP in all parameters at most 3x a forward pass
TARGETS = {
    "rss_after_load_gb": ("<", 2.0),
    "compile_scan_s": ("<", 10.0),
    "jvp_all_over_forward": ("<=", 3.0),
}
# name: (numerator, denominator), both quantities of the same run
RATIOS = {
    "compile_unrolled_over_scan": ("compile_unrolled_s", "compile_scan_s"),
    "forward_gflops_over_matmul": ("forward_gflops", "matmul_gflops"),
    "jvp_all_over_forward": ("jvp_all_s", "forward_s"),
    "jvp_top_over_forward": ("jvp_top_s", "forward_s"),
    "vjp_over_forward": ("grad_s", "small_forward_s"),
}


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def _timed(fn, repeats: int) -> tuple[float, float]:
    """(first call incl. compile, median of the following calls) in seconds."""
    import jax

    t = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t)
    return first, statistics.median(runs)


def _forward_flops(cfg, batch: int, seq: int) -> float:
    """Matmul FLOPs of one forward pass (projections, MLP, causal attention, head)."""
    d, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_heads * hd, cfg.num_kv_heads * hd
    per_token = d * (q + 2 * kv) + q * d + 3 * d * f
    attention = 2 * q * seq * (seq + 1) / 2  # scores and weighted sum, causal half
    per_seq = cfg.num_layers * (per_token * seq + attention) + d * cfg.vocab_size * seq
    return 2.0 * batch * per_seq


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument(
        "--grad-batch",
        type=int,
        default=2,
        help="batch for the VJP (its saved activations grow with it)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--json-out",
        metavar="PATH",
        help="also write the measurements and their provenance as JSON to PATH",
    )
    args = parser.parse_args(argv)
    doc = _results.start("bench_models", args)

    t = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np

    from theorycheck.models import (
        count_params,
        forward,
        hidden_states,
        load_model,
        logits_from_hidden,
        split_params,
    )
    from theorycheck.models._families import FAMILIES
    from theorycheck.models._transformer import (
        embed,
        head,
        positions_and_mask,
    )

    cfg, params, _ = load_model("smollm2")
    load_s = time.perf_counter() - t
    rss_load = _rss_gb()
    measured = {"load_s": load_s, "parameters": count_params(params)}
    measured["rss_after_load_gb"] = rss_load
    rows = [
        ("load + sha256 + dequantise (s)", f"{load_s:.1f}"),
        ("parameters", f"{count_params(params):,}"),
        ("peak RSS after loading, float32 (GB)", f"{rss_load:.2f}"),
    ]

    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg.vocab_size, (args.batch, args.seq)).astype(np.int32)

    def unrolled(p, tokens):
        b, s = tokens.shape
        positions, mask = positions_and_mask(None, b, s)
        x = embed(p, cfg, tokens, positions)
        for i in range(cfg.num_layers):
            layer = jax.tree_util.tree_map(lambda a, i=i: a[i], p["blocks"])
            x, _ = FAMILIES[cfg.family].block(cfg, layer, x, positions, mask, None)
        return head(p, cfg, x)

    scan_fwd = jax.jit(lambda p, x: forward(p, cfg, x))
    unrolled_fwd = jax.jit(unrolled)
    for name, key, fn in (
        ("lax.scan", "scan", scan_fwd),
        ("unrolled loop", "unrolled", unrolled_fwd),
    ):
        t = time.perf_counter()
        fn.lower(params, ids).compile()
        took = measured[f"compile_{key}_s"] = time.perf_counter() - t
        rows.append((f"compile forward, {name} (s)", f"{took:.1f}"))
    np.testing.assert_allclose(
        np.asarray(scan_fwd(params, ids)[0, :4]),
        np.asarray(unrolled_fwd(params, ids)[0, :4]),
        atol=1e-4,
    )

    _, fwd_s = _timed(lambda: scan_fwd(params, ids), args.repeats)
    tokens = args.batch * args.seq
    measured.update(forward_s=fwd_s, forward_tokens_per_s=tokens / fwd_s)
    rows.append((f"forward {args.batch} x {args.seq} (s)", f"{fwd_s:.3f}"))
    rows.append(("forward tokens/s", f"{tokens / fwd_s:,.0f}"))
    # baseline in the same run: one large float32 matmul, to read the forward pass as
    # a fraction of what this (shared) CPU delivers at the moment
    a = jnp.asarray(rng.standard_normal((tokens, cfg.hidden_size)), jnp.float32)
    w = jnp.asarray(
        rng.standard_normal((cfg.hidden_size, 8 * cfg.hidden_size)), jnp.float32
    )
    matmul = jax.jit(jnp.matmul)
    _, mm_s = _timed(lambda: matmul(a, w), args.repeats)
    mm_gflops = 2 * a.shape[0] * a.shape[1] * w.shape[1] / mm_s / 1e9
    fwd_gflops = _forward_flops(cfg, args.batch, args.seq) / fwd_s / 1e9
    measured.update(matmul_s=mm_s, matmul_gflops=mm_gflops, forward_gflops=fwd_gflops)
    rows.append(("baseline: plain matmul GFLOP/s", f"{mm_gflops:.1f}"))
    rows.append(
        (
            "forward GFLOP/s / matmul GFLOP/s",
            f"{fwd_gflops:.1f} / {mm_gflops:.1f} = {fwd_gflops / mm_gflops:.2f}",
        )
    )

    tangent = jax.tree_util.tree_map(
        lambda a: jnp.asarray(rng.standard_normal(a.shape), a.dtype), params
    )
    jvp = jax.jit(lambda p, t, x: jax.jvp(lambda q: forward(q, cfg, x), (p,), (t,)))
    _, jvp_s = _timed(lambda t=tangent: jvp(params, t, ids), args.repeats)
    measured["jvp_all_s"] = jvp_s
    rows.append(("JVP (all parameters) / forward", f"{jvp_s / fwd_s:.2f}x"))

    trainable, frozen = split_params(params, cfg, 2)
    hidden = hidden_states(params, cfg, ids, num_blocks=cfg.num_layers - 2)
    t_top = jax.tree_util.tree_map(
        lambda a: jnp.asarray(rng.standard_normal(a.shape), a.dtype), trainable
    )
    # frozen weights are jit arguments too: closed over, XLA would constant-fold them
    jvp_top = jax.jit(
        lambda p, f, t, h: jax.jvp(
            lambda q: logits_from_hidden(q, f, cfg, h), (p,), (t,)
        )
    )
    _, top_s = _timed(lambda: jvp_top(trainable, frozen, t_top, hidden), args.repeats)
    measured["jvp_top_s"] = top_s
    rows.append(
        ("JVP (last 2 blocks, trunk computed once) / forward", f"{top_s / fwd_s:.2f}x")
    )

    small = ids[: args.grad_batch]

    def loss(p, x):
        logp = jax.nn.log_softmax(forward(p, cfg, x)[:, :-1])
        return -jnp.mean(jnp.take_along_axis(logp, x[:, 1:, None], axis=-1))

    grad = jax.jit(jax.grad(loss))
    _, small_fwd_s = _timed(lambda: scan_fwd(params, small), args.repeats)
    _, grad_s = _timed(lambda: grad(params, small), max(2, args.repeats // 2))
    measured.update(small_forward_s=small_fwd_s, grad_s=grad_s)
    rows.append(
        (
            f"VJP (grad of mean NLL) / forward, {args.grad_batch} x {args.seq}",
            f"{grad_s / small_fwd_s:.2f}x",
        )
    )
    rows.append(("peak RSS over the whole run (GB)", f"{_rss_gb():.2f}"))
    measured["peak_rss_gb"] = _rss_gb()

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"SmolLM2-135M, float32, {jax.devices()[0].platform}, {os.cpu_count()} "
        f"cores, jax {jax.__version__}, load average at the end: {load}"
    )
    print("| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    if args.json_out:
        ratios = _ratios(measured)
        doc.update(quantities=measured, ratios=ratios)
        doc["targets"] = _targets(measured | ratios)
        _results.write(args.json_out, _results.finish(doc))


def _ratios(measured: dict) -> dict:
    return {name: measured[n] / measured[d] for name, (n, d) in RATIOS.items()}


def _targets(values: dict) -> dict:
    out = {}
    for name, (op, bound) in TARGETS.items():
        tgt = _results.target(op, bound)
        out[name] = {"target": tgt, "met": _results.met(values[name], tgt)}
    return out


if __name__ == "__main__":
    main()
