"""Dependency arcs, chunks and constituents as tags (issue 20): the CoNLL-U HEAD column
and the PTB trees read here independently (string splits and a small recursive reader),
the encodings recomputed by brute force, the decoders checked to invert them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from neurosym.errors import NeurosymError
from neurosym.tasks import IGNORE, Chunking, Constituency, DependencyArcs, bracket_f1, get_task, uas
from neurosym.tasks.parsing import (
    brackets, decode_heads, decode_tags, encode_heads, encode_tree, gum_trees, offset_names, parse_trees, read_conllu_heads, strip_tree,
    tree_chunks,
)

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
EWT_TEST = SHARED / "ud-english-ewt" / "en_ewt-ud-test.conllu"
GUM = SHARED / "gum-const"
pytestmark = pytest.mark.usefixtures("one_thread")


def need(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} is absent (../shared/data)")


# ---------------------------------------------------------------------- dependency arcs
@pytest.fixture(scope="module")
def ewt_test_only(tmp_path_factory):
    """A data folder whose train and test files are both EWT's test file (fast)."""
    root = tmp_path_factory.mktemp("ewt")
    (root / "ud-english-ewt").mkdir()
    for name in DependencyArcs.FILES:
        shutil.copy(EWT_TEST, root / "ud-english-ewt" / name)
    return root


def raw_sentences(path: Path) -> list[list[tuple[int, int]]]:
    """(ID, HEAD) of the word lines of each sentence, by plain string splitting."""
    out = []
    for block in path.read_text().split("\n\n"):
        rows = [line.split("\t") for line in block.split("\n") if line and not line.startswith("#")]
        rows = [(int(c[0]), int(c[6])) for c in rows if c[0].isdigit()]
        if rows:
            out.append(rows)
    return out


@need(EWT_TEST)
def test_dependency_labels_against_the_raw_head_column(ewt_test_only):
    raw = raw_sentences(EWT_TEST)
    assert len(raw) == 2077  # the README's sentence count
    task = DependencyArcs(ewt_test_only, max_len=1000)
    data = task.build(None, None, seed=0)
    names = data.label_names
    assert names == offset_names(8) and data.num_classes == 18
    assert len(data.test) == len(raw)
    assert int((data.test.labels != IGNORE).sum()) == sum(len(s) for s in raw)
    assert int((data.test.labels == 0).sum()) == sum(h == 0 for s in raw for _, h in s) == len(raw)  # one root each
    far = within = 0
    for n, sent in enumerate(raw):
        labels = data.test.labels[n, : len(sent)].tolist()
        for (i, h), lab in zip(sent, labels):  # brute: the tag's name from the offset
            want = "ROOT" if h == 0 else "FAR" if abs(h - i) > 8 else f"{h - i:+d}"
            assert names[lab] == want
            far += want == "FAR"
        heads = decode_heads(data.test.labels[n : n + 1, : len(sent)], 8)[0].tolist()
        for (i, h), got in zip(sent, heads):
            if h == 0 or abs(h - i) <= 8:
                assert got == h  # decoding the gold tags gives the raw head wherever the offset is within k
                within += 1
            else:
                assert got == -1
    total = within + far
    assert task.evaluate(data.test.labels, data.test.labels)["uas"] == pytest.approx(within / total)
    assert 0.9 < within / total < 1.0


def test_uas_by_hand():
    names = offset_names(2)  # ROOT -2 -1 +1 +2 FAR
    gold = torch.tensor([[names.index("+1"), names.index("ROOT"), names.index("-1"), IGNORE],
                         [names.index("FAR"), names.index("+1"), names.index("ROOT"), names.index("-2")]])
    pred = torch.tensor([[names.index("+1"), names.index("ROOT"), names.index("+1"), 3],  # last word: +1 points past the sentence
                         [names.index("FAR"), names.index("+1"), names.index("ROOT"), names.index("-2")]])
    assert decode_heads(pred, 2)[0, :3].tolist() == [2, 0, 4]
    # row 1: 2 of 3 right (the +1 of word 3 leaves the 3-word sentence); row 2: the gold FAR is wrong whatever is guessed
    assert uas(pred, gold, 2) == pytest.approx((2 + 3) / 7)
    assert encode_heads([2, 0, 2, 14], 2).tolist() == [names.index("+1"), 0, names.index("-1"), names.index("FAR")]


