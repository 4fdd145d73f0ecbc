"""Runs the peers' own loss, reduction and correction code on CPU torch against the
registry, and writes the committed report.

    python scripts/peer_check.py --verl DIR --skyrl DIR --trl DIR --stable-rl DIR \\
        [--commit verl=SHA --commit skyrl=SHA ...] [--out docs/peer_check.json]
    python scripts/peer_check.py --render   # docs/peer_check.md from the JSON

Each DIR is a checkout of the peer (its repository root). Nothing of the peers is copied
here: their files are imported from DIR, with small stand-in modules for the package
imports their loss files make (configuration classes, ``masked_sum`` and
``masked_mean``) so that torch, numpy and omegaconf suffice. Per rule the script
evaluates the peer's loss at many (p, q, A) points and at every clip, cap, mask and
clamp boundary (±1e-6 relative), takes the per-token coefficient -d loss / d log pi
by torch autograd, and compares it with the registry's analytic coefficient;
reductions and corrections are compared weight by weight. Needs torch (the CPU build
``torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
JSON_OUT = ROOT / "docs" / "peer_check.json"
MD_OUT = ROOT / "docs" / "peer_check.md"
RTOL, ATOL = 1e-6, 1e-9

# --------------------------------------------------------------------------------------
# loading peer files with stand-in package modules
# --------------------------------------------------------------------------------------


def _module(name, **attrs):
    mod = sys.modules.get(name) or types.ModuleType(name)
    mod.__path__ = getattr(mod, "__path__", [])
    for k, v in attrs.items():
        setattr(mod, k, v)
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_module(parent), child, mod)
    return mod


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class _Cfg:
    """Attribute access plus ``.get`` (what the peers' configs are used for)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def get(self, key, default=None):
        return getattr(self, key, default)

    def __getitem__(self, key):
        return getattr(self, key)

    def __contains__(self, key):
        return key in self.__dict__


def _verl_stubs():
    import torch

    def masked_sum(values, mask, axis=None):
        return (values * mask).sum() if axis is None else (values * mask).sum(axis)

    def masked_mean(values, mask, axis=None):
        s = mask.sum() if axis is None else mask.sum(axis)
        return masked_sum(values, mask, axis) / (s + 1e-8)

    actor = type("ActorConfig", (_Cfg,), {})
    algo = type("AlgoConfig", (_Cfg,), {})
    for name in list(sys.modules):
        if name == "verl" or name.startswith("verl."):
            del sys.modules[name]
    _module(
        "verl.utils.torch_functional", masked_sum=masked_sum, masked_mean=masked_mean
    )
    _module("verl.utils", as_torch_index=None, group_mean_std=None)
    _module("verl.utils.import_utils", deprecated=lambda *a, **k: lambda f: f)
    _module("verl.trainer.config", AlgoConfig=algo)
    _module("verl.trainer.config.algorithm", RolloutCorrectionConfig=_Cfg)
    _module("verl.workers.config", ActorConfig=actor)
    _module("verl.workers.config.actor", PolicyLossConfig=_Cfg)
    _module("verl.protocol", DataProto=object)
    torch.set_default_dtype(torch.float64)
    return actor


def _commit(path, given):
    if given:
        return given
    try:
        return subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --------------------------------------------------------------------------------------
# points
# --------------------------------------------------------------------------------------


def _points(boundaries=(), mask_pairs=(), n=400, seed=0):
    """(p, q, adv): random points, then 1e-6 either side of every ratio boundary."""
    import numpy as np

    rng = np.random.default_rng(seed)
    q = np.exp(rng.uniform(np.log(1e-4), 0, n))
    p = np.clip(q * np.exp(rng.normal(0, 1.0, n)), 1e-9, 1 - 1e-9)
    pairs = [(float(a), float(b)) for a, b in zip(p, q)]
    for b in boundaries:
        for side in (1 - 1e-6, 1 + 1e-6):
            for qq in (1e-7, 0.05, 0.15):
                if 0 < b * side * qq < 1:
                    pairs.append((b * side * qq, qq))
    pairs += list(mask_pairs)
    p = np.array([a for a, _ in pairs for _ in (0, 1)])
    q = np.array([b for _, b in pairs for _ in (0, 1)])
    adv = np.array([a for _ in pairs for a in (1.3, -0.7)])
    return p, q, adv


def _mask_pairs(kind, delta):
    from theorycheck.numeric import binary_kl

    out = []
    for q in (0.3, 0.6):
        if kind == "tv":
            for s in (-1, 1):
                for e in (-1e-6, 1e-6):
                    out.append((q + s * (delta + e), q))
            continue
        for lo, hi in ((1e-9, q), (q, 1 - 1e-9)):
            a, b = lo, hi
            for _ in range(200):
                m = 0.5 * (a + b)
                if (float(binary_kl(a, q)) > delta) == (float(binary_kl(m, q)) > delta):
                    a = m
                else:
                    b = m
            x = 0.5 * (a + b)
            out += [(q + (x - q) * (1 - 1e-6), q), (q + (x - q) * (1 + 1e-6), q)]
    return out


def _compare(peer_c, ours_c, p, q, adv, rtol=RTOL):
    import numpy as np

    peer_c, ours_c = np.asarray(peer_c, float), np.asarray(ours_c, float)
    diff = np.abs(peer_c - ours_c)
    bad = diff > ATOL + rtol * np.abs(ours_c)
    out = {
        "points": int(peer_c.size),
        "agree": int((~bad).sum()),
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
    }
    if bad.any():
        i = int(np.argmax(bad))
        out["first_disagreement"] = {
            "p": float(p[i]),
            "q": float(q[i]),
            "adv": float(adv[i]),
            "peer": float(peer_c[i]),
            "registry": float(ours_c[i]),
        }
    return out


def _peer_coefficient(fn, p, q, adv, rows_mean=False, **kw):
    """-d loss / d log pi of a verl-style policy loss, one token per row."""
    import torch

    lp = torch.tensor(np.log(p)[:, None], requires_grad=True)
    lq = torch.tensor(np.log(q)[:, None])
    a = torch.tensor(adv[:, None])
    mask = torch.ones_like(lq)
    loss = fn(lq, lp, a, mask, **kw)[0]
    (g,) = torch.autograd.grad(loss, lp)
    scale = len(p) if rows_mean else 1.0
    return -(g[:, 0].numpy()) * scale


import numpy as np  # noqa: E402  (after the helpers that document their imports)

# --------------------------------------------------------------------------------------
# verl
# --------------------------------------------------------------------------------------


def _verl_rules(core, actor):
    from theorycheck.losses import LOSSES

    pl = _Cfg(
        loss_mode="vanilla",
        dro_beta=0.5,
        clip_cov_ratio=2e-4,
        clip_cov_lb=1e9,
        clip_cov_ub=2e9,
        kl_cov_ratio=0.0,
        ppo_kl_coef=0.1,
    )

    def cfg(lo, hi, c):
        return actor(
            clip_ratio=lo,
            clip_ratio_low=lo,
            clip_ratio_high=hi,
            clip_ratio_c=c,
            policy_loss=pl,
            global_batch_info={},
            tau_pos=1.0,
            tau_neg=1.05,
        )

    cases = [
        ("vanilla", "dual_clip", (0.2, 0.2, 3.0), {"kappa": 3.0}, [0.8, 1.2, 3.0]),
        (
            "dppo_tv",
            "dppo_capped",
            (0.15, 0.15, 3.0),
            {"delta": 0.15, "cap": 3.0},
            [3.0],
        ),
        (
            "dppo_tv",
            "dppo_capped",
            (0.15, 0.15, 1e4),
            {"delta": 0.15, "cap": 1e4},
            [1e4],
        ),
        (
            "dppo_kl",
            "dppo_binary_kl_capped",
            (0.05, 0.05, 1e4),
            {"delta": 0.05, "cap": 1e4},
            [1e4],
        ),
        (
            "gspo",
            "gspo_token",
            (3e-4, 4e-4, 3.0),
            {"eps_low": 3e-4, "eps_high": 4e-4},
            [1 - 3e-4, 1 + 4e-4, math.exp(10)],
        ),
        ("sapo", "sapo", (0.2, 0.2, 3.0), {}, [math.exp(20)]),
        ("cispo", "cispo", (0.2, 0.2, 3.0), {"low": 0.8, "high": 1.2}, [0.8, 1.2]),
        (
            "geo_mean",
            "gmpo",
            (0.4, 0.4, 3.0),
            {"eps_low": 0.4, "eps_high": 0.4},
            [math.exp(-0.4), math.exp(0.4)],
        ),
        ("dro", "dro", (0.2, 0.2, 3.0), {"beta": 0.5}, []),
        ("clip_cov", "clip_cov", (0.2, 0.2, 3.0), {}, [0.8, 1.2]),
    ]
    out = []
    for mode, rule, (lo, hi, c), params, bounds in cases:
        fn = core.POLICY_LOSS_REGISTRY[mode]
        masks = []
        if rule == "dppo_capped":
            masks = _mask_pairs("tv", params["delta"])
        if rule == "dppo_binary_kl_capped":
            masks = _mask_pairs("kl", params["delta"])
        p, q, adv = _points(bounds, masks)
        kw = {"loss_agg_mode": "token-sum", "config": cfg(lo, hi, c)}
        if mode == "geo_mean":
            kw = {"config": cfg(lo, hi, c)}
        # geo_mean averages rows; gspo and sapo force seq-mean-token-mean (1/(1 + 1e-8)
        # per one-token row, then a mean over rows)
        rows_mean = mode in ("geo_mean", "gspo", "sapo")
        peer = _peer_coefficient(fn, p, q, adv, rows_mean=rows_mean, **kw)
        full = {**LOSSES[rule].defaults, **params}
        ours, _ = LOSSES[rule].coefficient(p, q, adv, **full)
        row = _compare(peer, ours, p, q, adv)
        row.update({"peer": f"verl {mode}", "rule": rule, "params": params})
        if rows_mean:
            row["note"] = "verl divides by L + 1e-8 (1e-8 relative at L = 1)"
        out.append(row)
    return out


def _verl_agg(core):
    import torch

    from theorycheck.losses import Reduction, reduction_weights

    rng = np.random.default_rng(1)
    lengths = [7, 0, 3, 5, 1, 0]
    mask = (np.arange(7)[None] < np.array(lengths)[:, None]).astype(float)
    new = {
        "token-mean": Reduction("token_mean"),
        "token-sum": Reduction("token_sum"),
        "seq-mean-token-sum": Reduction("seq_mean_token_sum", count_empty=True),
        "seq-mean-token-mean": Reduction(
            "seq_mean_token_mean", count_empty=True, length_eps=1e-8
        ),
        "seq-mean-token-sum-norm": Reduction(
            "seq_mean_token_sum_norm", count_empty=True
        ),
    }
    out = []
    for scope in ("new engine (global_batch_info)", "local counts (legacy worker)"):
        for mode, red in new.items():
            loss_mat = torch.tensor(rng.normal(size=mask.shape), requires_grad=True)
            m = torch.tensor(mask)
            kw = {}
            if scope.startswith("new"):
                kw = {"batch_num_tokens": m.sum(), "global_batch_size": mask.shape[0]}
            else:
                red = Reduction(red.mode, length_eps=red.length_eps)
            loss = core.agg_loss(loss_mat, m, mode, **kw)
            (g,) = torch.autograd.grad(loss, loss_mat)
            ours = np.asarray(reduction_weights(mask, red))
            row = _compare(g.numpy().ravel(), ours.ravel(), *(np.zeros(mask.size),) * 3)
            label = red.mode + (", empty rows counted" if red.count_empty else "")
            label += ", L + 1e-8" if red.length_eps else ""
            row.update({"peer": f"verl agg_loss {mode}, {scope}", "rule": label})
            out.append(row)
    return out


def _verl_kl(core):
    import torch

    from theorycheck.losses import kl_k1, kl_k2, kl_k3, kl_straight_through

    rng = np.random.default_rng(2)
    lp = rng.normal(-1.0, 1.5, 300)
    ref = lp + rng.normal(0, 2.0, 300)
    ours = {
        "k1": lambda a, b: kl_k1(a, b),
        "k2": lambda a, b: kl_k2(a, b),
        "low_var_kl": lambda a, b: kl_k3(a, b),
        "k1+": lambda a, b: kl_straight_through(a, b, "k1"),
        "k3+": lambda a, b: kl_straight_through(a, b, "k3"),
    }
    import jax

    out = []
    for name, f in ours.items():
        t = torch.tensor(lp, requires_grad=True)
        v = core.kl_penalty(t, torch.tensor(ref), name)
        (g,) = torch.autograd.grad(v.sum(), t)
        val = np.asarray(f(lp, ref))
        grad = np.asarray(jax.grad(lambda x, f=f: f(x, ref).sum())(lp))
        row = _compare(
            np.concatenate([v.detach().numpy(), g.numpy()]),
            np.concatenate([val, grad]),
            *(np.zeros(600),) * 3,
        )
        row.update({"peer": f"verl kl_penalty {name}", "rule": "value and gradient"})
        out.append(row)
    return out


def _verl_corrections(rc):
    import torch

    from theorycheck.losses import reject_kl, tis_sequence, tis_token

    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.3, (40, 12))
    mask = (np.arange(12)[None] < rng.integers(1, 13, 40)[:, None]).astype(float)
    tx, tm = torch.tensor(x), torch.tensor(mask)
    out = []
    for level, ours in (
        ("token", tis_token(x, mask, 2.0)),
        ("sequence", tis_sequence(x, mask, 2.0)),
    ):
        w, _ = rc.compute_rollout_correction_weights(tx, tm, level, 2.0)
        row = _compare(
            (w * tm).numpy().ravel(), ours.weights.ravel(), *(np.zeros(x.size),) * 3
        )
        row.update({"peer": f"verl rollout_is={level}", "rule": f"tis_{level}"})
        out.append(row)
    for opt, est, lvl, thr, upper, lower in (
        ("token_k1", "k1", "token", "0.6_1.4", 1.4, 0.6),
        ("token_k2", "k2", "token", 0.02, 0.02, None),
        ("token_k3", "k3", "token", 0.02, 0.02, None),
        ("seq_sum_k3", "k3", "seq_sum", 0.1, 0.1, None),
        ("seq_mean_k2", "k2", "seq_mean", 0.02, 0.02, None),
        ("seq_max_k3", "k3", "seq_max", 0.05, 0.05, None),
    ):
        m, _ = rc.compute_rollout_rejection_mask(tx, tm, opt, thr)
        ours = reject_kl(x, mask, est, lvl, upper, lower)
        row = _compare(
            m.numpy().ravel(), ours.weights.ravel(), *(np.zeros(x.size),) * 3
        )
        row.update({"peer": f"verl rollout_rs={opt}", "rule": f"reject_kl {est} {lvl}"})
        out.append(row)
    return out


