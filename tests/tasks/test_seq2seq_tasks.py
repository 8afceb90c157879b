"""SCAN and advising text-to-SQL (issue 20) against the released files, read here with
plain string operations and ``json``; the exact-match metric by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from neurosym.tasks import BOS_ID, EOS_ID, IGNORE, Scan, SemanticParsing, all_tasks, get_task, sequence_exact_match
from neurosym.tasks.seq2seq import read_scan

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
pytestmark = pytest.mark.usefixtures("one_thread")


def need(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} is absent (../shared/data)")


def released(path: Path) -> list[tuple[str, str]]:
    """(command, actions) of a SCAN file, split on the literal markers."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            left, right = line.split(" OUT: ")
            out.append((left.removeprefix("IN: "), right))
    return out


def targets(data, split, i: int) -> list[str]:
    row = split.labels[i].tolist()
    n = row.index(EOS_ID)
    assert all(t == IGNORE for t in row[n + 1:])
    return [data.target_vocab.tokens[t] for t in row[:n]]


def source(data, split, i: int) -> list[str]:
    return [data.vocab.tokens[t] for t in split.ids[i, : int(split.lengths[i])].tolist()]


@need(SHARED / "scan")
def test_scan_simple_rows_are_the_released_pairs():
    data = Scan().build(None, None, seed=0)
    for split, name, count in ((data.train, "train", 16_728), (data.test, "test", 4_182)):
        pairs = released(SHARED / "scan" / "simple_split" / f"tasks_{name}_simple.txt")
        assert len(split) == len(pairs) == count  # the README's counts
        for i in range(0, len(pairs), 7):
            assert " ".join(source(data, split, i)) == pairs[i][0]
            assert " ".join(targets(data, split, i)) == pairs[i][1]
    assert data.target_vocab.tokens[:2] == ["<bos>", "<eos>"] and BOS_ID == 0
    assert sorted(data.target_vocab.tokens[3:]) == ["I_JUMP", "I_LOOK", "I_RUN", "I_TURN_LEFT", "I_TURN_RIGHT", "I_WALK"]
    assert data.num_classes == len(data.target_vocab) == 9 and len(data.vocab) == 4 + 13
    assert Scan().evaluate(data.test.labels, data.test.labels) == {"exact_match": 1.0}


@need(SHARED / "scan")
def test_scan_length_split_tests_longer_action_sequences():
    task = Scan("length")
    assert task.name == "scan-length" and task.length_axis
    data = task.build(None, None, seed=0)
    train_len, test_len = task.row_lengths(data.train), task.row_lengths(data.test)  # target lengths, not command lengths
    assert torch.equal(train_len, torch.tensor([len(a.split()) for _, a in released(SHARED / "scan" / "length_split" / "tasks_train_length.txt")]))
    assert int(train_len.max()) == 22 and int(test_len.min()) == 24 and int(test_len.max()) == 48  # Lake & Baroni's cut
    raw = released(SHARED / "scan" / "length_split" / "tasks_test_length.txt")
    assert len(data.test) == len(raw) and max(len(a.split()) for _, a in raw) == 48


@need(SHARED / "scan")
def test_scan_sampling_is_fixed_by_the_seed_and_subsets_keep_whole_targets():
    a, b = Scan().build(200, 100, seed=4), Scan().build(200, 100, seed=4)
    assert torch.equal(a.train.labels, b.train.labels) and torch.equal(a.test.ids, b.test.ids)
    assert not torch.equal(a.train.ids, Scan().build(200, 100, seed=5).train.ids)
    part = a.train.subset(range(0, 200, 3))
    assert part.labels.shape[1] > part.ids.shape[1]  # targets are longer than commands and not cut to them
    assert torch.equal((part.labels == EOS_ID).sum(1), torch.ones(len(part), dtype=torch.long))
    assert (part.labels != IGNORE).sum(1).tolist() == (a.train.labels[list(range(0, 200, 3))] != IGNORE).sum(1).tolist()


@need(SHARED / "scan")
def test_scan_add_primitive_jump_split_is_available_unregistered():
    task = Scan("addprim_jump")
    assert task.name == "scan-addprim-jump" and task.name not in {t.name for t in all_tasks()}
    data = task.build(None, None, seed=0)
    assert (len(data.train), len(data.test)) == (14_670, 7_706)  # the README's counts
    jump = data.vocab.id("jump")
    with_jump = (data.train.ids == jump).any(1)
    assert int(with_jump.sum()) == 1467 and bool((data.train.lengths[with_jump] == 1).all())  # only "jump" alone (repeated in the file)
    assert bool((data.test.ids == jump).any(1).all())


def test_read_scan_names_file_and_line(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("IN: jump OUT: I_JUMP\nIN: walk I_WALK\n")
    with pytest.raises(Exception, match=r"x.txt:2"):
        read_scan(bad)


@need(SHARED / "text2sql-advising")
def test_semantic_parsing_rows_are_the_question_split():
    entries = json.loads((SHARED / "text2sql-advising" / "advising.json").read_text())
    ref = {"train": [], "test": []}
    for e in entries:
        for q in e["sentences"]:
            side = {"train": "train", "dev": "train", "test": "test"}.get(q["question-split"])
            if side:
                ref[side].append((q["text"].lower().split(), e["sql"][0].split()))
    assert len(ref["train"]) == 2629 + 229 and len(ref["test"]) == 573  # the README's question split
    data = SemanticParsing().build(None, None, seed=0)
    assert len(data.train) == len(ref["train"]) and len(data.test) == len(ref["test"])
    for split, rows in ((data.train, ref["train"]), (data.test, ref["test"])):
        for i in range(0, len(rows), 5):
            want = [t if t in data.target_vocab else "<unk>" for t in rows[i][1]]
            assert targets(data, split, i) == want
            assert source(data, split, i) == [w if w in data.vocab else "<unk>" for w in rows[i][0]]
    train_sql = {t for _, s in ref["train"] for t in s}
    assert set(data.target_vocab.tokens[3:]) == train_sql  # the target vocabulary comes from training only
    assert data.num_classes == len(data.target_vocab)


def test_sequence_exact_match_by_hand():
    labels = torch.tensor([[5, 6, EOS_ID, IGNORE], [7, EOS_ID, IGNORE, IGNORE], [EOS_ID, IGNORE, IGNORE, IGNORE]])
    right = torch.tensor([[5, 6, EOS_ID, 9], [7, EOS_ID, 3, 3], [EOS_ID, 4, 4, 4]])  # after <eos>: not read
    assert sequence_exact_match(right, labels) == 1.0
    wrong = torch.tensor([[5, 6, 6, EOS_ID], [7, EOS_ID, 0, 0], [5, EOS_ID, 0, 0]])  # no <eos> in time; extra token first
    assert sequence_exact_match(wrong, labels) == pytest.approx(1 / 3)
    assert sequence_exact_match(torch.tensor([[5, 6], [7, EOS_ID], [EOS_ID, 0]]), labels) == pytest.approx(2 / 3)  # too short
    with pytest.raises(Exception, match="expected"):
        sequence_exact_match(torch.zeros(3), labels)


def test_missing_files_are_reasons(tmp_path):
    for task in (Scan(data_dir=tmp_path), Scan("length", tmp_path), SemanticParsing(tmp_path)):
        assert "shared data" in task.skip_reason()
    with pytest.raises(Exception, match="unknown SCAN split"):
        Scan("jump")
    assert get_task("scan").family == get_task("semantic-parsing").family == "seq2seq"
