"""``python -m neurosym.bench.prefix_precision``: the float32/float64 table of docs/prefix.md."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import torch

from neurosym.bench.prefix_precision import main, run
from neurosym.compile.pcfg import load_pcfg
from neurosym.layers.prefix import prefix_state

ROOT = Path(__file__).resolve().parents[1]


def test_report_against_a_direct_computation():
    report = run(ROOT / "grammars/arith.pcfg", "( 1 +", "0.0021")
    s = report["settings"]
    # float64: the hand-worked 0.25 * 0.06 * 0.7 * 0.2, to the last bits
    assert abs(s["float64"]["prefix_prob"] / 0.0021 - 1) < 1e-15
    assert 0 < s["float64"]["prefix_rel_error"] < 1e-15
    # float32: the errors a 24-bit mantissa allows, neither zero nor large
    for name in ("float32", "float32_rules_float64_chart"):
        for key in ("prefix_rel_error", "next_rel_error", "conditional_rel_error"):
            assert 1e-9 < s[name][key] < 1e-5, (name, key)
    # the largest error of P(v | prefix), recomputed here as a ratio of probabilities in float64
    rules64, rules32 = load_pcfg(ROOT / "grammars/arith.pcfg"), load_pcfg(ROOT / "grammars/arith.pcfg", dtype=torch.float32)
    ids = torch.tensor([rules64.vocab.encode("( 1 +")])
    ref = prefix_state(rules64, ids).next_token_log_probs()[0].exp()
    got = prefix_state(rules32, ids, dtype=torch.float32).next_token_log_probs()[0].double().exp()
    assert torch.equal(ref == 0, got == 0)
    ok = ref > 0
    assert math.isclose((got[ok] / ref[ok] - 1).abs().max().item(), s["float32"]["conditional_rel_error"], rel_tol=1e-6)
    p32 = prefix_state(rules32, ids, dtype=torch.float32).prefix_log_prob.exp().item()
    assert s["float32"]["prefix_prob"] == p32


def test_command_reproduces_the_committed_json(tmp_path, capsys):
    out = tmp_path / "p.json"
    main(["--grammar", str(ROOT / "grammars/arith.pcfg"), "--json", str(out)])
    assert json.loads(capsys.readouterr().out) == json.loads(out.read_text())
    new, committed = json.loads(out.read_text()), json.loads((ROOT / "docs/prefix_precision.json").read_text())
    for name, row in committed["settings"].items():
        for key, value in row.items():  # the two significant digits docs/prefix.md shows
            assert math.isclose(new["settings"][name][key], value, rel_tol=0.05), (name, key)


def test_bad_input_exits_2_with_the_option_named(tmp_path):
    for args, words in ((["--prefix", "( zz"], "--prefix"), (["--exact", "0.0x"], "--exact"),
                        (["--grammar", str(tmp_path / "none.pcfg")], "none.pcfg")):
        r = subprocess.run([sys.executable, "-m", "neurosym.bench.prefix_precision", *args], cwd=ROOT,
                           capture_output=True, text=True)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
