"""scripts/ctl-choice (issue 30 point 5): the uniformizer weight and learning rate tried
around ``fusion-ctl2``, on a tiny model and corpus; and ``variant_overrides``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neurosym.experiments.semantic_fusion import RECIPE_OPTIM, VARIANTS, recipe_config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ctl-choice"


def test_variant_overrides_replace_the_variants_knobs_and_optim_only():
    base = recipe_config("fusion-ctl2", 0)
    tried = recipe_config("fusion-ctl2", 0, variant_overrides={"uniformizer_weight": 0.5, "optim": {"lr": 3e-4}})
    assert tried.optim.lr == 3e-4 and base.optim.lr == VARIANTS["fusion-ctl2"]["optim"]["lr"]
    assert tried.optim.epochs == base.optim.epochs == 16 and tried.optim.weight_decay == RECIPE_OPTIM["weight_decay"]
    b, t = base.to_dict(), tried.to_dict()
    assert t["objective"]["uniformizer"]["weight"] == 0.5 and b["objective"]["uniformizer"]["weight"] == 2.0
    t["objective"]["uniformizer"]["weight"] = 2.0
    t["optim"]["lr"] = b["optim"]["lr"]
    assert t == b  # nothing else moved
    assert "optim" in VARIANTS["fusion-ctl2"] and VARIANTS["fusion-ctl2"]["uniformizer_weight"] == 2.0  # the table is untouched


def test_ctl_choice_trains_each_setting_measures_it_and_picks_the_lowest_validation_ppl(tmp_path):
    out, runs = tmp_path / "choice.json", tmp_path / "runs"
    cmd = [sys.executable, str(SCRIPT), str(out), "--settings", "0.5:3e-4,2:1e-3", "--tiny", "--epochs", "1", "--train", "48",
           "--samples", "2", "--runs", str(runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = report["settings"]
    assert [(r["uniformizer_weight"], r["lr"]) for r in rows] == [(0.5, 3e-4), (2.0, 1e-3)]
    for r in rows:
        saved = json.loads((Path(r["run"]) / "config.json").read_text())
        assert saved["objective"]["uniformizer"]["weight"] == r["uniformizer_weight"] and saved["optim"]["lr"] == r["lr"]
        assert r["soft"]["samples"] == 12 and 0 <= r["soft"]["grammatical"] <= 1  # 2 per request, 6 requests
        assert r["valid"]["ppl"] >= r["valid"]["floor_ppl"] and set(r["off_grammar"]) >= {"elsewhere", "after_held_out", "clean_path"}
    best = min(rows, key=lambda r: r["valid"]["ppl"])
    assert report["chosen_by_valid_ppl"] == {"uniformizer_weight": best["uniformizer_weight"], "lr": best["lr"]}
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # finished runs are reused
    assert again.returncode == 0 and json.loads(out.read_text())["settings"][0]["valid"] == rows[0]["valid"]


def test_ctl_choice_rejects_bad_settings_with_a_message(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x.json"), "--settings", "0.5-3e-4"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--settings: expected WEIGHT:LR" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.json").exists()
