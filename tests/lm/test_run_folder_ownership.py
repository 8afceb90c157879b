"""Run folders are owned (issue 44, point 1): `neurosym train` refuses, before writing
anything, a run folder that holds a file it did not write (unless --force), and always a
config or an input lying in the run folder under a name the run writes, or a run folder
that is an input folder (a saved Hugging Face model); every file a user owns is
byte-identical afterwards. The run records what it wrote in `.neurosym-run.json`."""

from __future__ import annotations

import json

import pytest

from neurosym.lm.rundir import MANIFEST
from test_lm_task import CONFIG, cli, make_project

pytestmark = pytest.mark.usefixtures("one_thread")

FAST = CONFIG.replace("epochs = 2", "epochs = 1").replace("idea = { weight = 1.0, window = 4, hidden = 16, stop_words = 2 }\n", "")


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def refused(args, folder, match):
    before = snapshot(folder)
    result = cli(*args)
    assert result.exit_code == 2 and result.output.count("\n") == 1 and match in result.output, result.output
    assert snapshot(folder) == before  # nothing written, nothing deleted
    return result.output


def test_a_folder_holding_the_users_files_is_refused_and_force_never_replaces_an_input(tmp_path, monkeypatch):
    make_project(tmp_path, FAST)
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "mine"
    run.mkdir(parents=True)
    (run / "notes.txt").write_text("mine, not the run's")
    (run / "model.safetensors").write_bytes(b"the user's weights")
    refused(["train", "mine.toml"], tmp_path, "holds files this run did not write (model.safetensors, notes.txt)")
    result = cli("train", "mine.toml", "--force")  # allowed: the run's own names are written, the rest left alone
    assert result.exit_code == 0, result.output
    assert (run / "notes.txt").read_text() == "mine, not the run's"
    recorded = json.loads((run / MANIFEST).read_text())
    assert "notes.txt" not in recorded and {"config.json", "last.pt", "model.safetensors", "vocab.json"} <= set(recorded)


@pytest.mark.parametrize("name", ["config.json", "vocab.json", "data.json", "checksums.json", "metrics.jsonl", "model.safetensors"])
def test_an_input_under_a_name_the_run_writes_is_refused_even_with_force(tmp_path, monkeypatch, name):
    make_project(tmp_path, FAST.replace('valid = "corpus/valid.txt"', f'valid = "runs/mine/{name}"'))
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "mine"
    run.mkdir(parents=True)
    (run / name).write_text((tmp_path / "corpus" / "valid.txt").read_text())
    match = "" if name.endswith(".jsonl") else "a name the run writes"  # a .jsonl input is read as JSON lines first: refused there
    for extra in ([], ["--force"]):
        refused(["train", "mine.toml", *extra], tmp_path, match)


def test_the_users_toml_named_config_json_in_the_run_folder_is_refused(tmp_path, monkeypatch):
    make_project(tmp_path, FAST)
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "mine"
    run.mkdir(parents=True)
    (run / "config.json").write_text(FAST)
    for extra in ([], ["--force"]):
        refused(["train", "runs/mine/config.json", *extra], tmp_path, "a name the run writes")


def test_a_run_named_after_a_hugging_face_model_folder_never_touches_it(tmp_path, monkeypatch):
    make_project(tmp_path, FAST.replace('tokenizer = "word"', 'tokenizer = "runs/mine"'))
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "runs" / "mine"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "gpt2"}')
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "tokenizer.json").write_text("{}")
    for extra in ([], ["--force"]):
        refused(["train", "mine.toml", *extra], tmp_path, "")


def test_a_finished_run_resumes_and_a_run_folder_of_its_own_is_not_foreign(tmp_path, monkeypatch):
    make_project(tmp_path, FAST)
    monkeypatch.chdir(tmp_path)
    assert cli("train", "mine.toml").exit_code == 0
    run = tmp_path / "runs" / "mine"
    recorded = set(json.loads((run / MANIFEST).read_text()))
    assert recorded == {p.name for p in run.iterdir()} - {MANIFEST, ".neurosym.lock"}
    result = cli("train", "mine.toml", "--resume")  # its lexicon copy is its own, not an input in the way
    assert result.exit_code == 0, result.output
    (run / "mine.txt").write_text("a user's file, added later")
    assert cli("train", "mine.toml", "--resume").exit_code == 0  # resuming keeps the run going; the file is left alone
    assert (run / "mine.txt").read_text() == "a user's file, added later"
    assert "mine.txt" not in json.loads((run / MANIFEST).read_text())


@pytest.mark.parametrize("task, said", [
    ("json:loads", "is not a task factory"),
    ("os:system", "is not a task factory"),
    ("os:sep", "not a task factory"),
    ("copy:copy", "not a training task (it has no build_model, train_batches, loss)"),
])
def test_a_task_that_is_not_a_task_factory_is_a_config_error(tmp_path, monkeypatch, task, said):
    make_project(tmp_path, FAST.replace('task = "lm"', f'task = "{task}"'))
    monkeypatch.chdir(tmp_path)
    result = cli("train", "mine.toml")
    assert result.exit_code == 2 and "run.task" in result.output and said in result.output and "bug" not in result.output, result.output
    assert not (tmp_path / "runs").exists()


def test_an_artifact_whose_kind_is_not_a_string_is_an_input_error(tmp_path):
    import neurosym
    from neurosym.compile.artifact import save
    from neurosym.errors import NeurosymError

    path = save(neurosym.compile_regex("ab+"), tmp_path / "a.safetensors")
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = json.loads(header["__metadata__"]["neurosym"])
    meta["kind"] = ["automaton"]
    header["__metadata__"]["neurosym"] = json.dumps(meta)
    body = json.dumps(header).encode()
    body += b" " * (n - len(body)) if len(body) <= n else b""
    crafted = tmp_path / "b.safetensors"
    crafted.write_bytes(len(body).to_bytes(8, "little") + body + raw[8 + n:])
    with pytest.raises(NeurosymError, match="unknown artifact kind"):
        neurosym.load(crafted)


def test_torch_out_of_memory_reads_as_out_of_memory():
    from neurosym.cli.main import error_line

    msg = error_line(RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate 80000000000 bytes."))
    assert msg.startswith("out of memory") and "bug" not in msg
