"""A small, generic training loop: AdamW, warmup + cosine, clipping, exact resume, DDP.

The trainer knows nothing about language models. A *task* supplies them::

    class MyTask:
        def build_model(self, config) -> nn.Module: ...
        def train_batches(self, epoch, generator) -> Iterable[batch]: ...   # global batches
        def loss(self, model, batch) -> tuple[Tensor, dict[str, float]]: ...
        def evaluate(self, model) -> dict[str, float]: ...                  # optional
        def steps_per_epoch(self) -> int: ...                               # optional

    result = Trainer(config, MyTask()).fit()           # and .fit(resume=True) after a crash

A run lives in ``out_dir/name``: ``config.json``, ``metrics.jsonl``, ``last.pt`` (and
``step-N.pt`` with ``log.keep_checkpoints``). docs/training.md describes each piece.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, runtime_checkable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from neurosym.errors import ConfigError, NeurosymError, TaskError, TrainingInterrupted
from neurosym.lm.checkpoint import (
    LAST,
    CheckpointError,
    load_checkpoint,
    remove_stale_temps,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from neurosym.files import LOCK_FILE, FolderLock, atomic_write
from neurosym.lm.config import BUILTIN_TASK, Config, load_config
from neurosym.lm.distributed import map_tensors, setup_distributed, shard_batch
from neurosym.lm.rundir import CONFIG_FILE, METRICS, Means, RunFiles, config_differences, jsonable, own_run_folder, truncate_metrics

TRAIN_KEYS = {"kind", "step", "epoch", "loss", "lr", "grad_norm", "seconds"}
EVAL_KEYS = {"kind", "step", "epoch", "seconds"}


@runtime_checkable
class TrainingTask(Protocol):
    """What the trainer needs from a task (``evaluate`` and ``steps_per_epoch`` are optional).

    * ``build_model(config)`` returns the module to train (on the CPU; the trainer moves it).
    * ``train_batches(epoch, generator)`` returns the epoch's *global* batches in order. It
      must draw all its randomness from ``generator`` so that the same generator state gives
      the same batches; every epoch should have the same number of batches. A batch is a
      tensor or a (nested) tuple/list/dict of tensors whose first dimension is the batch.
    * ``loss(model, batch)`` returns the mean loss over the batch (a 0-d tensor) and a dict
      of floats to log; under DDP it gets this rank's rows of the batch.
    * ``evaluate(model)`` returns a dict of floats; it runs at each epoch end on rank 0,
      under ``torch.no_grad()`` with the model in eval mode.
    * ``at_step(step, total_steps)`` (optional) is called before each ``loss`` with the
      0-based optimizer step (resumed runs included), for losses on a schedule.
    * ``finish(run_dir, model)`` (optional) is called on rank 0 once training has ended,
      to write the task's own files (weights, vocabulary) into the run folder.
    """

    def build_model(self, config: Config) -> nn.Module: ...

    def train_batches(self, epoch: int, generator: torch.Generator) -> Iterable[Any]: ...

    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, dict[str, float]]: ...


@dataclass
class FitResult:
    run_dir: Path
    steps: int  # optimizer steps taken in total (including before a resume)
    loss: float  # training loss of the last step (the global batch's, under DDP)
    eval: dict[str, float] = field(default_factory=dict)  # the last evaluate() result
    seconds: float = 0.0  # training time in all, including the time before a resume
    resumed_from: int | None = None  # the step a resumed run started from


# ---------------------------------------------------------------- optimizer and schedule


def schedule_factor(step: int, *, total_steps: int, warmup_steps: int, kind: str = "cosine") -> float:
    """The learning-rate multiplier for optimizer step ``step`` (counting from 0).

    Linear warmup ``(step + 1) / warmup_steps`` reaches 1 at the last warmup step; then
    ``cosine`` decays as ``0.5 * (1 + cos(pi * p))`` and ``linear`` as ``1 - p``, where
    ``p = (step - warmup_steps) / (total_steps - warmup_steps)`` goes from 0 to 1, so the
    multiplier is 0 at ``step == total_steps`` (one past the last step). ``constant`` stays 1.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if kind == "linear":
        return 1.0 - progress
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ConfigError(f"optim.schedule: unknown schedule {kind!r}; expected cosine, linear or constant")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: weight decay on matrices (ndim >= 2, embeddings included), none on
    vectors and scalars (biases, LayerNorm/RMSNorm gains). Decided by shape alone, so it
    works for any model; embeddings are decayed because they are often tied to the output
    projection (the nanoGPT rule)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def earlier_run(config: Config, resume: bool) -> bool:
    """Whether a recipe's run folder already holds a checkpoint (then it is resumed or
    reused); a NeurosymError when it does and ``resume`` is off."""
    exists = (config.run_dir / "last.pt").exists()
    if exists and not resume:
        raise NeurosymError(f"{config.run_dir}: an earlier run is there; add --resume to reuse finished runs and "
                            "continue unfinished ones, or give another --out-dir")
    return exists


