"""Parsing as sequence labelling: dependency arcs, chunks and constituents, each a
``tagging`` task with a metric computed after decoding the tags back to structure.

==================  =========================================  ===========================
name                data (substitute for)                      metric
==================  =========================================  ===========================
``dependency-arcs`` UD English-EWT v2.16 train / test (the     UAS from relative head
                    shared ``.conllu`` files: the shipped      offsets (Strzyz et al.
                    ``corpora/`` copy has no HEAD column)      2019)
``chunking``        BIO base phrases derived from GUM trees    chunk F1 (``span_f1``)
                    (CoNLL-2000)
``constituency``    GUM trees (PTB sample), Gomez-Rodriguez    labelled bracket F1 after
                    & Vilares (2018) tags                      decoding the tags to trees
==================  =========================================  ===========================

GUM (``gum-const/``, CC BY 4.0 annotations) is split by its official ``splits.md``:
the train documents train, the test documents test (dev is unused). Its trees are
silver (parser output over gold tokens and POS).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from neurosym.data.text import conllu_sentences, read_text
from neurosym.errors import NeurosymError
from neurosym.tasks.base import IGNORE, Task, TaskData, accuracy, sample_rows, span_f1, tagging_split, word_vocab

# ---------------------------------------------------------------------- dependency arcs


def read_conllu_heads(path: Path) -> list[tuple[list[str], list[int]]]:
    """(forms, heads) of every sentence of a CoNLL-U file: syntactic words only
    (multiword ranges ``n-m`` and empty nodes ``n.m`` skipped); heads are 1-based word
    numbers, 0 for the root. A malformed line is a NeurosymError naming file and line."""
    out: list[tuple[list[str], list[int]]] = []
    for sentence in conllu_sentences(read_text(path).split("\n"), path):
        forms: list[str] = []
        heads: list[int] = []
        for n, cols in sentence:
            if int(cols[0]) != len(forms) + 1 or not cols[6].isdigit():
                raise NeurosymError(f"{path}:{n}: expected word number {len(forms) + 1} and a numeric HEAD, got ID {cols[0]!r} HEAD {cols[6]!r}")
            forms.append(cols[1])
            heads.append(int(cols[6]))
        out.append((forms, heads))
    for forms, heads in out:
        if max(heads) > len(forms):
            raise NeurosymError(f"{path}: a HEAD points past its sentence ({max(heads)} > {len(forms)} words: {' '.join(forms[:8])} ...)")
    return out


def offset_names(k: int) -> list[str]:
    """The 2k + 2 relative-head labels: ``ROOT``, ``-k`` .. ``-1``, ``+1`` .. ``+k``, ``FAR``."""
    return ["ROOT", *(str(-d) for d in range(k, 0, -1)), *(f"+{d}" for d in range(1, k + 1)), "FAR"]


def encode_heads(heads: Sequence[int] | np.ndarray, k: int) -> np.ndarray:
    """Heads (n,) (1-based, 0 = root) -> label ids (n,) into :func:`offset_names`: the
    offset ``head(i) - i``; offsets beyond +-k are ``FAR`` (2k + 1)."""
    heads = np.asarray(heads, dtype=np.int64)
    off = heads - np.arange(1, len(heads) + 1)
    label = np.where(off < 0, off + k + 1, off + k)
    label = np.where(np.abs(off) > k, 2 * k + 1, label)
    return np.where(heads == 0, 0, label)


def decode_heads(labels: torch.Tensor, k: int) -> torch.Tensor:
    """Label ids (..., L) -> heads (..., L): ``ROOT`` -> 0, an offset -> i + offset
    (1-based), ``FAR``, ``IGNORE``, unknown ids and offsets pointing outside ``1..L``
    -> -1 (no head). The row's real length is not known here: the caller masks
    padding."""
    L = labels.shape[-1]
    pos = torch.arange(1, L + 1)
    off = torch.where(labels <= k, labels - k - 1, labels - k)
    head = pos + off
    head = torch.where((labels >= 1) & (labels <= 2 * k) & (head >= 1) & (head <= L), head, torch.full_like(head, -1))
    return torch.where(labels == 0, torch.zeros_like(head), head)


def uas(pred: torch.Tensor, labels: torch.Tensor, k: int) -> float:
    """Unlabelled attachment score of relative-offset taggings (N, L): both decoded to
    heads (:func:`decode_heads`, within each sentence's length); a token is right when
    the heads agree and the gold one is known (a gold ``FAR`` is always counted wrong:
    no offset prediction reaches it), over every non-``IGNORE`` token."""
    keep = labels != IGNORE
    lengths = keep.sum(1, keepdim=True)
    pos = torch.arange(1, labels.shape[1] + 1)
    gold = decode_heads(labels, k)
    guess = decode_heads(pred, k)
    guess = torch.where(guess > lengths, torch.full_like(guess, -1), guess)
    right = keep & (gold >= 0) & (guess == gold) & (pos <= lengths)
    n = int(keep.sum())
    return float(right.sum()) / n if n else float("nan")


class DependencyArcs(Task):
    """UD English-EWT heads as per-token relative offsets (Strzyz et al. 2019): the tag
    of word i is ``head(i) - i`` in ``-k..-1, +1..+k`` (k = 8), ``ROOT``, or ``FAR``
    beyond k (6% of the test words, so UAS is at most 94%). Metric: UAS after decoding
    (:func:`uas`), tag accuracy beside it. Train: en_ewt-ud-train (12,544 sentences),
    test: en_ewt-ud-test (2,077); lower-cased forms seen twice in training, sentences
    cut to ``max_len`` = 128 words (two training sentences are longer; the longest test
    sentence has 81 words)."""

    name = "dependency-arcs"
    family = "tagging"
    metric = "uas"
    source = "UD English-EWT v2.16 (CC BY-SA 4.0), train / test .conllu from the shared folder; relative head offsets, k = 8"
    FILES = ("en_ewt-ud-train.conllu", "en_ewt-ud-test.conllu")
    max_len = 128
    max_vocab = 5000

    def __init__(self, data_dir=None, k: int = 8, max_len: int | None = None):
        super().__init__(data_dir)
        self.k = k
        if max_len is not None:
            self.max_len = max_len

    def skip_reason(self):
        missing = [f for f in self.FILES if self.shared("ud-english-ewt", f) is None]
        if missing:
            return f"ud-english-ewt/{', '.join(missing)} not in the shared data folder (the shipped corpora/ copy has no HEAD column)"
        return None

    def evaluate(self, pred: torch.Tensor, labels: torch.Tensor, names=()) -> dict[str, float]:
        """UAS (decoded heads) and tag accuracy."""
        return {"uas": uas(pred, labels, self.k), "accuracy": accuracy(pred, labels)}

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        train, test = (read_conllu_heads(self.shared("ud-english-ewt", f)) for f in self.FILES)
        train = [train[i] for i in sample_rows(len(train), n_train, seed)]
        test = [test[i] for i in sample_rows(len(test), n_test, seed + 1)]
        vocab = word_vocab([[w.lower() for w in f[: self.max_len]] for f, _ in train], self.max_vocab, min_count=2)
        forms = {"": 0}
        mk = lambda rows: tagging_split([[w.lower() for w in f] for f, _ in rows], [encode_heads(h, self.k).tolist() for _, h in rows], vocab, self.max_len, forms)  # noqa: E731
        names = offset_names(self.k)
        train_split, test_split = mk(train), mk(test)
        return TaskData(train_split, test_split, vocab, len(names), names, forms=list(forms))


# ---------------------------------------------------------------------- trees


class Node:
    """A tree node: a phrase (``children``) or a preterminal (``word`` set, no children)."""

    __slots__ = ("label", "children", "word")

    def __init__(self, label: str, children: list["Node"] | None = None, word: str | None = None):
        self.label = label
        self.children: list[Node] = children if children is not None else []
        self.word = word

    def words(self) -> list[str]:
        """The words under the node, in order."""
        return [self.word] if self.word is not None else [w for c in self.children for w in c.words()]

    def __repr__(self) -> str:
        return f"({self.label} {self.word})" if self.word is not None else f"({self.label} {' '.join(map(repr, self.children))})"


TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_trees(text: str, source: str = "<text>") -> list[Node]:
    """Every PTB-bracketed tree of ``text`` (``(ROOT (S (NP (DT the) ...)))``), in order.
    Unbalanced brackets, an empty bracket or a bare word outside ``(TAG word)`` is a
    NeurosymError naming ``source`` and the line."""
    trees: list[Node] = []
    stack: list[Node] = []
    matches = TOKEN.finditer(text)

    def where(m: re.Match) -> str:
        return f"{source}:{text.count(chr(10), 0, m.start()) + 1}"

    for m in matches:
        tok = m.group()
        if tok == "(":
            node = Node("")
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
        elif tok == ")":
            if not stack:
                raise NeurosymError(f"{where(m)}: ')' closes nothing")
            node = stack.pop()
            if not node.label and len(node.children) == 1:  # "( (S ...))": an unlabelled wrapper
                inner = node.children[0]
                node.label, node.children, node.word = inner.label, inner.children, inner.word
            if node.word is None and not node.children:
                raise NeurosymError(f"{where(m)}: empty bracket ({node.label})")
            if not stack:
                trees.append(node)
        elif not stack:
            raise NeurosymError(f"{where(m)}: {tok!r} outside any bracket")
        else:
            top = stack[-1]
            if not top.label and not top.children and top.word is None:
                top.label = tok
            elif top.word is None and not top.children:
                top.word = tok
            else:
                raise NeurosymError(f"{where(m)}: a bare word {tok!r} among phrases (expected '(TAG word)')")
    if stack:
        raise NeurosymError(f"{source}: the file ends inside a tree ({len(stack)} bracket(s) open)")
    return trees


def base_label(label: str) -> str:
    """A phrase label without function tags and indices (``NP-SBJ-1`` -> ``NP``,
    ``S=2`` -> ``S``); labels that start with ``-`` (``-LRB-``) are kept."""
    return label if label.startswith("-") else re.split(r"[-=]", label)[0]


def gum_documents(split_file: Path) -> dict[str, str]:
    """Document name -> split (``train``, ``dev``, ``test``, ``test2``) from GUM's
    ``splits.md`` (``## split`` headings, ``* GUM_x_y`` items)."""
    out, split = {}, None
    for n, line in enumerate(read_text(split_file).split("\n"), 1):
        head = re.match(r"##\s+(\w+)", line)
        if head:
            split = head.group(1)
            continue
        item = re.match(r"\s*\*\s+(\S+)", line)
        if item:
            if split is None:
                raise NeurosymError(f"{split_file}:{n}: a document listed before any '## split' heading")
            out[item.group(1)] = split
    if not out:
        raise NeurosymError(f"{split_file}: no '* DOCUMENT' items under '## split' headings")
    return out


@lru_cache(maxsize=4)
def gum_trees(folder: str) -> dict[str, list[Node]]:
    """``train`` / ``dev`` / ``test`` -> the trees of the GUM folder's ``const/*.ptb``
    documents of that split by ``splits.md`` (cached per folder)."""
    root = Path(folder)
    split_of = gum_documents(root / "splits.md")
    out: dict[str, list[Node]] = {"train": [], "dev": [], "test": []}
    for path in sorted((root / "const").glob("*.ptb")):
        split = split_of.get(path.stem)
        if split not in out:
            raise NeurosymError(f"{path}: document {path.stem} is not in train, dev or test of {root / 'splits.md'}")
        out[split].extend(parse_trees(read_text(path), str(path)))
    return out


# ---------------------------------------------------------------------- chunks

CHUNK_TYPES = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP")
"""CoNLL-2000's eleven chunk types."""
WH_BASE = {"WHNP": "NP", "WHADVP": "ADVP", "WHPP": "PP", "WHADJP": "ADJP"}
FLATTENED = ("QP", "NML", "NX", "NAC")
"""Nodes inside a noun phrase whose words join their parent's chunk."""
PUNCT_TAGS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "$", "#", "SYM"})


