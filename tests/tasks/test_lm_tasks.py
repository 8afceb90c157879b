"""The next-token tasks over WikiText-2 (issue 20) against the raw files, read here with
``gzip`` / ``str.split`` (the shipped ``corpora/`` copies; ``valid`` trains, ``test``
tests: the train split is not shared)."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from neurosym.tasks import CharLM, Cloze, WikiText2LM, get_task
from neurosym.tasks.lm import windows

pytestmark = pytest.mark.usefixtures("one_thread")


def raw_lines(task, split: str) -> list[str]:
    path = Path(task.file(split))
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [line for line in text.split("\n") if line.strip()]


def skip_without(task):
    if task.skip_reason():
        pytest.skip(task.skip_reason())


def test_word_lm_rows_read_the_raw_stream():
    task = WikiText2LM()
    skip_without(task)
    train_lines = raw_lines(task, "valid")
    stream = [t for line in train_lines for t in (*line.split(), "<eos>")]
    counts = Counter(w for line in train_lines for w in line.split())
    data = task.build(None, 300, seed=1)
    assert len(data.train) == len(stream) - 1  # every position but the first is a row
    assert set(data.vocab.tokens[4:]) == {w for w, c in counts.items() if c >= 2} - {"<unk>", "<eos>"}
    assert data.num_classes == len(data.vocab) and data.label_names == data.vocab.tokens
    name = lambda w: w if w in data.vocab else "<unk>"  # noqa: E731
    for r in range(0, len(data.train), 9973):
        t = r + 1  # row r predicts stream[r + 1]
        window = [data.vocab.tokens[i] for i in data.train.ids[r, : int(data.train.lengths[r])].tolist()]
        assert window == [name(w) for w in stream[max(0, t - 64): t]]
        assert data.vocab.tokens[int(data.train.labels[r])] == name(stream[t])
        assert (data.train.ids[r, int(data.train.lengths[r]):] == 0).all()
    assert int(data.train.lengths.min()) == 1 and int(data.test.lengths.max()) <= 64
    test_tokens = {t for line in raw_lines(task, "test") for t in line.split()}
    assert test_tokens - set(data.vocab.tokens)  # test-only words exist and are not in the vocabulary


def test_char_lm_rows_read_the_raw_characters():
    task = CharLM()
    skip_without(task)
    data = task.build(400, 400, seed=2)
    assert len(data.train) == len(data.test) == 400
    train_text = [line.strip() for line in raw_lines(task, "valid")]
    assert set(data.vocab.tokens[4:]) == set("".join(train_text))
    for split, lines in ((data.train, train_text), (data.test, [line.strip() for line in raw_lines(task, "test")])):
        stream = [c for line in lines for c in (*line, "<eos>")]
        # rows are a fixed-seed sample of positions: find each row's position by its window and label
        joined = "".join(c if len(c) == 1 else "\x00" for c in stream)
        for r in range(0, 400, 37):
            got = "".join(data.vocab.tokens[i] if data.vocab.tokens[i] != "<eos>" else "\x00"
                          for i in split.ids[r, : int(split.lengths[r])].tolist())
            label = data.vocab.tokens[int(split.labels[r])]
            follow = "\x00" if label == "<eos>" else label
            if "<unk>" not in got and label != "<unk>":
                assert got + follow in joined
        assert int(split.lengths.max()) <= 128
    again = task.build(400, 400, seed=2)
    assert torch.equal(again.train.ids, data.train.ids) and torch.equal(again.test.labels, data.test.labels)


def test_cloze_targets_are_sentence_final_words_of_their_paragraph():
    task = Cloze()
    skip_without(task)
    data = task.build(None, None, seed=0)
    vocab = set(data.vocab.tokens)
    for split, lines in ((data.train, raw_lines(task, "valid")), (data.test, raw_lines(task, "test"))):
        ref = []
        for line in lines:
            ws = line.split()
            for j in range(10, len(ws) - 1):
                if ws[j + 1] == "." and re.fullmatch("[A-Za-z]+", ws[j]) and ws[j] != "<unk>" and ws[j] in vocab:
                    ref.append((ws[max(0, j - 64): j], ws[j]))
        assert len(split) == len(ref) > 4000
        for r in range(0, len(ref), 97):
            context, word = ref[r]
            assert data.vocab.tokens[int(split.labels[r])] == word
            got = [data.vocab.tokens[i] for i in split.ids[r, : int(split.lengths[r])].tolist()]
            assert got == [w if w in vocab else "<unk>" for w in context]
    assert "LAMBADA" in (Cloze.__doc__ or "") and "substitute" in task.source


def test_windows_by_hand():
    stream = torch.tensor([5, 6, 7, 8, 9])
    split = windows(stream, torch.tensor([1, 4, 3]), 2, starts=torch.tensor([0, 0, 2]))
    assert split.ids.tolist() == [[5, 0], [7, 8], [7, 0]]
    assert split.lengths.tolist() == [1, 2, 1] and split.labels.tolist() == [6, 9, 8]
    with pytest.raises(Exception, match="at least one token"):
        windows(stream, torch.tensor([0]), 2)


def test_lm_tasks_are_next_token_and_missing_data_is_a_reason(tmp_path):
    for name in ("wikitext2-lm", "char-lm", "cloze"):
        assert get_task(name).family == "next-token"
        assert "wikitext-2" in get_task(name, tmp_path).skip_reason()
    assert "not shared" in WikiText2LM.source
