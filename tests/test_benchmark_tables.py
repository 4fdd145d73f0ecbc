"""The benchmark tables of docs/benchmarks.md: generated from benchmarks/results/*.json
(scripts/gen_benchmark_tables.py), checked against the committed results, and the JSON
each benchmark writes with ``--json-out`` (benchmarks/_results.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(folder: str, name: str):
    sys.path.insert(0, str(ROOT / folder))
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load("scripts", "gen_benchmark_tables")
docgen = _load("scripts", "docgen")
results = _load("benchmarks", "_results")
bench_models = _load("benchmarks", "bench_models")


def _run_bench(name: str, out: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    cmd = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args]
    proc = subprocess.run(
        [*cmd, "--json-out", str(out)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


def _models_doc() -> dict:
    """A bench_models results document with made-up numbers, built by its own code."""
    args = type("Args", (), {})()
    vars(args).update(batch=8, seq=256, grad_batch=2, repeats=3, json_out="x.json")
    doc = results.start("bench_models", args)
    measured = dict(
        load_s=12.5,
        parameters=134515008,
        rss_after_load_gb=2.5,
        compile_scan_s=1.9,
        compile_unrolled_s=14.1,
        forward_s=15.9,
        forward_tokens_per_s=129.0,
        matmul_s=0.1,
        matmul_gflops=31.3,
        forward_gflops=35.7,
        jvp_all_s=30.0,
        jvp_top_s=5.0,
        small_forward_s=4.0,
        grad_s=15.0,
        peak_rss_gb=4.1,
    )
    ratios = bench_models._ratios(measured)
    doc.update(quantities=measured, ratios=ratios)
    doc["targets"] = bench_models._targets(measured | ratios)
    doc["provenance"].update(
        jax="0", numpy="0", platform="cpu", load_1min_end=1.0, load_1min_start=0.5
    )
    return doc


def _page(root: Path) -> Path:
    page = root / gen.PAGE
    page.parent.mkdir(parents=True)
    page.write_text(
        "".join(
            f"<!-- BEGIN generated:{block} -->\n<!-- END generated:{block} -->\n"
            for block, _, _ in gen.BENCHMARKS.values()
        )
    )
    return page


def test_docs_benchmark_tables_match_the_committed_results():
    stale = docgen.stale_blocks(gen.blocks(), ROOT)
    assert stale == [], "run `python scripts/gen_benchmark_tables.py` (make docs)"


def test_a_changed_result_makes_its_block_stale(tmp_path):
    # Meta-test: rendering, then changing one measured number, is seen as out of date.
    res = tmp_path / "results"
    res.mkdir()
    _page(tmp_path)
    doc = _models_doc()
    results.write(res / "bench_models.json", doc)
    assert len(docgen.write_blocks(gen.blocks(res), tmp_path)) == len(gen.BENCHMARKS)
    assert docgen.stale_blocks(gen.blocks(res), tmp_path) == []
    doc["quantities"]["load_s"] = 13.5
    results.write(res / "bench_models.json", doc)
    stale = docgen.stale_blocks(gen.blocks(res), tmp_path)
    assert stale == [f"{gen.PAGE}:bench-models"]


def test_missing_results_render_not_measured_yet_and_no_numbers(tmp_path):
    text = gen.render("bench_hessian", tmp_path)
    assert text.startswith("Not measured yet: run `python benchmarks/bench_hessian.py")
    assert "|" not in text
    scale = gen.render("bench_numeric_scale", tmp_path)
    assert "bench_numeric.py --scale --json-out" in scale


def test_models_block_marks_targets_from_the_numbers(tmp_path):
    doc = _models_doc()
    results.write(tmp_path / "bench_models.json", doc)
    text = gen.render("bench_models", tmp_path)
    lines = {line.split(" | ")[0]: line for line in text.splitlines()}
    # 2.5 GB misses "< 2"; 1.9 s meets "< 10"; 30 / 15.9 = 1.89 meets "<= 3"
    assert lines["| peak RSS after loading, float32 (GB)"].endswith("| 2.5 ✗ | < 2 |")
    assert lines["| compile forward, `lax.scan` (s)"].endswith("| 1.9 ✓ | < 10 |")
    assert lines["| JVP (all parameters) ÷ forward"].endswith("| 1.89 ✓ | ≤ 3 |")
    assert lines["| compile: unrolled loop ÷ `lax.scan`"].endswith("| 7.42 |  |")
    assert "forward 8 × 256 (s)" in text and "134,515,008" in text
    assert "by `python benchmarks/bench_models.py --batch 8 --seq 256" in text


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d["ratios"].update(jvp_all_over_forward=1.0),
        lambda d: d["targets"]["compile_scan_s"].update(met=False),
        lambda d: d["targets"]["rss_after_load_gb"].update(met=True),
        lambda d: d.update(benchmark="bench_hessian"),
        lambda d: d.update(schema=2),
    ],
    ids=["ratio", "met-flipped-off", "met-flipped-on", "benchmark", "schema"],
)
def test_a_results_file_that_disagrees_with_its_numbers_is_refused(tmp_path, tamper):
    doc = _models_doc()
    tamper(doc)
    results.write(tmp_path / "bench_models.json", doc)
    with pytest.raises(gen.Inconsistent):
        gen.render("bench_models", tmp_path)


def test_an_unknown_results_file_is_an_error(tmp_path):
    (tmp_path / "bench_other.json").write_text("{}")
    with pytest.raises(ValueError, match="bench_other.json"):
        gen.blocks(tmp_path)


def test_write_is_atomic_and_refuses_nan(tmp_path):
    path = tmp_path / "sub" / "r.json"
    results.write(path, {"a": 1.5})
    assert json.loads(path.read_text()) == {"a": 1.5}
    with pytest.raises(ValueError):
        results.write(path, {"a": math.nan})
    assert json.loads(path.read_text()) == {"a": 1.5}  # the old file is intact
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary left


def test_met_follows_the_operator():
    assert results.met(1.5, results.target(">=", 1.5)) is True
    assert results.met(1.5, results.target(">", 1.5)) is False
    assert results.met(4.99, results.target("<", 5.0)) is True
    assert results.met(3.0, None) is None
    with pytest.raises(ValueError, match="'=>'"):
        results.target("=>", 1.0)


def test_bench_numeric_tiny_run_writes_a_file_the_generator_renders(tmp_path):
    out = tmp_path / "bench_numeric.json"
    args = ("--rows", "16", "--vocab", "512", "--repeats", "1")
    doc = _run_bench("bench_numeric", out, *args)
    prov = doc["provenance"]
    assert prov["args"] == dict(
        rows=16, vocab=[512], repeats=1, block=4, topk=20, scale=False
    )
    assert prov["cpu_count"] == os.cpu_count() and prov["date_utc"].endswith("Z")
    keys = {"commit", "dirty", "jax", "numpy", "python", "platform"}
    assert set(prov) >= keys | {"load_1min_start", "load_1min_end"}
    assert doc["shapes"][0]["mask disagreements"] == 0
    text = gen.render("bench_numeric", tmp_path)
    assert "| quantity | [16, 512] |" in text
    assert "--rows 16 --vocab 512 --repeats 1" in text
    # the top-K targets are judged at V = 151936 only: no verdict at V = 512
    topk = next(r for r in text.splitlines() if r.startswith("| full-vocab KL D+Ddot"))
    assert "✓" not in topk and "✗" not in topk and topk.endswith("at V = 151936 |")
    chunked = next(r for r in text.splitlines() if r.startswith("| numpy chunked /"))
    assert ("✓" in chunked) != ("✗" in chunked)


def test_bench_hessian_tiny_run_writes_a_file_the_generator_renders(tmp_path):
    out = tmp_path / "bench_hessian.json"
    doc = _run_bench("bench_hessian", out, "--vocab", "64", "--repeats", "1")
    assert doc["vocab"] == 64 and len(doc["rows"]) == 4
    assert doc["cold_min_eigenvalue"]["met"] is None  # the target is at V = 151936
    for row in doc["rows"]:
        assert row["abs_diff"] < 1e-12  # Lanczos agrees with the closed form
    text = gen.render("bench_hessian", tmp_path)
    assert "V = 64, k = 7." in text and "| boundary | IS surrogate |" in text


def test_scale_check_block_renders_its_record(tmp_path):
    args = type("Args", (), {})()
    vars(args).update(rows=2048, vocab=[151936], repeats=3, block=4, topk=20)
    vars(args).update(scale=True, json_out="x.json")
    doc = results.start("bench_numeric_scale", args)
    doc["provenance"].update(
        jax="0", numpy="0", platform="cpu", load_1min_end=1.0, load_1min_start=0.5
    )
    doc["scale_check"] = dict(
        rows=8192,
        vocab=151936,
        inputs_gb=9.96,
        generate_s=144.6,
        token_stats_first_call_s=82.3,
        nan_free=True,
        peak_rss_gb=10.2,
    )
    results.write(tmp_path / "bench_numeric_scale.json", doc)
    text = gen.render("bench_numeric_scale", tmp_path)
    assert "by `python benchmarks/bench_numeric.py --rows 2048" in text
    assert text.split("`: ")[0].endswith("--topk 20 --scale")
    assert "| scale check | [8192, 151936] float32 |" in text
    assert "| inputs (logits + behavior log-probs, GB) | 10.0 |" in text
    assert "| outputs NaN-free | True |" in text
    assert "load average 0.5 at start, 1.0 at end" in text


def _probe_doc() -> dict:
    """A bench_probe results document with made-up numbers."""
    args = type("Args", (), {})()
    vars(args).update(prompts=2, samples=8, new_tokens=8, task="countdown")
    vars(args).update(model="smollm2", json_out="x.json")
    doc = results.start("bench_probe", args)
    q = dict(
        updated_tokens=64,
        tokens_per_cpu_s=12.8,
        baseline_tokens_per_cpu_s=0.8,
        unit_tokens_per_cpu_s=6.4,
        baseline_unit_tokens_per_cpu_s=0.75,
        probe_cpu_s=5.0,
        baseline_probe_cpu_s=80.0,
        compile_cpu_s=20.0,
        max_rel_diff=2e-13,
    )
    ratios = {
        "speedup": q["tokens_per_cpu_s"] / q["baseline_tokens_per_cpu_s"],
        "unit_speedup": q["unit_tokens_per_cpu_s"]
        / q["baseline_unit_tokens_per_cpu_s"],
    }
    targets = {}
    for name, value in (("tokens_per_cpu_s", 12.8), ("speedup", ratios["speedup"])):
        tgt = results.target(">=", 10.0)
        targets[name] = {"target": tgt, "met": results.met(value, tgt)}
    phases = {"grad": 1.0, "jvp": 2.0, "masks": 1.5, "trunk": 6.0}
    profile = {r: dict(phases) for r in gen.PROFILE_RUNS}
    doc.update(quantities=q, ratios=ratios, targets=targets, profile=profile)
    doc["provenance"].update(
        jax="0", numpy="0", platform="cpu", load_1min_end=1.0, load_1min_start=0.5
    )
    return doc


def test_probe_block_renders_targets_and_the_profile(tmp_path):
    results.write(tmp_path / "bench_probe.json", _probe_doc())
    text = gen.render("bench_probe", tmp_path)
    lines = {line.split(" | ")[0]: line for line in text.splitlines()}
    speed = "| speed-up, probe: fast ÷ plain tokens per CPU-second"
    assert lines[speed].endswith("| 16 ✓ | ≥ 10 |")
    assert "| **total** | **10.50** | **10.50** | **10.50** | **10.50** |" in text
    assert "2.00e-13" in text
    doc = _probe_doc()
    doc["ratios"]["speedup"] = 3.0
    results.write(tmp_path / "bench_probe.json", doc)
    with pytest.raises(gen.Inconsistent):
        gen.render("bench_probe", tmp_path)


def test_the_probe_run_before_renders_its_own_numbers_and_kind(tmp_path):
    """bench_probe_before.json is a bench_probe run: rendered from its numbers, and
    refused when it says it is another benchmark's."""
    src = json.loads((ROOT / "benchmarks/results/bench_probe_before.json").read_text())
    results.write(tmp_path / "bench_probe_before.json", src)
    text = gen.render("bench_probe_before", tmp_path)
    route = f"{src['quantities']['route_tokens_per_cpu_s']:.3g}"
    assert f"| {route} |" in text and src["provenance"]["commit"][:10] in text
    src["benchmark"] = "bench_models"
    results.write(tmp_path / "bench_probe_before.json", src)
    with pytest.raises(gen.Inconsistent, match="expected 'bench_probe'"):
        gen.render("bench_probe_before", tmp_path)