def tree_chunks(tree: Node) -> list[str]:
    """BIO base-phrase chunks of a tree, one tag per word (a CoNLL-2000 substitute).

    The rule: a word's *chunk node* is its preterminal's parent, or, when that parent is
    a ``QP``/``NML``/``NX``/``NAC`` node, the first ancestor above it of another label.
    Consecutive words with the same chunk node form one chunk, labelled with that node's
    base label (function tags stripped; ``WHNP`` -> ``NP``, ``WHADVP`` -> ``ADVP``,
    ``WHPP`` -> ``PP``, ``WHADJP`` -> ``ADJP``) when it is one of CoNLL-2000's eleven
    types, else the words are ``O``. A phrase child between two words (``(PP (IN of)
    (NP ...))``: *of* is PP, the NP its own chunk) and punctuation words (``O``) end a
    chunk; a ``CC`` word beside a phrase child of the same node coordinates phrases and
    is ``O`` (``(NP (NP ...) (CC and) (NP ...))``; ``(NP (NN salt) (CC and) (NN
    pepper))`` stays one chunk). So ``(NP (DT the) (JJ old) (NN man))`` is B-NP I-NP
    I-NP, ``(VP (MD may) (VP (VB go)))`` is B-VP B-VP (CoNLL-2000 joins verb groups;
    this rule does not).
    """
    tags: list[str] = []
    previous: list[int | None] = [None]  # the chunk node (by id) of the word before

    def visit(node: Node, chunk: Node | None) -> None:
        for child in node.children:
            if child.word is not None:
                kind = WH_BASE.get(base_label(chunk.label), base_label(chunk.label)) if chunk is not None else "O"
                coordinator = child.label == "CC" and any(c.word is None for c in node.children)
                if child.label in PUNCT_TAGS or coordinator or kind not in CHUNK_TYPES:
                    tags.append("O")
                    previous[0] = None
                else:
                    tags.append(("I-" if previous[0] == id(chunk) else "B-") + kind)
                    previous[0] = id(chunk)
            else:
                if base_label(child.label) in FLATTENED and chunk is not None:
                    visit(child, chunk)
                else:
                    previous[0] = None
                    visit(child, child)
                    previous[0] = None

    visit(tree, tree)
    return tags