def interleaved_step_seconds(setups: Iterable[tuple[str, TrainingTask, nn.Module, torch.optim.Optimizer, Any]], repeats: int = 30,
                             warmup: int = 3) -> dict[str, list[float]]:
    """Seconds per training step (the task's loss, backward, optimiser step) of each
    ``(name, task, model, optimiser, batch)``, measured in this process under the same
    conditions: each model trains on its own fixed batch, ``warmup`` steps first, then
    ``repeats`` rounds that step every model once in turn (so load changes hit all alike).
    ``{name: [seconds] * repeats}``."""
    setups = list(setups)

    def step(task: TrainingTask, model: nn.Module, opt: torch.optim.Optimizer, batch: Any) -> float:
        started = time.perf_counter()
        loss, _ = task.loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return time.perf_counter() - started

    for _, task, model, opt, batch in setups:
        model.train()
        for _ in range(warmup):
            step(task, model, opt, batch)
    times: dict[str, list[float]] = {name: [] for name, *_ in setups}
    for _ in range(repeats):
        for name, task, model, opt, batch in setups:
            times[name].append(step(task, model, opt, batch))
    return times


def seed_all(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def usable_device(config: Config) -> torch.device:
    """``run.device`` as a torch device, once this machine is known to have it (``"auto"``:
    CUDA when there is a device, else the CPU); a ConfigError at the key otherwise (a CPU
    build of torch asked for "cuda", say), and at ``run.precision`` for bf16 off CUDA."""
    spec = config.run.device
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(spec)
    if config.run.precision == "bf16" and device.type != "cuda":
        raise config.error("run.precision", f'"bf16" autocasts on CUDA only; this run is on {device.type} (use "fp32", or a CUDA run.device)')
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise config.error("run.device", f'{spec!r} is not available here (no CUDA device, or a CPU build of torch); use "cpu"')
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise config.error("run.device", f"{spec!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise config.error("run.device", f'{spec!r} is not available here; use "cpu"')
    return device


# ---------------------------------------------------------------- the trainer


class Trainer:
    """Trains ``task``'s model as ``config`` says; see the module docstring and docs/training.md.

    ``callbacks`` are called as ``callback(trainer, step)`` after every optimizer step,
    once that step's metrics line and checkpoint (if due) are written. An exception from a
    callback ends ``fit`` (the last checkpoint stays, so ``fit(resume=True)`` continues).
    """

    def __init__(self, config: Config | dict | str | Path, task: TrainingTask, callbacks: Iterable[Callable] = ()):
        if isinstance(config, (str, Path)):
            config = load_config(config)
        elif isinstance(config, dict):
            config = Config.from_dict(config)
        for name in ("build_model", "train_batches", "loss"):
            if not callable(getattr(task, name, None)):
                raise TaskError(f"task {type(task).__name__} has no {name}() method (see neurosym.lm.train.TrainingTask)")
        self.config = config
        self.task = task
        self.callbacks = list(callbacks)
        self.run_dir = config.run_dir
        self.model: nn.Module | None = None  # the unwrapped model (DDP wraps a copy of the reference)
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
        self.device = usable_device(config)
        self.rank, self.world_size = 0, 1
        self.step = self.epoch = self.position = 0
        self.steps_per_epoch = self.total_steps = 0
        self.last_loss = math.nan
        self.last_eval: dict[str, float] = {}
        self._checkpoint_step = 0  # the step of the last checkpoint written or read
        self._resumed_from: int | None = None
        self._lock: FolderLock | None = None  # the run folder's lock, held by rank 0 while it fits
        self._owned: RunFiles | None = None  # which files of the run folder are the run's

    # ------------------------------------------------------------ public

    def fit(self, resume: bool = False, force: bool = False) -> FitResult:
        """Train to the end (or continue from ``run_dir/last.pt`` with ``resume=True``).
        ``force``: a fresh run may replace files of the folder it did not write, under the
        names it writes (never an input; :func:`own_run_folder`)."""
        deterministic_before = torch.are_deterministic_algorithms_enabled()
        threads_before = torch.get_num_threads()
        self._dist, self.device = setup_distributed(str(self.device))
        self.rank, self.world_size = self._dist.rank, self._dist.world
        try:
            if self.config.run.threads is not None:
                torch.set_num_threads(self.config.run.threads)
            if self.config.run.deterministic:
                os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
                torch.use_deterministic_algorithms(True)
                torch.backends.cudnn.benchmark = False
            return self._fit(resume, force)
        except KeyboardInterrupt:
            last = self.run_dir / LAST
            where = f"the last checkpoint, {last}, holds step {self._checkpoint_step}" if last.exists() else "no checkpoint was written yet"
            raise TrainingInterrupted(
                f"{self.run_dir}: interrupted at step {self.step} of {self.total_steps}; {where}. "
                "Run the same command with --resume to continue"
            ) from None
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            torch.use_deterministic_algorithms(deterministic_before)
            torch.set_num_threads(threads_before)
            if self._dist.owns_group:
                dist.destroy_process_group()

    # ------------------------------------------------------------ setup

    def _fit(self, resume: bool, force: bool = False) -> FitResult:
        cfg, main = self.config, self.rank == 0
        if main and (self.run_dir / LOCK_FILE).exists():  # a run's folder: whoever holds it is named first
            self._lock = FolderLock(self.run_dir, "run folder").acquire()
        if not resume and (self.run_dir / LAST).exists():  # then the plainest refusal: a run is there
            raise NeurosymError(
                f"{self.run_dir}: this run already has a checkpoint; resume it (--resume) or choose another run.name"
            )
        if main:  # one process per run folder, from before anything in it is read or written to the end of the run
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
            except OSError as err:  # out_dir under a regular file, no permission, a name too long, ...
                raise cfg.error("run.out_dir", f"cannot create the run folder {self.run_dir}: {err.strerror or err}") from None
            if self._lock is None:  # a folder no run has locked yet: refused before even the lock file is made
                own_run_folder(self.run_dir, self.task, self.config, resume, force)
                self._lock = FolderLock(self.run_dir, "run folder").acquire()
            self._owned = own_run_folder(self.run_dir, self.task, self.config, resume, force)  # again, now that no one else writes
        state = self._read_checkpoint() if resume else None
        if not resume and (self.run_dir / LAST).exists():
            raise NeurosymError(
                f"{self.run_dir}: this run already has a checkpoint; resume it (--resume) or choose another run.name"
            )
        self._barrier()  # every rank has looked at the folder before rank 0 writes to it
        if main:
            self._lock.record()
            remove_stale_temps(self.run_dir)
            text = json.dumps(cfg.to_dict(), indent=2) + "\n"
            atomic_write(self.run_dir / CONFIG_FILE, lambda f: f.write(text.encode("utf-8")))
            self._owned.record()
            if state is None:
                (self.run_dir / METRICS).unlink(missing_ok=True)  # a run killed before its first checkpoint (ours, or --force)
            else:
                truncate_metrics(self.run_dir / METRICS, state["step"])

        seed_all(cfg.run.seed)
        model = self.task.build_model(cfg)
        if not isinstance(model, nn.Module):
            raise TaskError(f"build_model() returned {type(model).__name__}, not an nn.Module")
        self.model = model.to(self.device)
        self.steps_per_epoch = self._count_steps()
        self.total_steps = self.steps_per_epoch * cfg.optim.epochs
        if self.total_steps == 0:
            raise ConfigError(
                f"{cfg.source or self.run_dir}: the task gives no training batches (0 steps); "
                "check the data size (for the recipe, data.train) and optim.epochs"
            )
        seed_all(cfg.run.seed + self.rank)  # training randomness (dropout) differs between ranks

        o = cfg.optim
        self.optimizer = torch.optim.AdamW(param_groups(self.model, o.weight_decay), lr=o.lr, betas=o.betas)
        total, warmup, kind = self.total_steps, o.warmup_for(self.total_steps), o.schedule
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: schedule_factor(s, total_steps=total, warmup_steps=warmup, kind=kind)
        )
        self._data_gen = torch.Generator().manual_seed(cfg.run.seed)
        self._epoch_start_state = self._data_gen.get_state()
        self._means = Means()
        self._elapsed = 0.0
        if state is not None:
            self._restore(state)

        wrapped: nn.Module = self.model
        if self.world_size > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            wrapped = nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self._barrier()
        return self._loop(wrapped)

    def _read_checkpoint(self) -> dict[str, Any]:
        path = self.run_dir / LAST
        if not path.exists():
            raise CheckpointError(f"{path}: nothing to resume (no checkpoint); start the run without --resume")
        state = load_checkpoint(path)
        diffs = config_differences(state["config"], self.config.to_dict())
        if diffs:
            raise ConfigError(
                f"{self.config.source or self.run_dir}: the config differs from the one {path} was trained with: "
                + "; ".join(diffs)
                + " (resume with the same settings, or start a new run.name)"
            )
        return state

    def _count_steps(self) -> int:
        count = getattr(self.task, "steps_per_epoch", None)
        if callable(count):
            return int(count())
        batches = self.task.train_batches(0, torch.Generator().manual_seed(self.config.run.seed))
        try:
            return len(batches)
        except TypeError:
            return sum(1 for _ in batches)

    def _restore(self, state: dict[str, Any]) -> None:
        if state["total_steps"] != self.total_steps:
            raise CheckpointError(
                f"{self.run_dir / LAST}: written for {state['total_steps']} steps, but the task now gives "
                f"{self.total_steps} ({self.steps_per_epoch} per epoch); the data changed"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self._checkpoint_step = self._resumed_from = self.step
        self._data_gen.set_state(state["data_rng"])
        self._epoch_start_state = state["data_rng"]
        self._means = Means(state["means"])
        self._elapsed = state["elapsed"]
        self.last_loss, self.last_eval = state["last_loss"], dict(state["last_eval"])
        rngs = state["rng"]
        if len(rngs) != self.world_size:
            warnings.warn(
                f"checkpoint written by {len(rngs)} process(es), resumed by {self.world_size}: "
                "training continues but will not repeat the original run exactly",
                stacklevel=3,
            )
        set_rng_state(rngs[self.rank % len(rngs)])

    # ------------------------------------------------------------ the loop

    def _loop(self, wrapped: nn.Module) -> FitResult:
        cfg, main = self.config, self.rank == 0
        self._t0 = time.perf_counter() - self._elapsed
        self._metrics = open(self.run_dir / METRICS, "a", encoding="utf-8") if main else None
        bar = tqdm(total=self.total_steps, initial=self.step, desc=cfg.run.name, unit="step",
                   disable=not (cfg.log.progress and main), dynamic_ncols=True)
        end = object()
        try:
            self.model.train()
            while self.epoch < cfg.optim.epochs:
                self._data_gen.set_state(self._epoch_start_state)
                batches = iter(self.task.train_batches(self.epoch, self._data_gen))
                batches = itertools.islice(batches, self.position, None)  # already trained on
                upcoming = next(batches, end)
                if upcoming is end:  # an epoch without batches
                    self._end_epoch()
                while upcoming is not end:
                    batch, upcoming = upcoming, next(batches, end)
                    self._train_step(wrapped, batch)
                    bar.update(1)
                    if self.step % cfg.log.every == 0 or self.step == self.total_steps:
                        line = self._log_train()
                        bar.set_postfix(loss=f"{line['loss']:.4g}", lr=f"{line['lr']:.2e}", refresh=False)
                    if upcoming is end:
                        self._end_epoch()  # evaluate, then checkpoint at the start of the next epoch
                    elif self.step % cfg.log.checkpoint_every == 0:
                        self._checkpoint()
                    for callback in self.callbacks:
                        callback(self, self.step)
        finally:
            bar.close()
            if self._metrics is not None:
                self._metrics.close()
        finish = getattr(self.task, "finish", None)  # optional: the task's own files in the finished run folder
        if main and callable(finish):
            finish(self.run_dir, self.model)
        if main:
            self._owned.record()
        self._barrier()
        return FitResult(self.run_dir, self.step, self.last_loss, dict(self.last_eval), self._seconds(), self._resumed_from)

    def _train_step(self, wrapped: nn.Module, batch: Any) -> None:
        part, share = shard_batch(batch, self.rank, self.world_size)
        part = map_tensors(part, lambda t: t.to(self.device))
        self.optimizer.zero_grad(set_to_none=True)
        at_step = getattr(self.task, "at_step", None)  # optional: losses that follow a schedule over steps
        if callable(at_step):
            at_step(self.step, self.total_steps)
        with self._autocast():
            out = self.task.loss(wrapped, part)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.Tensor) and out[0].ndim == 0 and isinstance(out[1], dict)):
            raise TaskError("task.loss() must return (0-d loss tensor, dict of floats)")
        loss, logs = out
        clash = TRAIN_KEYS & set(logs)
        if clash:
            raise TaskError(f"task.loss() logs reserved metric name(s) {sorted(clash)}")
        # DDP averages gradients over ranks; weighting each rank's mean loss by its share of
        # the rows makes that average the gradient of the global batch's mean loss.
        (loss if self.world_size == 1 else loss * (share * self.world_size)).backward()
        clip = self.config.optim.clip
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip if clip > 0 else math.inf)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        self.position += 1

        names = sorted(logs)
        values = torch.tensor([loss.item()] + [float(logs[k]) for k in names], dtype=torch.float64)
        if self.world_size > 1:  # the global batch's means: rank means weighted by row share
            values = (values * share).to(self.device)
            dist.all_reduce(values)
            values = values.cpu()
        means = dict(zip(["loss", *names], values.tolist()))
        self.last_loss = means["loss"]
        self._means.add({**means, "grad_norm": float(grad_norm)})
        self._lr = lr

    def _log_train(self) -> dict[str, Any]:
        means = self._means.pop()
        line = {"kind": "train", "step": self.step, "epoch": self.epoch, "loss": means.pop("loss"),
                "lr": self._lr, "grad_norm": means.pop("grad_norm"), "seconds": self._seconds(), **means}
        self._write(line)
        return line

    def _end_epoch(self) -> None:
        evaluate = getattr(self.task, "evaluate", None)
        if callable(evaluate):
            if self.rank == 0:
                metrics = self._evaluate(evaluate)
                clash = EVAL_KEYS & set(metrics)
                if clash:
                    raise TaskError(f"task.evaluate() returns reserved metric name(s) {sorted(clash)}")
                self.last_eval = metrics
                self._write({"kind": "eval", "step": self.step, "epoch": self.epoch,
                             "seconds": self._seconds(), **metrics})
            self._barrier()
        self.epoch += 1
        self.position = 0
        self._epoch_start_state = self._data_gen.get_state()  # the next epoch starts here
        self._checkpoint()

    def _evaluate(self, evaluate: Callable) -> dict[str, float]:
        """``evaluate(model)`` in eval mode, without gradients, leaving the training RNG untouched."""
        saved = rng_state()
        self.model.eval()
        try:
            with torch.no_grad(), self._autocast():
                return {k: float(v) for k, v in evaluate(self.model).items()}
        finally:
            self.model.train()
            set_rng_state(saved)

    def _checkpoint(self) -> None:
        rngs = [rng_state()]
        if self.world_size > 1:
            rngs = [None] * self.world_size
            dist.all_gather_object(rngs, rng_state())
        if self.rank != 0:
            return
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "position": self.position,
            "steps_per_epoch": self.steps_per_epoch,
            "total_steps": self.total_steps,
            "data_rng": self._epoch_start_state,
            "rng": rngs,
            "means": self._means.state_dict(),
            "elapsed": self._seconds(),
            "last_loss": self.last_loss,
            "last_eval": dict(self.last_eval),
            "world_size": self.world_size,
            "config": self.config.to_dict(),
        }
        save_checkpoint(self.run_dir, state, keep_step=self.config.log.keep_checkpoints)
        if self._owned is not None:
            self._owned.record()
        self._checkpoint_step = self.step

    # ------------------------------------------------------------ small helpers

    def _autocast(self):
        """bfloat16 autocast on CUDA with ``run.precision = "bf16"``; a no-op otherwise."""
        on = self.config.run.precision == "bf16" and self.device.type == "cuda"
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=on)

    def _seconds(self) -> float:
        return round(time.perf_counter() - self._t0, 3)

    def _write(self, line: dict[str, Any]) -> None:
        if self._metrics is not None:
            self._metrics.write(json.dumps({k: jsonable(v) for k, v in line.items()}) + "\n")
            self._metrics.flush()

    def _barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()


