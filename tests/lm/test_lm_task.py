"""The built-in language-model task (`[run] task = "lm"`, issue 28): a run trained from a TOML
file alone, with a user lexicon (fusion), the idea gate, semantic KL and the aux loss all on;
every loss term in metrics.jsonl; `neurosym eval` and `neurosym generate` on the run; an
exact resume after SIGKILL; every combination of the three extras; the input formats; bad
configs as one-line errors with exit status 2 that write nothing."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from neurosym.cli.main import main
from neurosym.lm.checkpoint import load_checkpoint
from neurosym.lm.config import Config, load_config
from neurosym.lm.rundir import config_differences
from neurosym.lm.task import LMTask, file_digest, read_documents
from neurosym.lm.train import Trainer

ROOT = Path(__file__).resolve().parents[2]

LEXICON = """\
%feature polarity range=-1..1
%class ADJ_POS good great happy
%class ADJ_NEG bad terrible sad
%feature is_adj = class(ADJ_POS, ADJ_NEG)
%feature is_eos = token(".")
%feature pos = value(polarity, part=pos)  terms=low,high  kernel=power(base=0.9, tau=0.35)  centers=0.3,1.0
%feature neg = value(polarity, part=neg)  terms=low,high  kernel=power(base=0.9, tau=0.35)  centers=0.3,1.0
good polarity=0.6
great polarity=0.9
happy polarity=0.7
bad polarity=-0.6
terrible polarity=-0.9
sad polarity=-0.7
"""

GRAMMAR = "CLAUSE: /(the|a)(cat|dog|bird)(likes|sees|loves)(good|great|bad|sad)(food|music|books)\\./\n"

CONFIG = """\
[run]
name = "mine"
out_dir = "runs"
seed = 0
threads = 1
task = "lm"
device = "auto"
precision = "fp32"

[data]
train = "corpus/train.txt"
valid = "corpus/valid.txt"
test = "corpus/test.txt"
tokenizer = "word"
min_freq = 1
window = 16

[model]
d_model = 32
n_layers = 1
n_heads = 2
d_ff = 64
fusion = { lexicon = "my.lex" }
idea = { weight = 1.0, window = 4, hidden = 16, stop_words = 2 }

[objective]
semantic_kl = { lambda = 0.5, temperature = 0.1 }
aux = { weight = 0.5 }

[optim]
lr = 3e-3
batch_size = 16
epochs = 2

[log]
every = 1
checkpoint_every = 3
progress = false
"""


def sentences(n: int, seed: int) -> str:
    rng = random.Random(seed)
    words = (["the cat", "the dog", "a bird", "my friend"], ["likes", "sees", "loves", "hates"],
             ["good", "bad", "great", "sad", "happy"], ["food", "music", "books", "rain"])
    return "".join(" ".join(rng.choice(w) for w in words) + " .\n" for _ in range(n))


def make_project(folder: Path, config: str = CONFIG) -> Path:
    """A corpus, a lexicon, a grammar and the config in ``folder``; returns the config file."""
    (folder / "corpus").mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train", 240, 0), ("valid", 40, 1), ("test", 40, 2)):
        (folder / "corpus" / f"{name}.txt").write_text(sentences(n, seed))
    (folder / "my.lex").write_text(LEXICON)
    (folder / "g.regex").write_text(GRAMMAR)
    (folder / "mine.toml").write_text(config)
    return folder / "mine.toml"


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The Must-show run: trained by `neurosym train mine.toml` in its own folder."""
    folder = tmp_path_factory.mktemp("project")
    make_project(folder)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = cli("train", "mine.toml")
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return folder