# ---------------------------------------------------------------------- constituency tags


def strip_tree(tree: Node) -> Node:
    """A copy with base labels (function tags stripped) and unary chains of phrases
    collapsed into one node labelled ``A+B`` (``(S (VP ...))`` -> ``S+VP``); a phrase
    whose only child is a preterminal keeps it (a leaf unary, encoded per word)."""
    if tree.word is not None:
        return Node(tree.label, word=tree.word)
    label = base_label(tree.label)
    node = tree
    while len(node.children) == 1 and node.children[0].word is None:
        node = node.children[0]
        label += "+" + base_label(node.label)
    return Node(label, [strip_tree(c) for c in node.children])


def brackets(tree: Node, drop: str = "ROOT") -> Counter:
    """Labelled brackets ``(label, start, end)`` (end exclusive) of every phrase node
    (collapsed ``A+B`` chains count as A and B; preterminals and the ``drop`` label
    (the root) are not brackets), as a multiset."""
    out: Counter = Counter()

    def walk(node: Node, start: int) -> int:
        if node.word is not None:
            return start + 1
        end = start
        for c in node.children:
            end = walk(c, end)
        for part in node.label.split("+"):
            if part and part != drop:
                out[(part, start, end)] += 1
        return end

    walk(tree, 0)
    return out