def check_verl(path):
    actor = _verl_stubs()
    core = _load(
        "verl.trainer.ppo.core_algos", Path(path) / "verl/trainer/ppo/core_algos.py"
    )
    rc = _load(
        "verl.trainer.ppo.rollout_corr_helper",
        Path(path) / "verl/trainer/ppo/rollout_corr_helper.py",
    )
    return (
        _verl_rules(core, actor)
        + _verl_agg(core)
        + _verl_kl(core)
        + _verl_corrections(rc)
    )


# --------------------------------------------------------------------------------------
# Stable-RL, SkyRL, TRL
# --------------------------------------------------------------------------------------


def check_stable_rl(path):
    import torch

    from theorycheck.losses import LOSSES
    from theorycheck.numeric import divergence

    actor = _verl_stubs()
    core = _load(
        "verl.trainer.ppo.core_algos", Path(path) / "verl/trainer/ppo/core_algos.py"
    )
    cfg = actor(
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.2,
        clip_ratio_c=3.0,
        policy_loss=_Cfg(loss_mode="dppo_binary_tv"),
        global_batch_info={},
    )
    p, q, adv = _points([3.0], _mask_pairs("tv", 0.2))
    lp = torch.tensor(np.log(p)[:, None], requires_grad=True)
    lq = torch.tensor(np.log(q)[:, None])
    loss = core.compute_policy_loss_with_mask(
        lq,
        lp,
        torch.tensor(adv[:, None]),
        torch.ones_like(lq),
        "token-mean",
        cfg,
        rollout_log_prob=lq,
        loss_mode="dppo_binary_tv",
        topk_kl=torch.zeros_like(lq),
        topk_tv=torch.zeros_like(lq),
        entropy=torch.zeros_like(lq),
    )[0]
    (g,) = torch.autograd.grad(loss, lp)
    full = {**LOSSES["dppo_capped"].defaults, "delta": 0.2, "cap": 3.0}
    ours, _ = LOSSES["dppo_capped"].coefficient(p, q, adv, **full)
    row = _compare(-g[:, 0].numpy() * len(p), ours, p, q, adv)
    row.update(
        {
            "peer": "Stable-RL dppo_binary_tv (rollout anchor)",
            "rule": "dppo_capped",
            "params": {"delta": 0.2, "cap": 3.0},
        }
    )
    rows = [row]
    # the K-slot top-K divergences of compute_topk_kl against numeric.divergence
    import os

    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    torch._dynamo.config.disable = True
    utils = _load("stable_rl_actor_utils", Path(path) / "verl/workers/actor/utils.py")
    rng = np.random.default_rng(4)
    peer, ours = [], []
    for _ in range(60):
        v, k = 12, 4
        z = rng.normal(0, 1.5, v)
        mu = z + rng.normal(0, 0.5, v)
        mu = mu - np.log(np.exp(mu).sum())
        sampled = int(rng.integers(0, v))
        top = list(np.argsort(-mu, kind="stable")[:k])
        if sampled not in top:
            top[-1] = sampled
        ids = torch.tensor([top])
        kl, tv = utils.compute_topk_kl(torch.tensor([z]), ids, torch.tensor([mu[top]]))
        peer += [float(kl[0]), float(tv[0])]
        for kind in ("topk_kl", "topk_tv"):
            ours.append(
                float(divergence(mu, z, sampled, kind=kind, topk=k, support="k_slots"))
            )
    row = _compare(peer, ours, *(np.zeros(len(peer)),) * 3, rtol=1e-5)
    row.update(
        {
            "peer": "Stable-RL compute_topk_kl (K = 4 slots, V = 12)",
            "rule": "divergence(kind=topk_kl/topk_tv, support=k_slots)",
            "note": "the peer computes in float32: tolerance 1e-5 relative",
        }
    )
    return rows + [row]