@pytest.fixture
def inside(project, monkeypatch):
    monkeypatch.chdir(project)
    return project


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------- the Must-show run
def test_every_loss_term_is_logged_on_its_own(inside):
    lines = metrics(inside / "runs" / "mine")
    train = [m for m in lines if m["kind"] == "train"]
    assert len(train) == 16  # 240 lines of 8 tokens (<bos>, 6 words, <eos>) = 119 windows of 16: 8 batches x 2 epochs
    for m in train:
        for key in ("ce", "kl", "temperature", "idea_bce", "idea_alpha", "aux"):
            assert math.isfinite(m[key]), (key, m)
        # the logged loss is the sum of its terms: (1 - lam) ce + lam kl + w bce + aux
        assert m["loss"] == pytest.approx(0.5 * m["ce"] + 0.5 * m["kl"] + 1.0 * m["idea_bce"] + m["aux"], rel=1e-5)
    assert train[-1]["ce"] < train[0]["ce"]
    evals = [m for m in lines if m["kind"] == "eval"]
    assert len(evals) == 2 and all(math.isfinite(m["ppl"]) and math.isfinite(m["ppl_ungated"]) for m in evals)


def test_the_run_folder_is_self_contained(inside):
    run = inside / "runs" / "mine"
    assert {"config.json", "metrics.jsonl", "last.pt", "model.safetensors", "vocab.json", "lexicon.lex", "data.json",
            "checksums.json"} <= {p.name for p in run.iterdir()}
    sums = json.loads((run / "checksums.json").read_text())
    assert sums == {name: file_digest(run / name) for name in ("model.safetensors", "vocab.json", "lexicon.lex", "data.json")}
    assert (run / "lexicon.lex").read_text() == LEXICON
    weights, state = load_file(str(run / "model.safetensors")), load_checkpoint(run)["model"]
    assert weights.keys() == state.keys() and all(torch.equal(weights[k], state[k]) for k in weights)
    vocab = json.loads((run / "vocab.json").read_text())
    assert vocab["tokens"][:4] == ["<pad>", "<unk>", "<eos>", "<bos>"] and "good" in vocab["tokens"]
    assert json.loads((run / "data.json").read_text())["test"] == [str((inside / "corpus" / "test.txt").resolve())]