def test_conllu_reader_names_file_and_line(tmp_path):
    bad = tmp_path / "x.conllu"
    bad.write_text("1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n2\tthere\tthere\n")
    with pytest.raises(NeurosymError, match=r"x.conllu:2"):
        read_conllu_heads(bad)
    bad.write_text("1\tHi\thi\tINTJ\tUH\t_\t5\troot\t_\t_\n")
    with pytest.raises(NeurosymError, match="past its sentence"):
        read_conllu_heads(bad)


# ---------------------------------------------------------------------- trees, read independently
def read_tree(text: str):
    """(label, [children]) or (tag, word), by a recursive reader over bracket tokens."""
    toks = re.findall(r"\(|\)|[^\s()]+", text)
    pos = 0

    def node():
        nonlocal pos
        assert toks[pos] == "("
        label, pos = toks[pos + 1], pos + 2
        if toks[pos] != "(":
            word, pos = toks[pos], pos + 2
            return (label, word)
        kids = []
        while toks[pos] == "(":
            kids.append(node())
        pos += 1
        return (label, kids)

    out = []
    while pos < len(toks):
        out.append(node())
    return out


def base(label: str) -> str:
    return label if label.startswith("-") else re.split(r"[-=]", label)[0]


def phrases(tree, start=0, path=()):
    """(base labels top-down chain for ancestors, start, end) of every phrase node; returns (list, end)."""
    label, rest = tree
    if isinstance(rest, str):
        return [], start + 1
    out, end = [], start
    for kid in rest:
        sub, end = phrases(kid, end)
        out += sub
    return [(base(label), start, end), *out], end


def brute_tags(tree) -> list[str]:
    """Gomez-Rodriguez & Vilares tags from phrase spans alone: the common ancestors of
    words i and i+1 are the distinct spans of phrases holding both (a unary chain shares
    one span); the lowest one's labels (top-down, '+'-joined) label the pair; phrases
    spanning exactly word i are its unary."""
    spans, n = phrases(tree)
    order = {}
    for lab, s, e in spans:  # pre-order: a chain's labels in top-down order
        order.setdefault((s, e), []).append(lab)
    tags, prev = [], 0
    for i in range(n):
        unary = "+".join(order.get((i, i + 1), []))
        if i == n - 1:
            tags.append(f"END||{unary}")
            break
        common = sorted({(s, e) for (s, e) in order if s <= i and i + 1 < e}, key=lambda se: se[1] - se[0])
        tags.append(f"{len(common) - prev}|{'+'.join(order[common[0]])}|{unary}")
        prev = len(common)
    return tags


@need(GUM)
def test_constituency_tags_by_brute_force_and_decoding_gives_f1_100():
    files = sorted((GUM / "const").glob("*.ptb"))
    assert len(files) == 108
    raw_count = sum(len(read_tree(f.read_text())) for f in files[:30])
    trees = [t for f in files[:30] for t in read_tree(f.read_text())]
    mine = [t for f in files[:30] for t in parse_trees(f.read_text(), str(f))]
    assert len(mine) == raw_count == len(trees)
    for ref, tree in zip(trees, mine):
        tags = encode_tree(strip_tree(tree))
        assert tags == brute_tags(ref)
        spans, _ = phrases(ref)
        gold = sorted((lab, s, e) for lab, s, e in spans if lab != "ROOT")
        assert sorted(_brackets_list(decode_tags(tags))) == gold


def _brackets_list(tree) -> list:
    return list(brackets(tree).elements())


@need(GUM)
def test_constituency_task_gold_tags_score_f1_100_and_counts_match_the_readme():
    trees = gum_trees(str(GUM))
    assert (len(trees["train"]), len(trees["dev"]), len(trees["test"])) == (3707, 438, 491)  # the README's split counts
    task = Constituency(max_len=1000)
    data = task.build(300, 200, seed=0)
    assert task.evaluate(data.test.labels, data.test.labels, data.label_names) == {"f1": 1.0, "accuracy": 1.0}
    assert int((data.test.labels != IGNORE).sum()) == int(data.test.lengths.sum())
    part = data.train.subset(range(0, 300, 7))  # tagging labels keep the width of the ids
    assert part.labels.shape == part.ids.shape and part.ids.shape[1] == int(part.lengths.max())
    assert torch.equal(task.row_lengths(data.test), data.test.lengths)
    flipped = data.test.labels.clone()
    flipped[:, 0] = torch.where(flipped[:, 0] == IGNORE, IGNORE, (flipped[:, 0] + 1) % data.num_classes)
    assert task.evaluate(flipped, data.test.labels, data.label_names)["f1"] < 1.0