END = "END"


def encode_tree(tree: Node) -> list[str]:
    """Gomez-Rodriguez & Vilares (2018) tags of a stripped tree (:func:`strip_tree`), one
    per word: ``DELTA|LABEL|UNARY`` where, for word i and the next word, DELTA is the
    change in the number of their common phrase ancestors from the previous pair's
    (relative encoding, the first pair against 0), LABEL the lowest common ancestor's
    label, and UNARY the label of a phrase whose only child is word i's preterminal
    (empty if none). The last word is ``END||UNARY``."""
    paths: list[list[Node]] = []
    unary: list[str] = []

    def walk(node: Node, path: list[Node]) -> None:
        if len(node.children) == 1 and node.children[0].word is not None and path:
            paths.append(path)
            unary.append(node.label)
            return
        if len(node.children) == 1 and node.children[0].word is not None:  # a one-word tree: its root is the unary
            paths.append([])
            unary.append(node.label)
            return
        for c in node.children:
            if c.word is not None:
                paths.append([*path, node])
                unary.append("")
            else:
                walk(c, [*path, node])

    walk(tree, [])
    tags, prev = [], 0
    for i in range(len(paths)):
        if i == len(paths) - 1:
            tags.append(f"{END}||{unary[i]}")
            break
        a, b = paths[i], paths[i + 1]
        common = 0
        while common < min(len(a), len(b)) and a[common] is b[common]:
            common += 1
        tags.append(f"{common - prev}|{a[common - 1].label}|{unary[i]}")
        prev = common
    return tags