def check_skyrl(path):
    import torch

    from theorycheck.losses import (
        geo_mask_sequence,
        product_mask_sequence,
        tis_sequence,
        tis_token,
    )

    base = Path(path) / "skyrl/backends/skyrl_train/utils"
    _module("skyrl.backends.skyrl_train.utils")
    _load("skyrl.backends.skyrl_train.utils.torch_utils", base / "torch_utils.py")
    opc = _load(
        "skyrl.backends.skyrl_train.utils.off_policy_correction_utils",
        base / "off_policy_correction_utils.py",
    )
    rng = np.random.default_rng(5)
    x = rng.normal(0, 0.2, (40, 10))
    mask = (np.arange(10)[None] < rng.integers(1, 11, 40)[:, None]).astype(float)
    old = torch.tensor(x)
    roll = torch.zeros_like(old)
    m = torch.tensor(mask)
    cfg = _Cfg(
        token_tis_ratio_clip_high=2.0,
        sequence_tis_ratio_clip_high=5.0,
        geo_mask_high=1.01,
        geo_mask_low=0.99,
        product_mask_high=2.0,
        product_mask_low=0.5,
    )
    rows = []
    for level, ours in (
        ("token", tis_token(x, mask, 2.0)),
        ("sequence", tis_sequence(x, mask, 5.0)),
    ):
        w, _ = opc.compute_tis_ratio(old, roll, m, level, cfg)
        w = (w * m).numpy()
        row = _compare(w.ravel(), ours.weights.ravel(), *(np.zeros(x.size),) * 3)
        row.update({"peer": f"SkyRL compute_tis_ratio {level}", "rule": f"tis_{level}"})
        rows.append(row)
    for metric, ours in (
        ("geometric", geo_mask_sequence(x, mask)),
        ("product", product_mask_sequence(x, mask)),
    ):
        w, _ = opc.compute_sequence_mask(old, roll, m, metric, cfg)
        w = (w * m).numpy()
        row = _compare(w.ravel(), ours.weights.ravel(), *(np.zeros(x.size),) * 3)
        row.update({"peer": f"SkyRL compute_sequence_mask {metric}", "rule": ours.name})
        rows.append(row)
    return rows