def test_bracket_f1_and_decoding_by_hand():
    tree = parse_trees("(ROOT (S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .)))")[0]
    tags = encode_tree(strip_tree(tree))
    assert tags == ["2|NP|", "-1|ROOT+S|", "0|ROOT+S|VP", "END||"]  # barks: a leaf unary VP
    names = sorted(set(tags) | {"1|NP|"})
    ids = lambda ts: torch.tensor([[names.index(t) for t in ts]])  # noqa: E731
    assert bracket_f1(ids(tags), ids(tags), names) == 1.0
    # "1|NP|" first: the NP is not opened below S, so S is relabelled NP and the NP bracket is lost
    pred = ["1|NP|", "-1|ROOT+S|", "0|ROOT+S|VP", "END||"]
    got = _brackets_list(decode_tags(pred))
    assert sorted(got) == [("S", 0, 4), ("VP", 2, 3)]
    assert bracket_f1(ids(pred), ids(tags), names) == pytest.approx(2 * 2 / (2 + 3))
    junk = decode_tags(["x", "END||", "7|Q|"])  # ill-formed predictions still decode
    assert len(junk.words()) == 3


# ---------------------------------------------------------------------- chunks
def test_chunk_rule_by_hand():
    tree = parse_trees("(ROOT (S (NP-SBJ (NP (DT the) (NN worship)) (PP (IN of) (NP (QP (RB about) (CD 5)) (NNS gods))))"
                       " (VP (MD may) (VP (VB go) (PRT (RP on)))) (, ,) (NP (NP (NN salt) (CC and) (NN pepper)) (CC and) (NP (NN tea)))"
                       " (. .)))")[0]
    assert tree_chunks(tree) == ["B-NP", "I-NP", "B-PP", "B-NP", "I-NP", "I-NP", "B-VP", "B-VP", "B-PRT", "O",
                                 "B-NP", "I-NP", "I-NP", "O", "B-NP", "O"]


@need(GUM)
def test_chunks_lie_inside_one_phrase_of_their_type():
    task = Chunking()
    files = sorted((GUM / "const").glob("*.ptb"))[:20]
    n_chunks = 0
    for f in files:
        for ref, tree in zip(read_tree(f.read_text()), parse_trees(f.read_text(), str(f))):
            tags = tree_chunks(tree)
            spans, n = phrases(ref)
            assert len(tags) == n
            wh = {"WHNP": "NP", "WHADVP": "ADVP", "WHPP": "PP", "WHADJP": "ADJP"}
            i = 0
            while i < n:
                if tags[i] == "O":
                    i += 1
                    continue
                kind, j = tags[i][2:], i + 1
                while j < n and tags[j] == "I-" + kind:
                    j += 1
                # the chunk is inside a phrase of its type, and no phrase of another non-flattened type sits between
                assert any(wh.get(lab, lab) == kind and s <= i and j <= e for lab, s, e in spans), (f, tags, i, j)
                inner = [(lab, s, e) for lab, s, e in spans if s >= i and e <= j and e - s < j - i
                         and lab not in ("QP", "NML", "NX", "NAC") and e - s > 1]
                assert not inner, (f, i, j, inner)
                n_chunks += 1
                i = j
    assert n_chunks > 3000
    data = task.build(300, 100, seed=0)
    assert task.evaluate(data.test.labels, data.test.labels, data.label_names) == {"f1": 1.0, "accuracy": 1.0}
    assert "O" in data.label_names and "B-NP" in data.label_names


def test_tree_reader_errors_name_file_and_line():
    with pytest.raises(NeurosymError, match=r"t.ptb:2"):
        parse_trees("(ROOT (NP (NN a))\n))", "t.ptb")
    with pytest.raises(NeurosymError, match="ends inside"):
        parse_trees("(ROOT (NP (NN a)", "t.ptb")
    with pytest.raises(NeurosymError, match="bare word"):
        parse_trees("(ROOT (NP (NN a) b))", "t.ptb")


def test_parsing_tasks_registered_and_missing_data_is_a_reason(tmp_path):
    assert get_task("dependency-arcs").metric == "uas"
    assert get_task("chunking").family == get_task("constituency").family == "tagging"
    for task in (DependencyArcs(tmp_path), Chunking(tmp_path), Constituency(tmp_path)):
        assert "shared data" in task.skip_reason()
        with pytest.raises(NeurosymError, match=task.name):
            task.load(5, 5)
