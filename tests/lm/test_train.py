"""The trainer on a tiny task: schedule, metrics, exact resume (after an exception and after
SIGKILL), atomic checkpoints, plotting, and (slow) DDP under torchrun matching one process.

This file is also a script, so a subprocess (killed with SIGKILL, or started by torchrun)
can train the same tiny task::

    python tests/lm/test_train.py CONFIG.json [--resume] [--sleep SECONDS]
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from neurosym.errors import ConfigError, NeurosymError, TaskError, TrainingInterrupted
from neurosym.files import LOCK_FILE
from neurosym.lm.rundir import MANIFEST
from neurosym.lm.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from neurosym.lm.config import Config
from neurosym.lm.plot import plot_run
from neurosym.lm.distributed import shard_batch
from neurosym.lm.train import FitResult, Trainer, param_groups, schedule_factor, train_from_file

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]

# ---------------------------------------------------------------- the tiny task


@dataclass
class TinyModel:
    vocab: int = 12
    dim: int = 16
    ctx: int = 3
    hidden: int = 32
    dropout: float = 0.1
    jitter: bool = True  # draw from Python's and NumPy's global RNGs in the loss (resume must restore them)


@dataclass
class TinyData:
    n: int = 192
    n_val: int = 64
    seed: int = 123


class TinyLM(nn.Module):
    """Embed the last ``ctx`` tokens, LayerNorm, MLP with dropout, predict the next token."""

    def __init__(self, m: TinyModel):
        super().__init__()
        self.emb = nn.Embedding(m.vocab, m.dim)
        self.norm = nn.LayerNorm(m.ctx * m.dim)
        self.mlp = nn.Sequential(nn.Linear(m.ctx * m.dim, m.hidden), nn.GELU(), nn.Dropout(m.dropout), nn.Linear(m.hidden, m.vocab))

    def forward(self, x):
        return self.mlp(self.norm(self.emb(x).flatten(1)))


class TinyTask:
    """Next token = (3 * sum of the context + 1) mod vocab, with 10% random labels."""

    def __init__(self, config: Config):
        self.config = config
        self.m = config.section("model", TinyModel)
        self.d = config.section("data", TinyData)
        g = torch.Generator().manual_seed(self.d.seed)
        x = torch.randint(0, self.m.vocab, (self.d.n + self.d.n_val, self.m.ctx), generator=g)
        y = (3 * x.sum(1) + 1) % self.m.vocab
        noisy = torch.rand(len(y), generator=g) < 0.1
        y = torch.where(noisy, torch.randint(0, self.m.vocab, y.shape, generator=g), y)
        self.x, self.y = x[: self.d.n], y[: self.d.n]
        self.vx, self.vy = x[self.d.n :], y[self.d.n :]

    def build_model(self, config):
        return TinyLM(self.m)

    def train_batches(self, epoch, generator):
        order = torch.randperm(self.d.n, generator=generator)
        return [(self.x[i], self.y[i]) for i in order.split(self.config.optim.batch_size)]

    def loss(self, model, batch):
        x, y = batch
        smoothing = 0.0
        if self.m.jitter:
            smoothing = 0.02 * random.random() + 0.02 * float(np.random.rand())
        logits = model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=smoothing)
        return loss, {"acc": (logits.argmax(1) == y).float().mean().item()}

    def evaluate(self, model):
        torch.rand(5)  # evaluation randomness must not leak into training
        logits = model(self.vx)
        return {"val_loss": F.cross_entropy(logits, self.vy).item(), "val_acc": (logits.argmax(1) == self.vy).float().mean().item()}


def make_task(config):
    return TinyTask(config)


def tiny_config(out_dir: Path, name: str = "tiny", **over) -> dict:
    cfg = {
        "run": {"name": name, "out_dir": str(out_dir), "seed": 3},
        "model": {},
        "data": {},
        "optim": {"lr": 1e-2, "batch_size": 16, "epochs": 3, "warmup": 0.25},  # 12 steps/epoch, 36 in all
        "log": {"every": 1, "checkpoint_every": 5, "progress": False},
    }
    for key, value in over.items():
        table, name_ = key.split("__")
        cfg[table][name_] = value
    return cfg


def train(cfg: dict, resume=False, callbacks=()) -> FitResult:
    config = Config.from_dict(cfg)
    return Trainer(config, TinyTask(config), callbacks=callbacks).fit(resume=resume)


def params(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "last.pt")["model"]


def metrics(run_dir: Path, drop=("seconds",)) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in drop} for line in lines]


def assert_same_run(a: Path, b: Path, ra: FitResult, rb: FitResult) -> None:
    assert rb.steps == ra.steps == 36
    assert rb.loss == ra.loss  # bit for bit
    assert rb.eval == ra.eval
    pa, pb = params(a), params(b)
    assert pa.keys() == pb.keys()
    for k in pa:
        assert torch.equal(pa[k], pb[k]), k
    oa, ob = load_checkpoint(a / "last.pt")["optimizer"], load_checkpoint(b / "last.pt")["optimizer"]
    for i in oa["state"]:
        for k in oa["state"][i]:
            assert torch.equal(oa["state"][i][k], ob["state"][i][k])
    assert metrics(a) == metrics(b)  # every logged value except wall-clock seconds


class Kill(Exception):
    pass


def kill_at(step: int):
    def callback(trainer, s):
        if s == step:
            raise Kill(f"killed after step {s}")

    return callback


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted run; the tests compare interrupted runs against it."""
    out = tmp_path_factory.mktemp("ref")
    result = train(tiny_config(out))
    return out / "tiny", result