def check_trl(path):
    import ast

    import torch

    from theorycheck.losses import LOSSES

    src = (Path(path) / "trl/trainer/grpo_trainer.py").read_text()
    tree = ast.parse(src)
    fn = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "get_gamma_weights"
    )
    fn.decorator_list = []
    ns = {"torch": torch, "math": math}
    exec(compile(ast.Module([fn], []), "grpo_trainer.get_gamma_weights", "exec"), ns)
    rng = np.random.default_rng(6)
    x = rng.normal(0, 0.3, (60, 8))
    mask = (np.arange(8)[None] < rng.integers(1, 9, 60)[:, None]).astype(float)
    adv = rng.choice([-1.0, 0.5, 1.2], 60)
    phi = ns["get_gamma_weights"](
        torch.tensor(adv[:, None]), torch.tensor(x), torch.tensor(mask), None
    ).numpy()[:, 0]
    seq = (np.clip(x, -20, 20) * mask).sum(axis=1)
    c, _ = LOSSES["vespo"].coefficient(0.5, 0.5, adv, seq_log_ratio=seq)
    row = _compare(adv * phi, c, *(np.zeros(60),) * 3)
    row.update({"peer": "TRL get_gamma_weights (vespo)", "rule": "vespo"})
    return [row]


# --------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------


