"""Training configs: defaults, round trips, and errors that name the file, line, table and key."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.errors import ConfigError
from neurosym.lm.config import Config, LogConfig, OptimConfig, load_config

FULL = """\
[run]
name = "tiny"
out_dir = "runs"
seed = 7
deterministic = true
device = "cpu"
task = "mypkg.tasks:make"

[model]
dim = 32
layers = [1, 2]

[data]
path = "corpus.txt"

[optim]
lr = 1e-3
weight_decay = 0.0
betas = [0.9, 0.95]
warmup_steps = 10
schedule = "linear"
clip = 0.5
batch_size = 8
epochs = 2

[log]
every = 5
checkpoint_every = 20
keep_checkpoints = true
progress = false
"""


def write(tmp_path: Path, text: str, name: str = "cfg.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


def test_minimal_config_takes_every_default(tmp_path):
    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n'))
    assert cfg.run.name == "a" and cfg.run.out_dir == "runs" and cfg.run.seed == 0
    assert cfg.run.deterministic is True and cfg.run.device == "cpu" and cfg.run.task is None
    assert cfg.optim == OptimConfig()
    assert (cfg.optim.lr, cfg.optim.weight_decay, cfg.optim.warmup, cfg.optim.schedule) == (3e-4, 0.01, 0.1, "cosine")
    assert (cfg.optim.clip, cfg.optim.batch_size, cfg.optim.epochs) == (1.0, 64, 6)
    assert cfg.log == LogConfig(every=50, checkpoint_every=200, keep_checkpoints=False, progress=True)
    assert cfg.model == {} and cfg.data == {}
    assert cfg.run_dir == Path("runs") / "a"
    assert cfg.source == tmp_path / "cfg.toml"


def test_full_config_loads_and_round_trips(tmp_path):
    cfg = load_config(write(tmp_path, FULL))
    assert cfg.optim.betas == (0.9, 0.95) and cfg.optim.warmup_steps == 10 and cfg.optim.lr == 1e-3
    assert cfg.model == {"dim": 32, "layers": [1, 2]} and cfg.data == {"path": "corpus.txt"}
    assert cfg.log.keep_checkpoints is True and cfg.run.task == "mypkg.tasks:make"
    d = cfg.to_dict()
    assert d["optim"]["betas"] == [0.9, 0.95]
    assert Config.from_dict(d) == cfg
    assert Config.from_dict(d).to_dict() == d


def test_integers_are_accepted_where_numbers_are_expected(tmp_path):
    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[optim]\nlr = 1\nclip = 2\n'))
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float) and cfg.optim.clip == 2.0


def test_warmup_fraction_or_steps():
    assert OptimConfig(warmup=0.1).warmup_for(200) == 20
    assert OptimConfig(warmup=0.0).warmup_for(200) == 0
    assert OptimConfig(warmup_steps=7).warmup_for(200) == 7
    assert OptimConfig(warmup_steps=700).warmup_for(200) == 200


def test_unknown_key_names_file_line_table_and_suggests(tmp_path):
    msg = error_of(tmp_path, '[run]\nname = "a"\n\n[optim]\nlr = 0.1\nweight_decy = 0.1\n')
    assert msg.startswith(f"{tmp_path / 'cfg.toml'}:6:1: ")
    assert "unknown key 'weight_decy' in [optim]" in msg
    assert "did you mean 'weight_decay'?" in msg


def test_unknown_key_without_close_match_lists_known_keys(tmp_path):
    msg = error_of(tmp_path, '[run]\nname = "a"\n[log]\nzzz = 1\n')
    assert ":4:1: unknown key 'zzz' in [log]; known: " in msg and "checkpoint_every" in msg


def test_unknown_table_suggests_close_match(tmp_path):
    msg = error_of(tmp_path, '[run]\nname = "a"\n[optm]\nlr = 0.1\n')
    assert f"{tmp_path / 'cfg.toml'}:3:1: unknown key 'optm' at the top level" in msg
    assert "did you mean 'optim'?" in msg


def test_wrong_type_names_key_expected_and_value(tmp_path):
    msg = error_of(tmp_path, '[run]\nname = "a"\n[optim]\n  lr = "fast"\n')
    assert msg == f'{tmp_path / "cfg.toml"}:4:3: optim.lr: expected a number, got "fast"'


@pytest.mark.parametrize(
    "line, expected",
    [
        ("batch_size = true", 'optim.batch_size: expected an integer, got true'),
        ("epochs = 2.5", "optim.epochs: expected an integer, got 2.5"),
        ("betas = [0.9]", "optim.betas: expected a list of 2 numbers, got [0.9]"),
        ('betas = [0.9, "x"]', 'optim.betas: expected a list of 2 numbers, got [0.9, "x"]'),
        ('schedule = "cosin"', 'optim.schedule: expected one of "cosine", "linear", "constant", got "cosin" (did you mean "cosine"?)'),
        ("lr = -1", "optim.lr: expected a finite positive number, got -1.0"),
        ("warmup = 1.5", "optim.warmup: expected a fraction in [0, 1], got 1.5"),
        ("betas = [0.9, 1.0]", "optim.betas[1]: expected a number in [0, 1), got 1.0"),
        ("batch_size = 0", "optim.batch_size: expected an integer >= 1, got 0"),
        ("warmup_steps = 10\nwarmup = 0.2", "optim: set warmup (a fraction) or warmup_steps, not both"),
    ],
)
def test_bad_optim_values(tmp_path, line, expected):
    msg = error_of(tmp_path, f'[run]\nname = "a"\n[optim]\n{line}\n')
    assert re.match(rf"{re.escape(str(tmp_path / 'cfg.toml'))}:4:1: ", msg), msg
    assert msg.endswith(expected), msg


def test_bad_run_values(tmp_path):
    assert error_of(tmp_path, '[run]\nname = "a"\nseed = "x"\n').endswith('run.seed: expected an integer, got "x"')
    assert error_of(tmp_path, '[run]\nname = "a"\ndeterministic = 1\n').endswith("run.deterministic: expected true or false, got 1")
    assert error_of(tmp_path, '[run]\nname = "a/b"\n').endswith('run.name: expected a folder name, got "a/b"')
    assert error_of(tmp_path, '[run]\nname = "a"\ntask = "nocolon"\n').endswith(
        'run.task: expected "lm" or "package.module:factory", got "nocolon"'
    )
    assert error_of(tmp_path, '[log]\nevery = 1\n').endswith('missing table [run] (it needs at least name = "...")')
    msg = error_of(tmp_path, '[run]\nseed = 1\n')
    assert msg == f"{tmp_path / 'cfg.toml'}:1:1: [run] is missing required key 'name' (a string)"
    assert error_of(tmp_path, 'run = 3\n').endswith("run: expected a table, got 3")


def test_toml_syntax_error_has_file_line_and_column(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, '[run]\nname = "a"\n[optim]\nlr = \n'))
    assert str(info.value) == f"{tmp_path / 'cfg.toml'}:4:6: TOML syntax: Invalid value"
    assert (info.value.path, info.value.line, info.value.col) == (str(tmp_path / "cfg.toml"), 4, 6)
    msg = error_of(tmp_path, '[run]\nname = "a"\n[run]\n')
    assert msg.startswith(f"{tmp_path / 'cfg.toml'}:3:") and "TOML syntax" in msg


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: no such config file"):
        load_config(tmp_path / "nope.toml")


def test_from_dict_errors_name_the_key_without_a_file():
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"run": {"name": "a"}, "optim": {"lr": "fast"}})
    assert str(info.value) == 'optim.lr: expected a number, got "fast"'
    with pytest.raises(ConfigError, match=r"unknown key 'progres' in \[log\]; did you mean 'progress'\?"):
        Config.from_dict({"run": {"name": "a"}, "log": {"progres": False}})


# ---- the free-form [model] / [data] tables, checked by a task's own dataclass


@dataclass
class Encoder:
    depth: int = 2


@dataclass
class ModelCfg:
    dim: int
    dropout: float = 0.1
    kind: str = "mlp"
    encoder: Encoder = field(default_factory=Encoder)


def test_section_builds_the_tasks_dataclass(tmp_path):
    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[model]\ndim = 8\ndropout = 0\n[model.encoder]\ndepth = 3\n'))
    m = cfg.section("model", ModelCfg)
    assert m == ModelCfg(dim=8, dropout=0.0, encoder=Encoder(depth=3))


def test_section_errors_name_file_line_table_and_key(tmp_path):
    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[model]\ndim = 8\ndropot = 0.2\n'))
    with pytest.raises(ConfigError) as info:
        cfg.section("model", ModelCfg)
    assert str(info.value) == f"{tmp_path / 'cfg.toml'}:5:1: unknown key 'dropot' in [model]; did you mean 'dropout'?"

    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[model]\ndim = "big"\n'))
    with pytest.raises(ConfigError, match=r'cfg\.toml:4:1: model\.dim: expected an integer, got "big"'):
        cfg.section("model", ModelCfg)

    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[model]\ndropout = 0.2\n'))
    with pytest.raises(ConfigError, match=r"cfg\.toml:3:1: \[model\] is missing required key 'dim' \(an integer\)"):
        cfg.section("model", ModelCfg)

    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[model]\ndim = 1\n[model.encoder]\ndepht = 3\n'))
    with pytest.raises(ConfigError, match=r"cfg\.toml:6:1: unknown key 'depht' in \[model\.encoder\]; did you mean 'depth'\?"):
        cfg.section("model", ModelCfg)


# ---- non-finite, out-of-range and wrong-kind values (issue 14.3): each a positioned ConfigError


@pytest.mark.parametrize(
    "table, line, expected",
    [
        ("optim", "lr = inf", "optim.lr: expected a finite positive number, got inf"),
        ("optim", "lr = nan", "optim.lr: expected a finite positive number, got nan"),
        ("optim", "weight_decay = inf", "optim.weight_decay: expected a finite number >= 0, got inf"),
        ("optim", "clip = inf", "optim.clip: expected a finite number >= 0 (0 turns clipping off), got inf"),
        ("optim", "betas = [nan, 0.9]", "optim.betas[0]: expected a number in [0, 1), got nan"),
        ("optim", "warmup = -inf", "optim.warmup: expected a fraction in [0, 1], got -inf"),
        ("run", 'device = "gpu0"', 'run.device: expected "cpu", "cuda", "cuda:N", "mps" or "auto", got "gpu0"'),
        ("run", 'device = "meta"', 'run.device: expected "cpu", "cuda", "cuda:N", "mps" or "auto", got "meta"'),
        ("run", "seed = -1", "run.seed: expected an integer in [0, 2**63), got -1"),
        ("run", "threads = 0", "run.threads: expected a number of threads in [1, 1024], got 0"),
        ("run", "threads = 1000000000", "run.threads: expected a number of threads in [1, 1024], got 1000000000"),
        ("run", 'out_dir = ""', 'run.out_dir: expected a folder path, got ""'),
        ("run", 'out_dir = "a\\u0000b"', 'run.out_dir: expected a folder path, got "a\\u0000b"'),
    ],
)
def test_non_finite_and_out_of_range_values_name_the_key(tmp_path, table, line, expected):
    text = f'[run]\nname = "a"\n[{table}]\n{line}\n' if table != "run" else f'[run]\nname = "a"\n{line}\n'
    msg = error_of(tmp_path, text)
    row = 4 if table != "run" else 3
    assert msg == f"{tmp_path / 'cfg.toml'}:{row}:1: {expected}"


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", "mps"])
def test_device_names_are_checked_for_spelling_only_at_load(tmp_path, device):
    # whether this machine has the device is the trainer's question (tests/lm/test_train.py)
    assert load_config(write(tmp_path, f'[run]\nname = "a"\ndevice = "{device}"\n')).run.device == device


@given(lr=st.floats(allow_nan=True, allow_infinity=True, width=64))
@settings(max_examples=200, deadline=None)
def test_any_learning_rate_is_accepted_exactly_when_finite_and_positive(lr):
    ok = math.isfinite(lr) and lr > 0
    try:
        cfg = Config.from_dict({"run": {"name": "a"}, "optim": {"lr": lr}})
    except ConfigError as err:
        assert not ok and str(err).startswith("optim.lr: expected a finite positive number, got ")
    else:
        assert ok and cfg.optim.lr == lr and Config.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "name, what", [("g.fsg", "an FSG grammar"), ("g.pcfg", "a PCFG"), ("b.regex", "a regex bank"), ("l.lex", "a lexicon"),
                   ("x.safetensors", "a compiled artifact"), ("last.pt", "a checkpoint")],
)
def test_a_grammar_or_artifact_given_as_config_says_what_it_is(tmp_path, name, what):
    path = write(tmp_path, '[run]\nname = "a"\n', name)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: expected a TOML config (.toml), got {what}"


def test_a_folder_given_as_config(tmp_path):
    with pytest.raises(ConfigError, match=r": expected a TOML config \(\.toml\), got a folder$"):
        load_config(tmp_path)


def test_config_error_is_positioned_at_any_key(tmp_path):
    cfg = load_config(write(tmp_path, '[run]\nname = "a"\n[data]\n  grammar = "x.pcfg"\n'))
    err = cfg.error("data.grammar", "expected an .fsg grammar")
    assert str(err) == f"{tmp_path / 'cfg.toml'}:4:3: data.grammar: expected an .fsg grammar"
    assert (err.line, err.col, err.key) == (4, 3, "data.grammar")
    assert str(cfg.error("model.dim", "absent")) == f"{tmp_path / 'cfg.toml'}: model.dim: absent"  # not in the file
    assert str(Config.from_dict({"run": {"name": "a"}}).error("run.device", "no GPU")) == "run.device: no GPU"