# ---------------------------------------------------------------- schedule and optimizer


def test_schedule_linear_warmup_then_cosine_to_zero():
    f = [schedule_factor(s, total_steps=100, warmup_steps=10) for s in range(101)]
    assert f[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])  # linear, reaching 1
    assert f[10] == 1.0
    assert f[55] == pytest.approx(0.5)  # half way through the decay
    assert f[100] == pytest.approx(0.0, abs=1e-12) and f[99] > 0
    assert all(a >= b for a, b in zip(f[10:], f[11:]))  # monotone decay
    assert schedule_factor(130, total_steps=100, warmup_steps=10) == pytest.approx(0.0, abs=1e-12)
    assert schedule_factor(55, total_steps=100, warmup_steps=10, kind="linear") == pytest.approx(0.5)
    assert schedule_factor(99, total_steps=100, warmup_steps=10, kind="constant") == 1.0
    assert schedule_factor(0, total_steps=10, warmup_steps=0) == 1.0


def test_logged_learning_rates_follow_the_schedule(reference):
    run_dir, _ = reference
    lrs = [m["lr"] for m in metrics(run_dir) if m["kind"] == "train"]
    expect = [1e-2 * schedule_factor(s, total_steps=36, warmup_steps=9) for s in range(36)]
    assert lrs == pytest.approx(expect, rel=1e-12)


def test_no_weight_decay_on_vectors():
    model = TinyLM(TinyModel())
    decay, no_decay = param_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {p.ndim for p in decay["params"]} == {2}  # linear weights and the embedding
    assert any(p is model.emb.weight for p in decay["params"])
    assert any(p is model.norm.weight for p in no_decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])


def test_shard_batch_splits_rows():
    x, y = torch.arange(10).view(5, 2), torch.arange(5)
    (a, b), share = shard_batch((x, y), 1, 2)
    assert torch.equal(a, x[3:]) and torch.equal(b, y[3:]) and share == 2 / 5
    d, share = shard_batch({"x": x, "const": torch.ones(3)}, 0, 2)
    assert torch.equal(d["x"], x[:3]) and d["const"].shape == (3,) and share == 3 / 5
    assert shard_batch((x, y), 0, 1) == ((x, y), 1.0)


# ---------------------------------------------------------------- a whole run