def decode_tags(tags: Sequence[str], words: Sequence[str] | None = None) -> Node:
    """A tree from Gomez-Rodriguez & Vilares tags (the inverse of :func:`encode_tree` on
    well-formed tags). Ill-formed predictions decode to *some* tree: a tag that does not
    parse, or an ``END`` before the last word, counts as DELTA 0 with no label; depths
    are kept >= 1; the last word's DELTA and LABEL are not read; nodes no pair labels
    stay unlabelled (no bracket)."""
    words = list(words) if words is not None else [f"w{i}" for i in range(len(tags))]
    n = len(tags)
    parsed = []
    for t in tags:
        parts = t.split("|")
        if len(parts) != 3:
            parsed.append((None, "", ""))
            continue
        delta = int(parts[0]) if re.fullmatch(r"-?\d+", parts[0]) else None
        parsed.append((delta, parts[1], parts[2]))

    def leaf(i: int) -> Node:
        node = Node("X", word=words[i])
        for part in reversed([p for p in parsed[i][2].split("+") if p]) if parsed[i][2] else []:
            node = Node(part, [node])
        return node

    if n == 1:
        only = leaf(0)
        return only if only.word is None else Node("", [only])
    root = Node("")
    path: list[Node] = []
    depth = 0
    for i in range(n):
        if i == n - 1:
            (path[-1] if path else root).children.append(leaf(i))
            break
        delta, label, _ = parsed[i]
        target = max(1, depth + (delta or 0))
        while len(path) < target:
            node = Node("") if path else root
            if path:
                path[-1].children.append(node)
            path.append(node)
        if delta is not None and label:
            path[target - 1].label = label
        path[-1].children.append(leaf(i))
        del path[target:]
        depth = target
    return root


def bracket_f1(pred: torch.Tensor, labels: torch.Tensor, names: Sequence[str]) -> float:
    """Micro labelled bracket F1 of Gomez-Rodriguez & Vilares taggings (N, L) (ids into
    ``names``, ``IGNORE`` past each sentence): both sides decoded to trees
    (:func:`decode_tags`) and their brackets (:func:`brackets`, no root, no
    preterminals) compared as multisets. No evalb punctuation rule: every word counts.
    1.0 when neither side has a bracket."""
    tp = n_pred = n_gold = 0
    for p_row, g_row in zip(pred.tolist(), labels.tolist()):
        n = sum(1 for g in g_row if g != IGNORE)
        if n == 0:
            continue
        p = brackets(decode_tags([names[i] if 0 <= i < len(names) else "" for i in p_row[:n]]))
        g = brackets(decode_tags([names[i] for i in g_row[:n]]))
        tp += sum((p & g).values())
        n_pred += sum(p.values())
        n_gold += sum(g.values())
    if n_pred + n_gold == 0:
        return 1.0
    return 2 * tp / (n_pred + n_gold)