# ---------------------------------------------------------------- entry points for the CLI


TASK_METHODS = ("build_model", "train_batches", "loss")  # what a training task must have (TrainingTask)


def resolve_task(config: Config) -> TrainingTask:
    """Build the task named by ``run.task``: the built-in language-model task for ``"lm"``
    (also when ``run.task`` is unset and ``[data]`` names ``train`` files or a ``grammar``), else
    ``factory(config)`` for ``"package.module:factory"``."""
    spec = config.run.task
    where = f"{config.source}: " if config.source else ""
    if spec == BUILTIN_TASK or (spec is None and ("train" in config.data or "grammar" in config.data)):
        from neurosym.lm.task import LMTask  # lazy: the text readers, tokenizers and lexicon compiler load only for this task
        return LMTask(config)
    if spec is None:
        raise ConfigError(f'{where}run.task is not set; add task = "lm" (and [data] train = "FILE") or "package.module:factory" to [run]')
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{where}run.task: cannot import {module_name!r}: {err}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{where}run.task: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{where}run.task: {spec!r} is a {type(obj).__name__}, not a task factory (a callable: factory(config) -> task)")
    try:
        task = obj(config)
    except TypeError as err:  # json:loads, os:system, ...: not made to take a config
        raise ConfigError(f"{where}run.task: {spec!r} is not a task factory: calling it with the config failed ({err})") from None
    missing = [name for name in TASK_METHODS if not callable(getattr(task, name, None))]
    if missing:
        raise ConfigError(f"{where}run.task: {spec!r} returned a {type(task).__name__}, not a training task (it has no {', '.join(missing)})")
    return task


def train_from_file(path: str | Path, resume: bool = False, force: bool = False) -> FitResult:
    """``neurosym train CONFIG.toml [--resume] [--force]``: load, build the task, train."""
    config = load_config(path)
    usable_device(config)  # the cheap checks first: building a task can take a while
    check_run_folder(config)
    return Trainer(config, resolve_task(config)).fit(resume=resume, force=force)


def check_run_folder(config: Config) -> None:
    """A ConfigError at ``run.out_dir`` when the run folder cannot be a folder: some part of
    ``out_dir/name`` that exists is a regular file."""
    for part in (config.run_dir, *config.run_dir.parents):
        if part.exists():
            if not part.is_dir():
                raise config.error("run.out_dir", f"cannot create the run folder {config.run_dir}: {part} is a file, not a folder")
            return