def render(results: dict) -> str:
    lines = [
        "# Peer check: the peers' own code against the registry",
        "",
        "<!-- generated by scripts/peer_check.py --render from "
        "docs/peer_check.json -->",
        "",
        f"Run: `{results['command']}` (torch {results['torch']}, CPU, float64; load "
        f"average {results['loadavg']}). Tolerance: |peer − registry| ≤ {ATOL:g} + "
        f"{RTOL:g}·|registry| per point. Boundaries are probed 1e-6 (relative) either "
        "side; exact ties are not (see losses.md on ties).",
        "",
        "| peer | commit |",
        "|---|---|",
    ]
    lines += [f"| {k} | `{v}` |" for k, v in results["commits"].items()]
    lines += [
        "",
        "| peer function | registry | points | agree | max abs diff | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        note = r.get("note", "")
        if "first_disagreement" in r:
            d = r["first_disagreement"]
            note = (note + "; " if note else "") + (
                f"first: p={d['p']:.6g} q={d['q']:.6g} A={d['adv']:g} peer "
                f"{d['peer']:.6g} vs {d['registry']:.6g}"
            )
        lines.append(
            f"| {r['peer']} | {r['rule']} | {r['points']} | {r['agree']} | "
            f"{r['max_abs_diff']:.3g} | {note} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("verl", "skyrl", "trl", "stable-rl"):
        ap.add_argument(f"--{name}", metavar="DIR")
    ap.add_argument("--commit", action="append", default=[], metavar="PEER=SHA")
    ap.add_argument("--out", default=str(JSON_OUT))
    ap.add_argument("--render", action="store_true")
    args = ap.parse_args(argv)
    if args.render:
        MD_OUT.write_text(render(json.loads(Path(args.out).read_text())))
        return 0
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    given = dict(c.split("=", 1) for c in args.commit)
    checks = (
        ("verl", check_verl),
        ("stable-rl", check_stable_rl),
        ("skyrl", check_skyrl),
        ("trl", check_trl),
    )
    rows, commits = [], {}
    for name, fn in checks:
        path = getattr(args, name.replace("-", "_"))
        if path:
            commits[name] = _commit(path, given.get(name))
            rows += fn(path)
    results = {
        "command": "python scripts/peer_check.py "
        + " ".join(f"--{n} <{n} checkout>" for n in commits),
        "torch": torch.__version__,
        "loadavg": Path("/proc/loadavg").read_text().split()[0],
        "commits": commits,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    MD_OUT.write_text(render(results))
    bad = [r for r in rows if r["agree"] != r["points"]]
    print(f"{len(rows)} checks, {len(bad)} with disagreements")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