def test_eval_prints_finite_perplexities(inside, tmp_path, monkeypatch):
    for split in ("valid", "test"):
        result = cli("eval", "runs/mine", "--split", split, "--json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["split"] == split and report["tokens"] > 0
        assert all(math.isfinite(report[k]) for k in ("ppl", "ppl_ungated", "top1", "ece"))
        assert 1 < report["ppl"] < 40  # 30-odd words; the text is far from uniform
    same = json.loads(cli("eval", "runs/mine", "--json").output)
    last_eval = [m for m in metrics(inside / "runs" / "mine") if m["kind"] == "eval"][-1]
    assert same["ppl"] == pytest.approx(last_eval["ppl"], rel=1e-6)  # the trainer's evaluation, read back
    line = cli("eval", "runs/mine")
    assert line.exit_code == 0 and re.fullmatch(r"runs/mine \(valid, [\d,]+ tokens\): ppl [\d.]+, ppl_ungated [\d.]+, top1 [\d.]+, ece [\d.]+\n", line.output)
    # the run is found from any folder: it reads its own vocabulary, lexicon and recorded files
    monkeypatch.chdir(tmp_path)
    moved = cli("eval", str(inside / "runs" / "mine"), "--json")
    assert moved.exit_code == 0 and json.loads(moved.output)["ppl"] == pytest.approx(same["ppl"], rel=1e-12)


def test_generate_follows_the_grammar(inside):
    result = cli("generate", "runs/mine", "--grammar", "g.regex", "-n", "5", "--json", "--seed", "1")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    pattern = GRAMMAR.split("/")[1]
    assert len(rows) == 5
    for r in rows:
        assert r["status"] == "eos"
        # a word vocabulary spells a text as its words one after another: the regex reads that
        assert re.fullmatch(pattern, r["text"].replace(" ", "")), r["text"]
        assert math.isfinite(r["model_log_prob"]) and r["model_log_prob"] < 0


def test_a_checksum_mismatch_is_refused(project, tmp_path, monkeypatch):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(project / "runs" / "mine", copy)
    with open(copy / "vocab.json", "a") as f:
        f.write(" ")
    result = cli("eval", str(copy))
    assert result.exit_code == 2 and "vocab.json: missing or changed since training" in result.output


# ---------------------------------------------------------------------- exact resume after SIGKILL
KILLER = """
import os, signal, sys
from neurosym.lm.train import Trainer, resolve_task
from neurosym.lm.config import load_config
config = load_config(sys.argv[1])
def die(trainer, step):
    if step == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
Trainer(config, resolve_task(config), callbacks=[die]).fit()
"""


def test_kill_9_and_resume_equal_the_uninterrupted_run(project, tmp_path, monkeypatch):
    make_project(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", KILLER, "mine.toml", "11"], cwd=tmp_path, env=env)
    assert proc.returncode == -signal.SIGKILL
    run = tmp_path / "runs" / "mine"
    assert load_checkpoint(run)["step"] == 9 and not (run / "model.safetensors").exists()  # steps 10 and 11 are lost
    monkeypatch.chdir(tmp_path)  # a new run over the killed one's checkpoint is refused (in this process: it stops at once)
    again = cli("train", "mine.toml")
    assert again.exit_code == 2 and "already has a checkpoint" in again.output
    assert load_checkpoint(run)["step"] == 9
    resumed = subprocess.run([sys.executable, "-m", "neurosym.cli.main", "train", "mine.toml", "--resume"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    a, b = load_file(str(project / "runs" / "mine" / "model.safetensors")), load_file(str(run / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-6, msg=k)
    assert metrics(run) == [{**m, "seconds": n["seconds"]} for m, n in zip(metrics(project / "runs" / "mine"), metrics(run))]


# ---------------------------------------------------------------------- every combination trains
SMALL = """\
[run]
name = "{name}"
out_dir = "runs"
threads = 1

[data]
train = "corpus/train.txt"
valid = "corpus/valid.txt"
window = 12

[model]
d_model = 16
n_layers = 1
n_heads = 2
d_ff = 32
{model}

[objective]
{objective}

[optim]
batch_size = 32
epochs = 1

[log]
every = 1
progress = false
"""


@pytest.mark.parametrize("fusion,idea,kl", list(itertools.product([False, True], repeat=3)))
def test_every_combination_of_fusion_idea_gate_and_semantic_kl_trains(tmp_path, monkeypatch, fusion, idea, kl):
    name = f"f{fusion:d}i{idea:d}k{kl:d}"
    model = ("fusion = { lexicon = \"my.lex\" }\n" if fusion else "") + ("idea = { weight = 0.5, window = 3, hidden = 8 }\n" if idea else "")
    objective = "semantic_kl = { lambda = 0.3, temperature = 0.5, schedule = \"linear\", temperature_end = 0.1 }" if kl else ""
    make_project(tmp_path, SMALL.format(name=name, model=model, objective=objective))
    monkeypatch.chdir(tmp_path)
    config = load_config("mine.toml")
    assert config.run.task is None  # [data] train makes it the lm task
    result = Trainer(config, LMTask(config)).fit()
    train = [m for m in metrics(tmp_path / "runs" / name) if m["kind"] == "train"]
    expected = {"ce"} | ({"kl", "temperature"} if kl else set()) | ({"idea_bce", "idea_alpha"} if idea else set())
    assert set(train[0]) - {"kind", "step", "epoch", "loss", "lr", "grad_norm", "seconds"} == expected
    lam = 0.3 if kl else 0.0
    for m in train:
        total = (1 - lam) * m["ce"] + lam * m.get("kl", 0.0) + 0.5 * m.get("idea_bce", 0.0)
        assert m["loss"] == pytest.approx(total, rel=1e-5)
    if kl:
        assert train[0]["temperature"] == pytest.approx(0.5) and train[-1]["temperature"] < 0.5
    assert math.isfinite(result.eval["ppl"]) and ("ppl_ungated" in result.eval) == idea
    model_ = LMTask(config).build_model(config)
    assert (model_.adapter is not None) == fusion and (model_.output is not None) == idea


# ---------------------------------------------------------------------- input formats
def test_gz_conllu_jsonl_and_globs_are_read(tmp_path):
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(b"one two\n\nthree\n"))
    (tmp_path / "b.conllu").write_text("# sent_id = 1\n1\tHello\thello\tINTJ\t_\t_\t0\troot\t_\t_\n"
                                       "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n2\tdo\tdo\tAUX\t_\t_\t1\tx\t_\t_\n3\tn't\tnot\tPART\t_\t_\t1\tx\t_\t_\n\n")
    (tmp_path / "c.jsonl").write_text('{"body": "four five"}\n\n{"body": "six", "other": 1}\n')
    assert read_documents(tmp_path / "a.txt.gz") == ["one two", "three"]
    assert read_documents(tmp_path / "b.conllu") == ["Hello do n't"]
    assert read_documents(tmp_path / "c.jsonl", "body") == ["four five", "six"]
    (tmp_path / "bad.jsonl").write_text('{"body": "x"}\n{"text": "y"}\n')
    with pytest.raises(Exception, match=r"bad\.jsonl:2:1: expected an object with a string field 'body'"):
        read_documents(tmp_path / "bad.jsonl", "body")
    cfg = Config.from_dict({"run": {"name": "g", "out_dir": str(tmp_path / "runs")},
                            "data": {"train": [str(tmp_path / "*.gz"), str(tmp_path / "c.jsonl")], "text_field": "body", "window": 2}})
    task = LMTask(cfg)
    assert task.train_docs == ["one two", "three", "four five", "six"]
    ids, targets = task.train_windows()
    # <bos> one two <eos> <bos> three <eos> ...: <bos> is read, never predicted (its target is <pad>)
    assert task.vocab.decode(ids.reshape(-1).tolist(), skip_special=False).split()[:4] == ["<bos>", "one", "two", "<eos>"]
    assert int((targets == task.pad_id).sum()) >= 1 and not bool((targets == task.bos_id).any())


# ---------------------------------------------------------------------- bad configs
@pytest.mark.parametrize("edit,message", [
    (("min_freq = 1", "min_frq = 1"), r"mine\.toml:\d+:1: unknown key 'min_frq' in \[data\]; did you mean 'min_freq'\?"),
    (("n_layers = 1", "n_layer = 1"), r"unknown key 'n_layer' in \[model\]; did you mean 'n_layers'\?"),
    (("lambda = 0.5", "lambda = 0.5, temp = 1"), r"unknown key 'temp' in \[objective\.semantic_kl\]"),
    (('train = "corpus/train.txt"', 'train = "corpus/nope.txt"'), r"mine\.toml:\d+:1: data\.train: no such file 'corpus/nope\.txt'"),
    (('train = "corpus/train.txt"', 'train = "corpus/*.md"'), r"data\.train: no file matches 'corpus/\*\.md'"),
    (('lexicon = "my.lex"', 'lexicon = "none.lex"'), r"model\.fusion: lexicon: no such file 'none\.lex'"),
    (('precision = "fp32"', 'precision = "bf16"'), r"mine\.toml:\d+:1: run\.precision: \"bf16\" autocasts on CUDA only"),
    (('precision = "fp32"', 'precision = "fp16"'), r"run\.precision: expected one of \"fp32\", \"bf16\""),
    (('task = "lm"', 'task = "lmm"'), r'run\.task: expected "lm" or "package\.module:factory"'),
    (("aux = { weight = 0.5 }", "aux = { weight = -1 }"), r"objective\.aux\.weight: expected a finite number >= 0"),
    (("window = 16", "window = 4000"), r"mine\.toml:\d+:1: data\.train: the training text is shorter than one window of 4000 tokens"),
    (("window = 16", "window = 400"), r"mine\.toml:\d+:1: data\.valid: the validation text is shorter than one window of 400 tokens"),
    (("min_freq = 1", "min_freq = 100000"), r"mine\.toml:\d+:1: data\.min_freq: no word of the training text occurs 100000 times"),
])
def test_bad_configs_are_one_line_errors_naming_the_key(tmp_path, monkeypatch, edit, message):
    if "bf16" in edit[1] and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: bf16 is allowed")
    make_project(tmp_path, CONFIG.replace(*edit))
    monkeypatch.chdir(tmp_path)
    result = cli("train", "mine.toml")
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and re.search(message, result.output), result.output
    assert not (tmp_path / "runs").exists()


def test_a_lexicon_that_covers_no_word_is_refused(tmp_path, monkeypatch):
    make_project(tmp_path)
    (tmp_path / "my.lex").write_text(LEXICON.replace("good", "gut").replace("bad", "schlecht").replace("great", "toll")
                                     .replace("happy", "froh").replace("terrible", "furchtbar").replace("sad", "traurig")
                                     .replace('token(".")', 'token("!")'))
    monkeypatch.chdir(tmp_path)
    result = cli("train", "mine.toml")
    assert result.exit_code == 2 and "model.fusion: lexicon my.lex does not cover the vocabulary" in result.output


def test_nothing_is_written_to_an_existing_run_without_resume(inside):
    run = inside / "runs" / "mine"
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.iterdir()}
    result = cli("train", "mine.toml")
    assert result.exit_code == 2 and "already has a checkpoint" in result.output and result.output.count("\n") == 1
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.iterdir()} == before


def test_older_checkpoints_without_the_new_keys_still_resume():
    current = Config.from_dict({"run": {"name": "a"}}).to_dict()
    old = json.loads(json.dumps(current))
    del old["objective"], old["run"]["precision"]
    assert config_differences(old, current) == []
    assert config_differences(old, {**current, "objective": {"aux": {}}}) != []


# ---------------------------------------------------------------------- DDP (slow)
@pytest.mark.slow
def test_torchrun_two_processes_equal_one(tmp_path):
    """torchrun --nproc_per_node=2 (CPU, gloo) on the built-in task with every extra on: each
    rank takes half of every global batch, so the run equals one process up to the order
    in which gradients are summed (no dropout: it draws per-rank random numbers)."""
    config = CONFIG.replace("d_ff = 64", "d_ff = 64\ndropout = 0.0").replace("epochs = 2", "epochs = 1")
    make_project(tmp_path, config)
    (tmp_path / "two.toml").write_text(config.replace('name = "mine"', 'name = "two"').replace('device = "auto"', 'device = "cpu"'))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, "-m", "neurosym.cli.main", "train", "mine.toml"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert one.returncode == 0, one.stderr
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "neurosym.cli.main", "train", "two.toml"]
    two = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = load_file(str(tmp_path / "runs" / "mine" / "model.safetensors")), load_file(str(tmp_path / "runs" / "two" / "model.safetensors"))
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    print(f"\nDDP vs one process, max |weight difference| = {worst:.3g}")
    assert worst < 2e-5  # measured 1.0e-6 after 8 steps (6.2e-6 after 13): the all-reduce sums the two halves' gradients in another order
    la = [m["loss"] for m in metrics(tmp_path / "runs" / "mine") if m["kind"] == "train"]
    lb = [m["loss"] for m in metrics(tmp_path / "runs" / "two") if m["kind"] == "train"]
    assert len(la) == len(lb) and max(abs(x - y) for x, y in zip(la, lb)) < 1e-5
    assert load_checkpoint(tmp_path / "runs" / "two")["world_size"] == 2


# ---------------------------------------------------------------------- a transformers model: hf = DIR
HF_CONFIG = """\
[run]
name = "{name}"
threads = 1

[data]
train = "corpus/train.txt"
valid = "corpus/valid.txt"
window = 16

[model]
hf = "{folder}"
{lora}
fusion = {{ lexicon = "my.lex" }}
idea = {{ weight = 1.0, window = 4, hidden = 16, stop_words = 2 }}

[objective]
semantic_kl = {{ lambda = 0.5, temperature = 0.1 }}
aux = {{ weight = 0.5 }}

[optim]
lr = 1e-2
batch_size = 16
epochs = 3

[log]
every = 1
progress = false
"""


def save_tiny_models(folder: Path) -> None:
    """A randomly initialised GPT-2 and BERT (save_pretrained, no download), each with a word-level tokenizer.json."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = sorted({w for line in sentences(240, 0).splitlines() for w in line.split()})
    specials = ["<pad>", "<unk>", "<eos>", "<bos>"]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(specials + words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(specials)
    V = len(specials) + len(words)
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_positions=32, n_embd=32, n_layer=1, n_head=2,
                                                                bos_token_id=3, eos_token_id=2))
    gpt2.save_pretrained(folder / "gpt2")
    tok.save(str(folder / "gpt2" / "tokenizer.json"))
    bert = transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                                intermediate_size=64))
    bert.save_pretrained(folder / "bert")
    tok.save(str(folder / "bert" / "tokenizer.json"))


@pytest.mark.parametrize("lora", [False, True])
def test_a_transformers_model_trains_with_the_same_objective(tmp_path, monkeypatch, lora):
    if lora:
        pytest.importorskip("peft", reason="LoRA needs peft (the hf extra)")
    make_project(tmp_path)
    save_tiny_models(tmp_path)
    (tmp_path / "hf.toml").write_text(HF_CONFIG.format(name="hf", folder="gpt2", lora="lora = { r = 4, alpha = 8 }" if lora else ""))
    monkeypatch.chdir(tmp_path)
    result = cli("train", "hf.toml")
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "hf"
    train = [m for m in metrics(run) if m["kind"] == "train"]
    for m in train:
        assert all(math.isfinite(m[k]) for k in ("ce", "kl", "idea_bce", "aux"))
        assert m["loss"] == pytest.approx(0.5 * m["ce"] + 0.5 * m["kl"] + m["idea_bce"] + m["aux"], rel=1e-5)
    first, last = sum(m["loss"] for m in train[:3]) / 3, sum(m["loss"] for m in train[-3:]) / 3
    assert last < first  # the loss falls
    report = json.loads(cli("eval", "runs/hf", "--split", "valid", "--json").output)
    assert math.isfinite(report["ppl"]) and math.isfinite(report["ppl_ungated"])
    assert json.loads((run / "data.json").read_text())["hf"] == str((tmp_path / "gpt2").resolve())
    original = load_file(str(tmp_path / "gpt2" / "model.safetensors"))
    trained = load_file(str(run / "model.safetensors"))
    if lora:  # the base's own weights are exactly as saved; only the adapters (and the plug-ins) trained
        base = {k.removeprefix("base.base_model.model.").replace(".base_layer", ""): v for k, v in trained.items()
                if k.startswith("base.") and "lora_" not in k}
        assert {k for k in original} <= set(base)
        assert all(torch.equal(base[k], original[k]) for k in original)
        assert any("lora_B" in k and bool(v.abs().sum() > 0) for k, v in trained.items())  # B starts at 0
    else:
        assert not torch.equal(trained["base.transformer.h.0.attn.c_attn.weight"], original["transformer.h.0.attn.c_attn.weight"])


def test_hf_errors_are_one_line(tmp_path, monkeypatch):
    make_project(tmp_path)
    save_tiny_models(tmp_path)
    monkeypatch.chdir(tmp_path)
    cases = {
        HF_CONFIG.format(name="a", folder="bert", lora=""): r"model\.hf: bert: BertLMHeadModel is not causal",
        HF_CONFIG.format(name="b", folder="nowhere", lora=""): r"model\.hf: nowhere: not a transformers model folder",
        HF_CONFIG.format(name="c", folder="gpt2", lora="d_model = 64"): r"model\.d_model: the architecture comes from model\.hf",
        CONFIG.replace("fusion = {", 'lora = { r = 2 }\nfusion = {'): r"model\.lora: LoRA adapts a transformers model; it needs model\.hf",
        HF_CONFIG.format(name="d", folder="gpt2", lora="").replace("window = 16", "window = 64"): r"data\.window: expected at most the model's 32 positions",
    }
    for text, message in cases.items():
        (tmp_path / "bad.toml").write_text(text)
        result = cli("train", "bad.toml")
        assert result.exit_code == 2 and result.output.count("\n") == 1 and re.search(message, result.output), result.output
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------- an .fsg in place of text
GRAMMAR_CONFIG = """\
[run]
name = "g"
threads = 1

[data]
grammar = "{grammar}"
train_sentences = 300
valid_sentences = 60
test_sentences = 60
window = 16

[model]
d_model = 16
n_layers = 1
n_heads = 2
d_ff = 32

[optim]
batch_size = 16
epochs = 1

[log]
progress = false
"""


def test_an_fsg_stands_in_for_text_with_its_exact_floor(tmp_path, monkeypatch):
    from neurosym.compile.fsg import load_fsg
    from neurosym.data import shipped_file
    from neurosym.lm.metrics import floor_ppl

    grammar = shipped_file("grammars/clause.fsg")
    (tmp_path / "g.toml").write_text(GRAMMAR_CONFIG.format(grammar=grammar.as_posix()))
    monkeypatch.chdir(tmp_path)
    result = cli("train", "g.toml")
    assert result.exit_code == 0, result.output
    floor = floor_ppl(load_fsg(grammar), with_eos=True)
    for split in ("valid", "test"):
        report = json.loads(cli("eval", "runs/g", "--split", split, "--json").output)
        assert report["floor_ppl"] == pytest.approx(floor, rel=1e-12) and report["ppl"] > floor and math.isfinite(report["ppl"])
    assert json.loads((tmp_path / "runs" / "g" / "data.json").read_text()) == {"grammar": str(grammar.resolve())}
    rows = json.loads(cli("generate", "runs/g", "--grammar", str(grammar), "-n", "3", "--json").output)
    wa = load_fsg(grammar)
    assert all(r["status"] == "eos" and r["grammar_log_prob"] == pytest.approx(float(wa.log_prob(torch.tensor([r["tokens"]]))[0]))
               for r in rows)
    # the same sentences every time: a task rebuilt from the config samples what the run trained on
    config = load_config("g.toml")
    a, b = LMTask(config, run_dir=tmp_path / "nowhere"), LMTask(config, run_dir=tmp_path / "nowhere")
    assert a.train_docs == b.train_docs and len(a.train_docs) == 300
    assert torch.equal(a.eval_windows("valid")[0], b.eval_windows("valid")[0])
    (tmp_path / "bad.toml").write_text(GRAMMAR_CONFIG.format(grammar=grammar.as_posix()).replace("[data]", '[data]\ntrain = "x.txt"'))
    bad = cli("train", "bad.toml")
    assert bad.exit_code == 2 and "data.train: the grammar's sampled sentences are the text with data.grammar" in bad.output
    (tmp_path / "lex.toml").write_text(GRAMMAR_CONFIG.format(grammar="my.lex").replace('name = "g"', 'name = "lex"'))
    lex = cli("train", "lex.toml")
    assert lex.exit_code == 2 and "data.grammar: expected an .fsg grammar" in lex.output


def test_eval_pos_gives_the_same_pos_miss_rate(inside, tmp_path):
    from neurosym.lm.metrics import same_pos_miss_rate
    from neurosym.lm.task import load_lm_run

    rows = [("the", "DET"), ("cat", "NOUN"), ("likes", "VERB"), ("good", "ADJ"), ("food", "NOUN"), (".", "PUNCT")]
    sentence = "".join(f"{i}\t{w}\t{w}\t{t}\t_\t_\t0\tx\t_\t_\n" for i, (w, t) in enumerate(rows, 1)) + "\n"
    conllu = tmp_path / "tagged.conllu"
    conllu.write_text(sentence * 8)
    result = cli("eval", "runs/mine", "--pos", str(conllu), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["pos_misses"] > 0 and 0 <= report["same_pos_miss"] <= 1 and math.isfinite(report["ppl"])
    # the same figure by hand: the model's top tagged word at every position, against the gold word
    task, model = load_lm_run(inside / "runs" / "mine")
    tags = [None if s is None else dict(rows).get(s) for s in task.vocab.surfaces]
    ids, targets = task.eval_windows("pos", [conllu])
    with torch.no_grad():
        logits = model(ids, features=task.inputs(ids, targets)["features"]).logits
    pred = logits.masked_fill(torch.tensor([t is None for t in tags]), -math.inf).argmax(-1)
    expected = same_pos_miss_rate(pred, torch.where(targets == task.pad_id, task.eos_id, targets), tags)
    assert report["same_pos_miss"] == pytest.approx(expected["same_pos_miss"], nan_ok=True) and report["pos_misses"] == expected["misses"]