def test_run_writes_metrics_config_and_checkpoint(reference):
    run_dir, result = reference
    assert result.run_dir == run_dir and result.steps == 36
    assert math.isfinite(result.loss) and set(result.eval) == {"val_loss", "val_acc"}
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_lines = [m for m in lines if m["kind"] == "train"]
    evals = [m for m in lines if m["kind"] == "eval"]
    assert [m["step"] for m in train_lines] == list(range(1, 37))
    assert set(train_lines[0]) == {"kind", "step", "epoch", "loss", "lr", "grad_norm", "seconds", "acc"}
    assert [(m["step"], m["epoch"]) for m in evals] == [(12, 0), (24, 1), (36, 2)]
    assert evals[-1]["val_loss"] == result.eval["val_loss"]
    assert train_lines[-1]["loss"] == result.loss
    assert train_lines[-1]["loss"] < train_lines[0]["loss"]  # it learns
    assert all(m["grad_norm"] > 0 and m["seconds"] >= 0 for m in train_lines)
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved == Config.from_dict(tiny_config(run_dir.parent)).to_dict()
    ckpt = load_checkpoint(run_dir / "last.pt")
    assert (ckpt["step"], ckpt["epoch"], ckpt["position"], ckpt["total_steps"]) == (36, 3, 0, 36)
    assert ckpt["config"] == saved
    assert {"python", "numpy", "torch", "cuda"} <= set(ckpt["rng"][0])
    assert sorted(p.name for p in run_dir.iterdir()) == [".neurosym-run.json", ".neurosym.lock", "config.json", "last.pt", "metrics.jsonl"]  # the manifest and the lock


def test_log_every_averages_over_steps(tmp_path, reference):
    ref_dir, _ = reference
    train(tiny_config(tmp_path, log__every=4, log__checkpoint_every=7))
    ref = [m for m in metrics(ref_dir) if m["kind"] == "train"]
    got = [m for m in metrics(tmp_path / "tiny") if m["kind"] == "train"]
    assert [m["step"] for m in got] == list(range(4, 37, 4))
    assert got[0]["loss"] == pytest.approx(sum(m["loss"] for m in ref[:4]) / 4, rel=1e-12)
    assert got[0]["lr"] == ref[3]["lr"]


def test_identical_runs_are_identical(tmp_path, reference):
    ref_dir, ref = reference
    result = train(tiny_config(tmp_path))
    assert_same_run(ref_dir, tmp_path / "tiny", ref, result)


# ---------------------------------------------------------------- resume


@pytest.mark.parametrize("kill_step", [7, 10, 12, 13, 35])  # mid-interval, at a checkpoint, epoch end, after it, last
def test_resume_after_exception_is_exact(tmp_path, reference, kill_step):
    ref_dir, ref = reference
    cfg = tiny_config(tmp_path)
    with pytest.raises(Kill):
        train(cfg, callbacks=[kill_at(kill_step)])
    run_dir = tmp_path / "tiny"
    assert (run_dir / "last.pt").exists()
    result = train(cfg, resume=True)
    assert_same_run(ref_dir, run_dir, ref, result)


def test_resume_twice_and_resume_a_finished_run(tmp_path, reference):
    ref_dir, ref = reference
    cfg = tiny_config(tmp_path)
    with pytest.raises(Kill):
        train(cfg, callbacks=[kill_at(6)])
    with pytest.raises(Kill):
        train(cfg, resume=True, callbacks=[kill_at(27)])
    result = train(cfg, resume=True)
    assert_same_run(ref_dir, tmp_path / "tiny", ref, result)
    again = train(cfg, resume=True)  # nothing left to do
    assert (again.steps, again.loss, again.eval) == (result.steps, result.loss, result.eval)
    assert again.resumed_from == 36 and result.resumed_from == 25  # the checkpoint after the kill at 27 holds step 25
    assert again.seconds > 0.5 * result.seconds > 0  # a finished run reports its training time (to its last checkpoint), not 0