# ---------------------------------------------------------------------- GUM tasks


class _GUMTask(Task):
    """Shared plumbing: GUM's trees by official split, vocabulary, tags."""

    family = "tagging"
    max_len = 128
    max_vocab = 5000

    def __init__(self, data_dir=None, max_len: int | None = None):
        super().__init__(data_dir)
        if max_len is not None:
            self.max_len = max_len

    def skip_reason(self):
        if self.shared("gum-const", "splits.md") is None or self.shared("gum-const", "const") is None:
            return "gum-const/splits.md or gum-const/const/ not in the shared data folder"
        if not any(self.shared("gum-const", "const").glob("*.ptb")):
            return "gum-const/const/ holds no .ptb files"
        return None

    def trees(self) -> dict[str, list[Node]]:
        """``train`` / ``dev`` / ``test`` -> the trees of that split's documents (file
        name order, file order); documents not listed in splits.md are a NeurosymError.
        Read once per process (about 2 s) and cached; the trees must not be changed."""
        return gum_trees(str(self.shared("gum-const")))

    @abstractmethod
    def tags(self, tree: Node) -> list[str]:
        """One tag per word of a tree."""

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        trees = self.trees()
        train = [trees["train"][i] for i in sample_rows(len(trees["train"]), n_train, seed)]
        test = [trees["test"][i] for i in sample_rows(len(trees["test"]), n_test, seed + 1)]
        rows = lambda ts: [([w.lower() for w in t.words()], self.tags(t)) for t in ts]  # noqa: E731
        train, test = rows(train), rows(test)
        names = sorted({g for _, tags in train + test for g in tags})
        index = {g: i for i, g in enumerate(names)}
        vocab = word_vocab([f[: self.max_len] for f, _ in train], self.max_vocab, min_count=2)
        forms = {"": 0}
        mk = lambda rs: tagging_split([f for f, _ in rs], [[index[g] for g in tags] for _, tags in rs], vocab, self.max_len, forms)  # noqa: E731
        train_split, test_split = mk(train), mk(test)
        return TaskData(train_split, test_split, vocab, len(names), names, forms=list(forms))


class Chunking(_GUMTask):
    """BIO base-phrase chunks derived from GUM's trees by :func:`tree_chunks` (a
    substitute for CoNLL-2000, which is not freely licensed). Metric: chunk F1
    (``span_f1``, conlleval's rule), tag accuracy beside it."""

    name = "chunking"
    regex_prior = "synthesised"
    metric = "f1"
    source = "GUM constituency trees, 6 genres (CC BY 4.0 annotations), official train / test; chunks derived (CoNLL-2000 substitute)"

    def tags(self, tree: Node) -> list[str]:
        return tree_chunks(tree)

    def evaluate(self, pred, labels, names=()) -> dict[str, float]:
        """Micro chunk F1 and tag accuracy."""
        return {"f1": span_f1(pred, labels, names), "accuracy": accuracy(pred, labels)}


class Constituency(_GUMTask):
    """Constituency parsing as tagging (Gomez-Rodriguez & Vilares 2018, relative
    encoding, unary chains collapsed) on GUM's trees (a substitute for the Penn Treebank
    sample, which is not freely licensed). Metric: labelled bracket F1 after decoding
    the predicted tags to trees (:func:`bracket_f1`), tag accuracy beside it. Sentences
    longer than ``max_len`` are cut, and both sides are scored on the cut tags."""

    name = "constituency"
    metric = "f1"
    source = "GUM constituency trees, 6 genres (CC BY 4.0 annotations), official train / test; Gomez-Rodriguez & Vilares tags (PTB-sample substitute)"

    def tags(self, tree: Node) -> list[str]:
        return encode_tree(strip_tree(tree))

    def evaluate(self, pred, labels, names=()) -> dict[str, float]:
        """Labelled bracket F1 (decoded trees) and tag accuracy."""
        return {"f1": bracket_f1(pred, labels, names), "accuracy": accuracy(pred, labels)}
