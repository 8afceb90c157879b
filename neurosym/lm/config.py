"""Training configuration: a TOML file loaded into nested dataclasses, checked on load.

A config has five tables::

    [run]       name, out_dir, seed, deterministic, threads, device, precision, task
    [model]     free-form; the task checks it with its own dataclass (Config.section)
    [data]      free-form; likewise
    [objective] free-form; likewise (the built-in "lm" task's loss terms)
    [optim]  lr, weight_decay, betas, warmup | warmup_steps, schedule, clip, batch_size, epochs
    [log]    every, checkpoint_every, keep_checkpoints, progress

Every mistake is a :class:`~neurosym.errors.ConfigError` whose message names the file
(with line and column when the key can be found in it), the table and the key:
``runs/a.toml:7:1: unknown key 'lrr' in [optim]; did you mean 'lr'?`` or
``runs/a.toml:7:1: optim.lr: expected a number, got "fast"``. TOML syntax errors keep
tomllib's line and column. docs/training.md is the reference for every key.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import tomllib
import types
import typing
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from neurosym.errors import ConfigError, NeurosymError, SourceError
from neurosym.files import read_input, resolve_data_path

T = typing.TypeVar("T")

BUILTIN_TASK = "lm"  # run.task of the built-in language-model task (neurosym.lm.task)
MAX_THREADS = 1024  # more would only exhaust memory (OpenMP allocates per thread) and never helps
# files neurosym reads or writes that a user may hand to `neurosym train` by mistake
NOT_CONFIGS = {
    ".fsg": "an FSG grammar", ".pcfg": "a PCFG", ".regex": "a regex bank", ".lex": "a lexicon",
    ".safetensors": "a compiled artifact", ".pt": "a checkpoint", ".jsonl": "a metrics file",
}
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")  # what run.device may name (availability is checked by the trainer)


@dataclass
class RunConfig:
    name: str
    out_dir: str = "runs"
    seed: int = 0
    deterministic: bool = True
    threads: int | None = None  # torch CPU threads while training (None: torch's default); results depend on it
    device: str = "cpu"  # cpu | cuda | cuda:N | mps | auto (CUDA when there is one, else the CPU)
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: autocast on CUDA
    task: str | None = None  # "lm" (the built-in language-model task) or "package.module:factory"

    def __post_init__(self):
        if not self.name or "/" in self.name or "\\" in self.name or self.name in {".", ".."} or "\0" in self.name:
            raise ConfigError(f"run.name: expected a folder name, got {_show(self.name)}")
        _check(bool(self.out_dir) and "\0" not in self.out_dir, "run.out_dir", "expected a folder path", self.out_dir)
        _check(0 <= self.seed < 2**63, "run.seed", "expected an integer in [0, 2**63)", self.seed)
        if self.threads is not None:
            _check(1 <= self.threads <= MAX_THREADS, "run.threads", f"expected a number of threads in [1, {MAX_THREADS}]", self.threads)
        _check(DEVICE.fullmatch(self.device) is not None, "run.device", 'expected "cpu", "cuda", "cuda:N", "mps" or "auto"', self.device)
        if self.task is not None and self.task != BUILTIN_TASK and not re.fullmatch(r"[\w.]+:[\w.]+", self.task):
            raise ConfigError(f'run.task: expected "{BUILTIN_TASK}" or "package.module:factory", got {_show(self.task)}')


@dataclass
class OptimConfig:
    lr: float = 3e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    warmup: float = 0.1  # fraction of the total number of optimizer steps
    warmup_steps: int | None = None  # if set, used instead of `warmup`
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    clip: float = 1.0  # max global gradient norm; 0 turns clipping off
    batch_size: int = 64
    epochs: int = 6

    def __post_init__(self):
        _check(math.isfinite(self.lr) and self.lr > 0, "optim.lr", "expected a finite positive number", self.lr)
        _check(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "optim.weight_decay", "expected a finite number >= 0", self.weight_decay)
        for i, b in enumerate(self.betas):
            _check(0 <= b < 1, f"optim.betas[{i}]", "expected a number in [0, 1)", b)
        _check(0 <= self.warmup <= 1, "optim.warmup", "expected a fraction in [0, 1]", self.warmup)
        if self.warmup_steps is not None:
            _check(self.warmup_steps >= 0, "optim.warmup_steps", "expected an integer >= 0", self.warmup_steps)
        _check(math.isfinite(self.clip) and self.clip >= 0, "optim.clip", "expected a finite number >= 0 (0 turns clipping off)", self.clip)
        _check(self.batch_size >= 1, "optim.batch_size", "expected an integer >= 1", self.batch_size)
        _check(self.epochs >= 1, "optim.epochs", "expected an integer >= 1", self.epochs)

    def warmup_for(self, total_steps: int) -> int:
        """The number of warmup steps for a run of ``total_steps`` optimizer steps."""
        if self.warmup_steps is not None:
            return min(self.warmup_steps, total_steps)
        return round(self.warmup * total_steps)


@dataclass
class LogConfig:
    every: int = 50  # optimizer steps per metrics.jsonl line
    checkpoint_every: int = 200  # optimizer steps per checkpoint (epoch ends always checkpoint)
    keep_checkpoints: bool = False  # also keep step-N.pt next to last.pt
    progress: bool = True  # tqdm progress bar on stderr

    def __post_init__(self):
        _check(self.every >= 1, "log.every", "expected an integer >= 1", self.every)
        _check(self.checkpoint_every >= 1, "log.checkpoint_every", "expected an integer >= 1", self.checkpoint_every)


@dataclass
class Config:
    """A whole training config. ``model``, ``data`` and ``objective`` are handed to the task as they are."""

    run: RunConfig
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    objective: dict[str, Any] = field(default_factory=dict)
    optim: OptimConfig = field(default_factory=OptimConfig)
    log: LogConfig = field(default_factory=LogConfig)
    source: Path | None = field(default=None, repr=False, compare=False)
    _text: str | None = field(default=None, repr=False, compare=False)

    @property
    def run_dir(self) -> Path:
        """The run folder: ``out_dir/name`` (relative to the working directory)."""
        return Path(self.run.out_dir) / self.run.name

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | Path | None = None, _text: str | None = None) -> "Config":
        """Build and check a config from nested dicts (what a TOML file parses to)."""
        src = _Source(None if source is None else Path(source), _text)
        if not isinstance(data, dict):
            raise src.error(None, None, f"expected a table of tables, got {_show(data)}")
        tables = {"run": RunConfig, "model": dict, "data": dict, "objective": dict, "optim": OptimConfig, "log": LogConfig}
        for key, value in data.items():
            if key not in tables:
                raise src.unknown(None, key, tables)
            if not isinstance(value, dict):
                raise src.error(None, key, f"{key}: expected a table, got {_show(value)}")
        if "run" not in data:
            raise src.error(None, None, "missing table [run] (it needs at least name = \"...\")")
        optim = data.get("optim", {})
        return cls(
            run=_build(RunConfig, data["run"], "run", src),
            model=dict(data.get("model", {})),
            data=dict(data.get("data", {})),
            objective=dict(data.get("objective", {})),
            optim=_build(OptimConfig, optim, "optim", src),
            log=_build(LogConfig, data.get("log", {}), "log", src),
            source=src.path,
            _text=_text,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts (JSON- and TOML-friendly; ``None`` for unset options)."""
        out = {
            "run": dataclasses.asdict(self.run),
            "model": json.loads(json.dumps(self.model)),
            "data": json.loads(json.dumps(self.data)),
            "objective": json.loads(json.dumps(self.objective)),
            "optim": dataclasses.asdict(self.optim),
            "log": dataclasses.asdict(self.log),
        }
        out["optim"]["betas"] = list(self.optim.betas)
        return out

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError about ``key`` ("data.grammar", "run.device"), positioned at the key's
        line in the config file when it is there: ``cfg.toml:12:1: data.grammar: message``."""
        table, _, name = key.rpartition(".")
        return _Source(self.source, self._text).error(table or None, name, f"{key}: {message}")

    def section(self, table: str, cls: type[T]) -> T:
        """The free-form ``[model]``, ``[data]`` or ``[objective]`` table checked against a task's dataclass.

        Unknown keys, wrong types and missing required fields are ConfigErrors naming the
        file and the key, exactly like the built-in tables.
        """
        if table not in ("model", "data", "objective"):
            raise ConfigError(f"section() is for the free-form tables 'model', 'data' and 'objective', not {table!r}")
        return _build(cls, getattr(self, table), table, _Source(self.source, self._text))


def load_config(path: str | Path) -> Config:
    """Read and check a TOML config file."""
    path = Path(path)
    if path.suffix in NOT_CONFIGS:
        raise ConfigError(f"{path}: expected a TOML config (.toml), got {NOT_CONFIGS[path.suffix]}")
    if path.is_dir():
        raise ConfigError(f"{path}: expected a TOML config (.toml), got a folder")
    if not path.exists():  # configs/... names a shipped config from any folder
        with suppress(NeurosymError):
            path = resolve_data_path(path)
    try:
        text = read_input(path).decode("utf-8")  # a regular file only: a device or a FIFO is refused
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(SourceError.not_utf8(err, path))) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config: {err.strerror or err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        msg = str(err)
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
        if m:
            err_ = ConfigError(f"{path}:{m.group(1)}:{m.group(2)}: TOML syntax: {msg[: m.start()]}")
            err_.line, err_.col = int(m.group(1)), int(m.group(2))
        else:
            line = text.count("\n") + 1
            err_ = ConfigError(f"{path}:{line}:1: TOML syntax: {msg.replace(' (at end of document)', '')} (at end of file)")
            err_.line, err_.col = line, 1
        err_.path = str(path)
        raise err_ from None
    optim = data.get("optim")
    if isinstance(optim, dict) and "warmup" in optim and "warmup_steps" in optim:
        # In a file this is a mistake; from_dict (e.g. of to_dict output) lets warmup_steps win.
        raise _Source(path, text).error("optim", "warmup_steps", "optim: set warmup (a fraction) or warmup_steps, not both")
    return Config.from_dict(data, source=path, _text=text)


# ---------------------------------------------------------------- checking


def _show(value: Any) -> str:
    """A value as the user wrote it: "fast", 3, true, [1, 2], inf."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # inf, -inf, nan: TOML's spelling
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _check(ok: bool, key: str, expected: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"{key}: {expected}, got {_show(value)}")


