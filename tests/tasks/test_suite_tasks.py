"""The structured suite's tasks against independent references (issue 20): Python's
``re`` for Tomita, an eval-based evaluator for arithmetic, a stack evaluator and the
released labels for ListOps, a stack for Dyck, the head noun for agreement, and raw
line counts for the file readers."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from neurosym.errors import NeurosymError
from neurosym.tasks import (
    FAMILIES, IGNORE, NER, NLI, NOT_BUILT, Acceptability, Agreement, Arithmetic, DyckTask, ListOps, ListOpsReleased, POSTagging,
    Sentiment, Tomita, Topic, accuracy, all_tasks, arith_value, get_task, listops_value,
)

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
pytestmark = pytest.mark.usefixtures("one_thread")


def tomita_regexes() -> dict[int, str]:
    """The patterns of grammars/tomita.regex, read with a plain regex (not the library's parser)."""
    out = {}
    for line in (REPO / "grammars" / "tomita.regex").read_text().splitlines():
        m = re.match(r"T(\d):\s*/(.*)/", line)
        if m:
            out[int(m.group(1))] = m.group(2)
    assert len(out) == 7
    return out


def words(split, vocab, i: int) -> list[str]:
    return [vocab.tokens[t] for t in split.ids[i, : int(split.lengths[i])].tolist()]


@pytest.mark.parametrize("index", range(1, 8))
def test_tomita_labels_match_python_re(index):
    pattern = re.compile(tomita_regexes()[index])
    data = Tomita(index).build(300, 300, seed=3)
    for split, (lo, hi) in ((data.train, (0, 10)), (data.test, (11, 30))):
        assert int(split.labels.sum()) == len(split) // 2  # balanced
        assert lo <= int(split.lengths.min()) and int(split.lengths.max()) <= hi
        for i in range(len(split)):
            s = "".join(words(split, data.vocab, i))
            assert bool(pattern.fullmatch(s)) == bool(split.labels[i]), (index, s)
            assert (split.ids[i, int(split.lengths[i]):] == 0).all()
    again = Tomita(index).build(300, 300, seed=3)
    assert torch.equal(again.test.ids, data.test.ids) and torch.equal(again.test.labels, data.test.labels)


def test_tomita_rejects_unknown_index():
    with pytest.raises(NeurosymError, match="seven"):
        Tomita(8)


@pytest.mark.parametrize("k", [1, 2])
def test_dyck_labels_by_a_stack(k):
    data = DyckTask(k).build(200, 200, seed=1)
    pairs = {"()": 1, "[]": 2}

    def balanced(toks):
        stack = []
        for t in toks:
            if t in "([":
                stack.append(t)
            elif not stack or stack.pop() + t not in pairs:
                return False
        return not stack

    for split, hi in ((data.train, 21), (data.test, 41)):
        for i in range(len(split)):
            assert balanced(words(split, data.vocab, i)) == bool(split.labels[i])
        assert int(split.lengths.max()) <= hi
    assert int(data.test.lengths.min()) >= 21  # longer than every training string (a deletion may cut one)


def reference_listops(tokens: list[str]) -> int:
    """A stack evaluator, written separately from the library's recursive one."""
    stack: list = []
    for t in tokens:
        if t in ("(", ")"):
            continue
        if t.startswith("["):
            stack.append(t)
        elif t == "]":
            args = []
            while not isinstance(stack[-1], str):
                args.append(stack.pop())
            op = stack.pop()
            args.sort()
            value = {"[MAX": max(args), "[MIN": min(args), "[SM": sum(args) % 10, "[MED": None}[op]
            if op == "[MED":
                mid = len(args) // 2
                value = args[mid] if len(args) % 2 else (args[mid - 1] + args[mid]) // 2
            stack.append(value)
        else:
            stack.append(int(t))
    assert len(stack) == 1
    return stack[0]


def test_listops_generator_against_a_stack_evaluator():
    task = ListOps(max_depth=4, train_len=30, test_len=60)
    data = task.build(300, 200, seed=2)
    for split in (data.train, data.test):
        for i in range(len(split)):
            assert reference_listops(words(split, data.vocab, i)) == int(split.labels[i])
    assert int(data.train.lengths.max()) <= 30 < int(data.test.lengths.min())
    assert len(set(data.train.labels.tolist())) == 10


def test_listops_value_hand_cases():
    assert listops_value("[MAX 2 9 [MIN 4 7 ] 0 ]".split()) == 9
    assert listops_value("[SM 5 6 [MED 1 2 3 8 ] ]".split()) == 3  # 5 + 6 + 2 = 13
    assert listops_value("( [MED 1 4 ) ]".split()) == 2
    with pytest.raises(NeurosymError):
        listops_value("[MAX 2".split())


@pytest.mark.skipif(not (SHARED / "listops" / "test_d20s.tsv").exists(), reason="../shared/data/listops is absent")
def test_listops_evaluators_reproduce_the_released_labels():
    rows = ListOpsReleased().rows()
    lines = [line for line in (SHARED / "listops" / "test_d20s.tsv").read_text().splitlines() if line.strip()]
    assert len(rows) == len(lines) == 10_000
    assert all(listops_value(t) == y for y, t in rows)
    assert all(reference_listops(t) == y for y, t in rows[:2000])


def reference_arith(tokens: list[str]) -> Fraction:
    """Python's own parser over Fractions."""
    return eval(" ".join(f"Fraction({t})" if t.isdigit() else t for t in tokens), {"Fraction": Fraction})  # noqa: S307


def test_arithmetic_labels_against_python_eval():
    data = Arithmetic(train_len=11, test_len=31).build(300, 200, seed=0)
    for split in (data.train, data.test):
        for i in range(len(split)):
            toks = words(split, data.vocab, i)
            v = reference_arith(toks)
            assert v == arith_value(toks)
            assert int(split.labels[i]) == (v.numerator // v.denominator) % 10
    assert int(data.train.lengths.max()) <= 11 and int(data.test.lengths.min()) >= 13
    with pytest.raises(NeurosymError, match="division by zero"):
        arith_value("1 / ( 2 - 2 )".split())


def test_agreement_label_is_the_head_noun_number():
    data = Agreement().build(300, 100, seed=0)
    plural_nouns = {"keys", "cabinets", "authors", "books", "dogs", "pictures", "teachers"}
    singular_nouns = {w[:-1] for w in plural_nouns}
    attractors = 0
    for split in (data.train, data.test):
        for i in range(len(split)):
            ws = words(split, data.vocab, i)
            assert ws[1] in plural_nouns | singular_nouns  # Det N ...
            assert int(split.labels[i]) == (ws[1] in plural_nouns)
            other = plural_nouns if ws[1] in singular_nouns else singular_nouns
            attractors += any(w in other for w in ws[2:])
            assert not {"is", "are", "was", "were"} & set(ws[:2])
    assert attractors > 50  # a good share of prefixes hold an attractor


def test_split_fraction_and_accuracy():
    data = Tomita(4).build(100, 10, seed=0)
    tenth = data.train.fraction(0.1, seed=0)
    assert len(tenth) == 10 and tenth.ids.shape[1] == max(1, int(tenth.lengths.max()))
    with pytest.raises(NeurosymError):
        data.train.fraction(0.0)
    assert accuracy(torch.tensor([1, 0, 1]), torch.tensor([1, 1, IGNORE])) == 0.5


def test_get_task_names_unbuilt_rows():
    assert get_task("tomita3").name == "tomita3"
    with pytest.raises(NeurosymError, match="parallel text"):
        get_task("translation")
    names = [t.name for t in all_tasks()]
    assert len(names) == len(set(names))
    assert set(NOT_BUILT) == {"extractive-qa", "translation"} and not set(NOT_BUILT) & set(names)
    assert {"wikitext2-lm", "char-lm", "cloze", "dependency-arcs", "chunking", "constituency", "scan", "scan-length",
            "semantic-parsing"} <= set(names)
    assert names.index("agreement") < names.index("wikitext2-lm") < names.index("pos")  # generated first, LM with the real tasks
    assert {t.family for t in all_tasks()} == set(FAMILIES)


# ---------------------------------------------------------------------- readers vs raw files
def test_pos_reader_against_raw_counts():
    task = POSTagging(max_len=1000)
    if task.skip_reason():
        pytest.skip(task.skip_reason())
    import gzip

    _, test_path = task.files()
    raw = gzip.decompress(test_path.read_bytes()).decode() if test_path.suffix == ".gz" else test_path.read_text()
    blocks = [b for b in raw.split("\n\n") if b.strip()]
    lines = [line for b in blocks for line in b.split("\n") if line.strip()]
    data = task.build(None, None, seed=0)
    assert len(data.test) == len(blocks)
    assert int((data.test.labels != IGNORE).sum()) == int(data.test.lengths.sum()) == len(lines)
    noun = data.label_names.index("NOUN")
    assert int((data.test.labels == noun).sum()) == sum(line.endswith("\tNOUN") for line in lines)
    assert data.num_classes == 17


def need(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} is absent (../shared/data)")


@need(SHARED / "wnut17")
def test_ner_reader_against_raw_counts():
    text = (SHARED / "wnut17" / "wnut17train.conll").read_text()
    sentences = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    tags = [line.split("\t")[1] for b in sentences for line in b.split("\n") if line.strip()]
    data = NER(max_len=1000).build(None, None, seed=0)
    assert len(data.train) == len(sentences)
    assert int((data.train.labels != IGNORE).sum()) == len(tags)
    b_person = data.label_names.index("B-person")
    assert int((data.train.labels == b_person).sum()) == tags.count("B-person")


@need(SHARED / "poem-sentiment")
def test_sentiment_reader_against_raw_counts():
    lines = (SHARED / "poem-sentiment" / "data" / "train.tsv").read_text().splitlines()
    data = Sentiment().build(None, None, seed=0)
    assert len(data.train) == len(lines)
    counts = torch.bincount(data.train.labels, minlength=4).tolist()
    assert counts == [sum(line.endswith("\t" + y) for line in lines) for y in ("-1", "0", "1", "2")]


@need(SHARED / "dbpedia14-subset")
def test_topic_reader_against_raw_counts():
    import csv

    with open(SHARED / "dbpedia14-subset" / "test.csv", newline="") as f:
        rows = list(csv.reader(f))
    data = Topic().build(None, None, seed=0)
    assert len(data.test) == len(rows) and data.num_classes == 14
    assert torch.bincount(data.test.labels, minlength=14).tolist() == [sum(r[0] == str(c + 1) for r in rows) for c in range(14)]


@need(SHARED / "blimp")
def test_acceptability_pairs_stay_together():
    files = sorted((SHARED / "blimp" / "data").glob("*.jsonl"))
    n_pairs = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
    assert len(Acceptability().pairs()) == n_pairs
    data = Acceptability().build(2000, 2000, seed=0)
    assert len(data.train) == len(data.test) == 2000
    assert 800 < int(data.train.labels.sum()) < 1200
    first = json.loads(files[0].read_text().splitlines()[0])
    assert first["sentence_good"] != first["sentence_bad"]


@need(SHARED / "snli-esnli")
def test_nli_reader_against_raw_counts():
    labels = (SHARED / "snli-esnli" / "labels.test").read_text().splitlines()
    data = NLI().build(None, None, seed=0)
    assert len(data.test) == len(labels)
    assert torch.bincount(data.test.labels, minlength=3).tolist() == [labels.count(n) for n in NLI.LABELS]


def test_missing_shared_data_is_a_reason(tmp_path):
    for task in (NER(tmp_path), Sentiment(tmp_path), Topic(tmp_path), Acceptability(tmp_path), NLI(tmp_path), ListOpsReleased(data_dir=tmp_path)):
        assert task.skip_reason() and "shared data" in task.skip_reason()
        with pytest.raises(NeurosymError, match=task.name):
            task.load(10, 10)


def test_bio_spans_and_entity_f1_by_hand():
    from neurosym.tasks.base import bio_spans, span_f1

    assert bio_spans(["B-per", "I-per", "O", "I-loc", "B-loc", "I-per"]) == {(0, 2, "per"), (3, 4, "loc"), (4, 5, "loc"), (5, 6, "per")}
    assert bio_spans(["O", "O"]) == set()
    names = ["O", "B-per", "I-per"]
    gold = torch.tensor([[1, 2, 0, 0], [0, 1, IGNORE, IGNORE]])
    pred = torch.tensor([[1, 2, 0, 1], [0, 2, 0, 0]])  # two hits (an I- after O opens a span, as in conlleval) and one spurious span
    assert span_f1(pred, gold, names) == pytest.approx(2 * 2 / (3 + 2))  # predicted: (0,2), (3,4), (1,2); gold: (0,2), (1,2)
    assert span_f1(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long), names) == 1.0


def test_shipped_poem_sentiment_stands_in_without_the_shared_folder(monkeypatch):
    import hashlib

    import neurosym.tasks.base as base

    monkeypatch.setattr(base, "shared_data_dir", lambda: None)
    task = Sentiment()
    assert task.skip_reason() is None and str(base.SHIPPED_DATA) in str(task.shared("poem-sentiment", "data", "train.tsv"))
    data = task.build(None, None, seed=0)
    assert torch.bincount(data.train.labels, minlength=4).tolist() == [155, 555, 133, 49]  # the source README's counts
    assert (base.SHIPPED_DATA / "poem-sentiment" / "LICENSE").is_file()
    readme = (base.SHIPPED_DATA / "poem-sentiment" / "README.md").read_text()
    for name in ("data/train.tsv", "data/test.tsv", "LICENSE"):
        digest = hashlib.sha256((base.SHIPPED_DATA / "poem-sentiment" / name).read_bytes()).hexdigest()
        assert f"| {name} | {digest} |" in readme
    assert "wnut17" in NER().skip_reason()  # no shipped copy: still a reason