def slow_training_in_another_process(cfg: dict, folder: Path) -> subprocess.Popen:
    """``cfg`` trained by this file run as a script in a child process (0.05 s a step),
    returned once its first checkpoint is written."""
    cfg_file = folder / "cfg.json"
    cfg_file.write_text(json.dumps(cfg))
    run_dir = Path(cfg["run"]["out_dir"]) / cfg["run"]["name"]
    proc = subprocess.Popen([sys.executable, str(HERE), str(cfg_file), "--sleep", "0.05"], cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 60
    while not (run_dir / "last.pt").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError("the training process ended, or took over a minute, before its first checkpoint")
        time.sleep(0.01)
    return proc


def test_resume_after_sigkill_is_exact(tmp_path, reference):
    """The honest test: a separate process dies by SIGKILL (no cleanup, maybe mid-write)."""
    ref_dir, ref = reference
    cfg = tiny_config(tmp_path)
    run_dir = tmp_path / "tiny"
    proc = slow_training_in_another_process(cfg, tmp_path)
    try:
        time.sleep(0.15)  # a few steps past the checkpoint, so some work is lost
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = load_checkpoint(run_dir / "last.pt")["step"]
    assert 5 <= killed_at < 36
    lines = metrics(run_dir)
    assert lines[-1]["step"] < 36
    result = train(cfg, resume=True)
    assert_same_run(ref_dir, run_dir, ref, result)


def test_resume_refuses_a_changed_config(tmp_path):
    cfg = tiny_config(tmp_path)
    with pytest.raises(Kill):
        train(cfg, callbacks=[kill_at(6)])
    with pytest.raises(ConfigError, match=r"optim\.lr \(checkpoint 0\.01, config 0\.02\)"):
        train(tiny_config(tmp_path, optim__lr=0.02), resume=True)
    # logging settings may change
    train(tiny_config(tmp_path, log__every=3, log__progress=True), resume=True)


def test_fresh_start_refuses_to_overwrite_and_resume_needs_a_checkpoint(tmp_path):
    cfg = tiny_config(tmp_path)
    with pytest.raises(CheckpointError, match=r"last\.pt: nothing to resume"):
        train(cfg, resume=True)
    with pytest.raises(Kill):
        train(cfg, callbacks=[kill_at(5)])
    with pytest.raises(NeurosymError, match="already has a checkpoint"):
        train(cfg)


def test_deterministic_mode_is_restored_after_fit(tmp_path):
    before = torch.are_deterministic_algorithms_enabled()
    train(tiny_config(tmp_path, optim__epochs=1))
    assert torch.are_deterministic_algorithms_enabled() == before


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_dying_mid_write_leaves_the_old_one(tmp_path, monkeypatch, reference):
    ref_dir, ref = reference
    cfg = tiny_config(tmp_path)
    run_dir = tmp_path / "tiny"
    real_save, calls = torch.save, []

    def dying_save(obj, f, *args, **kwargs):
        calls.append(obj["step"])
        if len(calls) == 3:  # the checkpoint after step 12: write half, then "crash"
            real_save(obj, f, *args, **kwargs)
            f.truncate(f.tell() // 2)
            raise OSError("disk full")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(OSError, match="disk full"):
        train(cfg)
    assert calls == [5, 10, 12]
    assert load_checkpoint(run_dir / "last.pt")["step"] == 10  # the previous one, whole
    assert not [p for p in run_dir.glob(".*") if p.name not in (LOCK_FILE, MANIFEST)], "a partial temporary file was left behind"  # the lock and the manifest are the run's own
    monkeypatch.setattr(torch, "save", real_save)
    result = train(cfg, resume=True)
    assert_same_run(ref_dir, run_dir, ref, result)


def test_stale_temporary_files_are_removed_on_resume(tmp_path):
    cfg = tiny_config(tmp_path)
    with pytest.raises(Kill):
        train(cfg, callbacks=[kill_at(5)])
    stale = tmp_path / "tiny" / ".last.pt.abc123.tmp"
    stale.write_bytes(b"half a checkpoint")
    train(cfg, resume=True)
    assert not stale.exists()


def test_keep_checkpoints_writes_step_files(tmp_path):
    train(tiny_config(tmp_path, log__keep_checkpoints=True, log__checkpoint_every=10))
    run_dir = tmp_path / "tiny"
    names = sorted(p.name for p in run_dir.glob("*.pt"))
    assert names == sorted(["last.pt"] + [f"step-{s}.pt" for s in (10, 12, 20, 24, 30, 36)])
    assert load_checkpoint(run_dir / "step-20.pt")["step"] == 20
    assert load_checkpoint(run_dir / "last.pt")["step"] == 36


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope\.pt: no such checkpoint"):
        load_checkpoint(tmp_path / "nope.pt")
    save_checkpoint(tmp_path, {"step": 1, "x": torch.ones(1000)})
    data = (tmp_path / "last.pt").read_bytes()
    (tmp_path / "last.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"last\.pt: corrupt or truncated checkpoint"):
        load_checkpoint(tmp_path)
    (tmp_path / "last.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(tmp_path / "last.pt")
    torch.save({"something": "else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a neurosym training checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


# ---------------------------------------------------------------- plotting and the CLI entry


def test_plot_writes_a_png(reference, tmp_path):
    run_dir, _ = reference
    out = plot_run(run_dir, out=tmp_path / "c.png")
    assert out == tmp_path / "c.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    default = plot_run(run_dir)
    assert default == run_dir / "curves.png" and default.stat().st_size > 1000
    default.unlink()  # other tests list the folder


def test_plot_errors_clearly_without_metrics(tmp_path):
    with pytest.raises(NeurosymError, match="no such run folder"):
        plot_run(tmp_path / "missing")
    with pytest.raises(NeurosymError, match=r"no metrics\.jsonl here"):
        plot_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "kind"')
    with pytest.raises(NeurosymError, match="no metrics yet"):
        plot_run(tmp_path)


def test_train_from_file_uses_run_task(tmp_path, monkeypatch, reference):
    ref_dir, ref = reference
    (tmp_path / "tiny_task_mod.py").write_text(
        f"import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('tiny_train_tests', {str(HERE)!r})\n"
        f"mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)\n"
        f"make = mod.make_task\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    toml = f"""
[run]
name = "tiny"
out_dir = "{out}"
seed = 3
task = "tiny_task_mod:make"

[optim]
lr = 1e-2
batch_size = 16
epochs = 3
warmup = 0.25

[log]
every = 1
checkpoint_every = 5
progress = false
"""
    (tmp_path / "run.toml").write_text(toml)
    result = train_from_file(tmp_path / "run.toml")
    assert_same_run(ref_dir, out / "tiny", ref, result)
    (tmp_path / "bad.toml").write_text(toml.replace("tiny_task_mod:make", "tiny_task_mod:nope"))
    with pytest.raises(ConfigError, match=r"bad\.toml: run\.task: 'tiny_task_mod' has no attribute 'nope'"):
        train_from_file(tmp_path / "bad.toml")


# ---------------------------------------------------------------- DDP (slow)


@pytest.mark.slow
def test_ddp_two_processes_match_one(tmp_path):
    """torchrun --nproc_per_node=2 on CPU/gloo: each rank takes half of every global batch of
    16, so the loss trajectory must match one process up to float rounding (gradients are
    averaged across ranks in a different order). No dropout or loss jitter here: those draw
    per-rank random numbers, which one process cannot reproduce."""
    over = dict(model__dropout=0.0, model__jitter=False)
    single = train(tiny_config(tmp_path / "single", **over))
    cfg = tiny_config(tmp_path / "ddp", **over)
    cfg_file = tmp_path / "ddp.json"
    cfg_file.write_text(json.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(HERE), str(cfg_file)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ddp_dir, single_dir = tmp_path / "ddp" / "tiny", tmp_path / "single" / "tiny"

    a = [m for m in metrics(single_dir) if m["kind"] == "train"]
    b = [m for m in metrics(ddp_dir) if m["kind"] == "train"]
    assert [m["step"] for m in a] == [m["step"] for m in b] == list(range(1, 37))
    la, lb = np.array([m["loss"] for m in a]), np.array([m["loss"] for m in b])
    diff = np.abs(la - lb)
    print(f"\nDDP vs single process over 36 steps: max |loss diff| = {diff.max():.3g}, "
          f"max relative = {(diff / np.abs(la)).max():.3g}; first {la[0]:.6f} last {la[-1]:.6f} vs {lb[-1]:.6f}")
    np.testing.assert_allclose(lb, la, rtol=1e-4, atol=1e-5)  # the stated tolerance
    assert [m["lr"] for m in a] == [m["lr"] for m in b]
    np.testing.assert_allclose([m["acc"] for m in b], [m["acc"] for m in a], atol=1 / 16 + 1e-9)
    pa, pb = params(single_dir), params(ddp_dir)
    worst = max((pa[k] - pb[k]).abs().max().item() for k in pa)
    print(f"max |param diff| after 36 steps = {worst:.3g}")
    assert worst < 1e-4
    ea = [m for m in metrics(single_dir) if m["kind"] == "eval"]
    eb = [m for m in metrics(ddp_dir) if m["kind"] == "eval"]
    assert len(ea) == len(eb) == 3
    np.testing.assert_allclose([m["val_loss"] for m in eb], [m["val_loss"] for m in ea], rtol=1e-4)
    assert sorted(p.name for p in ddp_dir.iterdir()) == [".neurosym-run.json", ".neurosym.lock", "config.json", "last.pt", "metrics.jsonl"]
    assert load_checkpoint(ddp_dir / "last.pt")["world_size"] == 2

    # A DDP run killed part-way resumes exactly under DDP too (same world size).
    cfg_k = tiny_config(tmp_path / "ddpk", **over)
    cfg_k_file = tmp_path / "ddpk.json"
    cfg_k_file.write_text(json.dumps(cfg_k))
    killed = subprocess.run(cmd[:-1] + [str(cfg_k_file), "--stop-at", "17"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode != 0
    resumed = subprocess.run(cmd[:-1] + [str(cfg_k_file), "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert metrics(tmp_path / "ddpk" / "tiny") == metrics(ddp_dir)
    pk = params(tmp_path / "ddpk" / "tiny")
    assert all(torch.equal(pk[k], pb[k]) for k in pb)


# ---------------------------------------------------------------- script mode


def main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep after each step")
    ap.add_argument("--stop-at", type=int, default=None, help="raise after this step")
    args = ap.parse_args(argv)
    callbacks = []
    if args.sleep:
        callbacks.append(lambda trainer, step: time.sleep(args.sleep))
    if args.stop_at:
        callbacks.append(kill_at(args.stop_at))
    cfg = json.loads(Path(args.config).read_text())
    torch.set_num_threads(1)
    train(cfg, resume=args.resume, callbacks=callbacks)


if __name__ == "__main__":
    main(sys.argv[1:])


class _NoLoss:
    def build_model(self, config):
        return TinyLM(TinyModel())

    def train_batches(self, epoch, generator):
        return []


class _NotAModule(TinyTask):
    def build_model(self, config):
        return "a model"


class _BadLoss(TinyTask):
    def loss(self, model, batch):
        return 1.0


def test_broken_tasks_are_task_errors(tmp_path):
    """A task that breaks the protocol is a NeurosymError (the CLI's exit 2) and a TypeError."""
    assert issubclass(TaskError, NeurosymError) and issubclass(TaskError, TypeError)
    assert issubclass(ConfigError, ValueError)
    config = Config.from_dict(tiny_config(tmp_path, "a"))
    with pytest.raises(TaskError, match="has no loss"):
        Trainer(config, _NoLoss()).fit()
    with pytest.raises(TaskError, match="not an nn.Module"):
        Trainer(Config.from_dict(tiny_config(tmp_path, "b")), _NotAModule(config)).fit()
    with pytest.raises(TaskError, match=r"must return \(0-d loss tensor"):
        Trainer(Config.from_dict(tiny_config(tmp_path, "c")), _BadLoss(config)).fit()


def test_an_interrupt_says_where_the_checkpoint_is_and_how_to_resume(tmp_path):
    def ctrl_c(step):
        def callback(trainer, s):
            if s == step:
                raise KeyboardInterrupt
        return callback

    cfg = tiny_config(tmp_path)
    with pytest.raises(TrainingInterrupted, match=r"interrupted at step 7 of 36; the last checkpoint, .*last\.pt, holds step 5\. .*--resume"):
        train(cfg, callbacks=[ctrl_c(7)])
    with pytest.raises(TrainingInterrupted, match="step 3 of 36; no checkpoint was written yet"):
        train(tiny_config(tmp_path, name="early"), callbacks=[ctrl_c(3)])
    assert train(cfg, resume=True).resumed_from == 5



# ---------------------------------------------------------------- config errors the trainer finds (issue 14.3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_is_a_positioned_config_error(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text(f'[run]\nname = "a"\nout_dir = "{tmp_path}"\ndevice = "cuda"\ntask = "nowhere.at_all:make"\n')
    with pytest.raises(ConfigError) as info:  # before the task is even imported
        train_from_file(toml)
    assert str(info.value) == f"""{toml}:4:1: run.device: 'cuda' is not available here (no CUDA device, or a CPU build of torch); use "cpu\""""
    config = Config.from_dict(tiny_config(tmp_path, run__device="cuda:0"))
    with pytest.raises(ConfigError, match=r"^run\.device: 'cuda:0' is not available here"):
        Trainer(config, TinyTask(config))


def test_an_out_dir_under_a_regular_file_is_a_positioned_config_error(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    toml = tmp_path / "run.toml"
    toml.write_text(f'[run]\nname = "a"\n  out_dir = "{tmp_path / "afile" / "runs"}"\ntask = "nowhere.at_all:make"\n')
    with pytest.raises(ConfigError) as info:
        train_from_file(toml)
    assert str(info.value) == (
        f"{toml}:3:3: run.out_dir: cannot create the run folder {tmp_path / 'afile' / 'runs' / 'a'}: "
        f"{tmp_path / 'afile'} is a file, not a folder"
    )
    # the trainer itself (a config built in code) says the same at the key, whatever the OS error
    config = Config.from_dict(tiny_config(tmp_path / "afile" / "runs"))
    with pytest.raises(ConfigError, match=r"^run\.out_dir: cannot create the run folder .*afile/runs/tiny: Not a directory$"):
        Trainer(config, TinyTask(config)).fit()
    config = Config.from_dict(tiny_config(tmp_path, name="afile"))  # the run folder itself is a file
    with pytest.raises(ConfigError, match=r"^run\.out_dir: cannot create the run folder .*afile: File exists$"):
        Trainer(config, TinyTask(config)).fit()


def test_two_trainings_on_one_folder_the_second_refuses_naming_the_first(tmp_path):
    """One process per run folder (issue 44, point 2): while a training runs, a second one
    on the same folder refuses at once, naming the first's pid, and touches nothing; the
    OS drops the lock when the first dies (SIGKILL), so the folder resumes afterwards."""
    cfg = tiny_config(tmp_path)
    run_dir = tmp_path / "tiny"
    proc = slow_training_in_another_process(cfg, tmp_path)  # well into its run: it has a checkpoint
    try:
        before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and p.name != "metrics.jsonl"}
        for resume in (False, True):
            with pytest.raises(NeurosymError, match=rf"in use by another neurosym process \(pid {proc.pid}\)"):
                train(cfg, resume=resume)
        assert proc.poll() is None
        after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and p.name in before}
        assert set(after) == set(before)  # the refused run deleted nothing (the first may have written a checkpoint since)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    result = train(cfg, resume=True)  # the dead holder's lock is gone
    assert result.steps == 36