@dataclass
class _Source:
    """Where a config came from, to put ``path:line:col`` in front of messages."""

    path: Path | None
    text: str | None

    def locate(self, table: str | None, key: str | None) -> tuple[int, int] | None:
        """Line and column of ``key`` in ``[table]`` (or of the ``[key]`` header), if it is there."""
        if self.text is None or key is None:
            return None
        current: str | None = None
        header = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
        for n, line in enumerate(self.text.splitlines(), 1):
            m = header.match(line)
            if m:
                current = m.group(1).replace('"', "").replace("'", "").replace(" ", "")
                if table is None and current == key:
                    return n, line.index("[") + 1
                continue
            dotted = re.match(rf'^(\s*)["\']?{re.escape(table)}["\']?\s*\.\s*["\']?{re.escape(key)}["\']?\s*=', line) if table else None
            if table is not None and current is None and dotted:
                return n, len(dotted.group(1)) + 1
            if current == table or (table is None and current is None):
                m = re.match(rf'^(\s*)["\']?{re.escape(key)}["\']?\s*[=.]', line)
                if m:
                    return n, len(m.group(1)) + 1
        return None

    def error(self, table: str | None, key: str | None, message: str) -> ConfigError:
        where = self.locate(table, key)
        parent = table
        while where is None and parent and "." in parent:  # a key of an inline table: the line of the table's own key
            parent, _, inner = parent.rpartition(".")
            where = self.locate(parent, inner)
        prefix = ""
        if self.path is not None:
            prefix = f"{self.path}:{where[0]}:{where[1]}: " if where else f"{self.path}: "
        err = ConfigError(prefix + message)
        err.path = None if self.path is None else str(self.path)
        err.line, err.col = where if where else (None, None)
        err.key = f"{table}.{key}" if table and key else key
        return err

    def unknown(self, table: str | None, key: str, known) -> ConfigError:
        close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known))}"
        where = f"in [{table}]" if table else "at the top level (tables are [run], [model], [data], [objective], [optim], [log])"
        return self.error(table, key, f"unknown key {key!r} {where}{hint}")


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(_show(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args if a is not type(None))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}"
        return f"a list of {len(args)} {_plural(args[0]) if len(set(args)) == 1 else 'values'}"
    if origin is list:
        return f"a list of {_plural(args[0]) if args else 'values'}"
    if tp is dict or origin is dict:
        return "a table"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def _plural(tp: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(tp, "values")


class _Mismatch(Exception):
    pass


def _coerce(value: Any, tp: Any, key: str, src: _Source, table: str) -> Any:
    """``value`` checked (and lightly converted: int -> float, list -> tuple) against ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin is Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        close = difflib.get_close_matches(str(value), [str(a) for a in args], n=1) if isinstance(value, str) else []
        hint = f" (did you mean {_show(close[0])}?)" if close else ""
        raise src.error(table, key.split(".")[-1], f"{key}: expected {_describe(tp)}, got {_show(value)}{hint}")
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key, src, table)
            except _Mismatch:
                pass
        raise _Mismatch
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _Mismatch
            items = [_coerce(v, a, key, src, table) for v, a in zip(value, args)]
        else:
            item_tp = args[0] if args else Any
            items = [_coerce(v, item_tp, key, src, table) for v in value]
        return tuple(items) if origin is tuple else items
    if tp is dict or origin is dict:
        if isinstance(value, dict):
            return dict(value)
        raise _Mismatch
    if dataclasses.is_dataclass(tp):
        if isinstance(value, dict):
            return _build(tp, value, key, src)
        raise _Mismatch
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise _Mismatch


def _build(cls: type[T], data: dict[str, Any], table: str, src: _Source) -> T:
    """An instance of dataclass ``cls`` from ``data``: unknown keys, missing keys and types checked."""
    if not isinstance(data, dict):
        raise src.error(None, table, f"{table}: expected a table, got {_show(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")}
    for key in data:
        if key not in fields:
            raise src.unknown(table, key, fields)
    kwargs = {}
    for name, f in fields.items():
        full = f"{table}.{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise src.error(None, table.split(".")[0], f"[{table}] is missing required key {name!r} ({_describe(hints[name])})")
            continue
        try:
            kwargs[name] = _coerce(data[name], hints[name], full, src, table)
        except _Mismatch:
            raise src.error(table, name, f"{full}: expected {_describe(hints[name])}, got {_show(data[name])}") from None
    try:
        return cls(**kwargs)
    except ValueError as err:  # __post_init__ range checks: "optim.lr: expected ..., got ..."
        msg = str(err)
        key = msg.split(":", 1)[0].split(".")[-1].split("[")[0]
        raise src.error(table, key if key in fields else None, msg) from None
