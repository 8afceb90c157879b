"""Generated tasks: Dyck-1/2 recognition, ListOps, arithmetic values, agreement.

* :class:`DyckTask` wraps :class:`neurosym.tasks.dyck.Dyck` (balanced vs minimally
  corrupted strings); train lengths 2..20, test 22..40.
* :class:`ListOps` (Nangia & Bowman, 2018): nested ``[MAX [MIN [MED [SM`` lists over
  digits; the label is the value (0..9) by :func:`listops_value`. Depth and length
  controls; train up to ``train_len`` tokens, test longer. The released test file
  (``listops/test_d20s.tsv``) is :class:`ListOpsReleased`.
* :class:`Arithmetic`: expressions sampled from ``grammars/arith.pcfg``; the label is
  ``floor(value) mod 10`` by the exact evaluator :func:`arith_value` (expressions that
  divide by zero are dropped).
* :class:`Agreement`: sentences of ``grammars/agreement.pcfg`` cut before the main
  verb; the label is the verb's number (0 = singular, 1 = plural), read from the
  derivation (the subject NP's category); attractors are nouns of the other number
  in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import torch

from neurosym.compile.pcfg import load_pcfg
from neurosym.compile.pcfg_sample import Tree, sample_trees
from neurosym.data import shipped_file
from neurosym.tasks.dyck import Dyck
from neurosym.errors import NeurosymError
from neurosym.tasks.base import Split, Task, TaskData, classification_split, sample_rows
from neurosym.vocab import Vocab

# ---------------------------------------------------------------------- Dyck


class DyckTask(Task):
    """Dyck-k recognition: balanced (1) or one corruption away (0); train lengths 2..20,
    test 22..40 (the length-generalisation split)."""

    family = "classification"
    length_axis = True

    def __init__(self, k: int, data_dir=None):
        super().__init__(data_dir)
        self.k = k
        self.name = f"dyck{k}"
        self.source = f"generated: neurosym.tasks.dyck.Dyck(k={k}), train lengths 2-20, test 22-40"

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        dyck = Dyck(self.k)
        corruptions = ("retype", "delete", "insert") if self.k > 1 else ("delete", "insert", "flip")
        train = dyck.recognition(1000 if n_train is None else n_train, 2, 20, seed=seed * 2, corruptions=corruptions)
        test = dyck.recognition(1000 if n_test is None else n_test, 22, 40, seed=seed * 2 + 1, corruptions=corruptions)
        split = lambda r: Split(r.ids, r.lengths, r.labels.long())  # noqa: E731
        return TaskData(split(train), split(test), dyck.vocab, 2, ["unbalanced", "balanced"])


# ---------------------------------------------------------------------- ListOps
LISTOPS_OPS = ("[MAX", "[MIN", "[MED", "[SM")
LISTOPS_TOKENS = (*LISTOPS_OPS, "]", *(str(d) for d in range(10)))


def listops_value(tokens: Sequence[str]) -> int:
    """The value of a ListOps expression (tokens ``[MAX 2 [SM 3 4 ] ]``; ``(`` and ``)``
    are ignored, as in the released files). MAX, MIN, MED (the lower median for an
    even count, ``int(np.median)`` as the reference generator) and SM (sum mod 10)."""
    pos = 0
    toks = [t for t in tokens if t not in ("(", ")")]

    def expr() -> int:
        nonlocal pos
        if pos >= len(toks):
            raise NeurosymError("ListOps: the expression ends early")
        t = toks[pos]
        pos += 1
        if t.isdigit() and len(t) == 1:
            return int(t)
        if t not in LISTOPS_OPS:
            raise NeurosymError(f"ListOps: unexpected token {t!r}")
        args = []
        while pos < len(toks) and toks[pos] != "]":
            args.append(expr())
        if pos >= len(toks) or not args:
            raise NeurosymError("ListOps: an operator without arguments or without its ']'")
        pos += 1
        if t == "[MAX":
            return max(args)
        if t == "[MIN":
            return min(args)
        if t == "[SM":
            return sum(args) % 10
        return int(np.median(args))

    value = expr()
    if pos != len(toks):
        raise NeurosymError(f"ListOps: trailing tokens after position {pos}")
    return value


def sample_listops(rng: np.random.Generator, max_depth: int, max_args: int, value_p: float = 0.25) -> list[str]:
    """One ListOps expression (Nangia & Bowman's generator): a node is a digit with
    probability ``1 - value_p`` (always at ``max_depth``), else an operator over
    2..``max_args`` sub-expressions."""

    def grow(depth: int) -> list[str]:
        if depth >= max_depth or rng.random() > value_p:
            return [str(int(rng.integers(10)))]
        op = LISTOPS_OPS[int(rng.integers(len(LISTOPS_OPS)))]
        out = [op]
        for _ in range(int(rng.integers(2, max_args + 1))):
            out += grow(depth + 1)
        return out + ["]"]

    # the root is always an operator (as in the released data)
    op = LISTOPS_OPS[int(rng.integers(len(LISTOPS_OPS)))]
    out = [op]
    for _ in range(int(rng.integers(2, max_args + 1))):
        out += grow(1)
    return out + ["]"]


def listops_vocab() -> Vocab:
    return Vocab.words(list(LISTOPS_TOKENS))


class ListOps(Task):
    """ListOps value (10 classes): train on expressions of at most ``train_len`` tokens,
    test on ``train_len + 1 .. test_len`` (depth <= ``max_depth``, <= ``max_args``
    arguments)."""

    name = "listops"
    family = "classification"
    length_axis = True

    def __init__(self, max_depth: int = 4, max_args: int = 4, train_len: int = 30, test_len: int = 60, data_dir=None):
        super().__init__(data_dir)
        if max_depth < 1 or max_args < 2 or not 5 <= train_len < test_len:
            raise NeurosymError("ListOps needs max_depth >= 1, max_args >= 2 and 5 <= train_len < test_len")
        self.max_depth, self.max_args, self.train_len, self.test_len = max_depth, max_args, train_len, test_len
        self.source = f"generated (Nangia & Bowman 2018 generator): depth <= {max_depth}, train <= {train_len} tokens, test {train_len + 1}-{test_len}"

    def sample(self, n: int, lo: int, hi: int, rng: np.random.Generator) -> list[list[str]]:
        """``n`` expressions of ``lo..hi`` tokens (rejection sampling)."""
        out: list[list[str]] = []
        for _ in range(2000 * max(1, n)):
            if len(out) == n:
                break
            e = sample_listops(rng, self.max_depth, self.max_args)
            if lo <= len(e) <= hi:
                out.append(e)
        if len(out) < n:
            raise NeurosymError(f"ListOps: could not sample {n} expressions of {lo}-{hi} tokens at depth <= {self.max_depth}")
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        vocab = listops_vocab()
        rng = np.random.default_rng([seed, 17])
        train = self.sample(1000 if n_train is None else n_train, 1, self.train_len, rng)
        test = self.sample(1000 if n_test is None else n_test, self.train_len + 1, self.test_len, rng)
        return TaskData(
            classification_split(train, [listops_value(e) for e in train], vocab),
            classification_split(test, [listops_value(e) for e in test], vocab),
            vocab, 10, [str(d) for d in range(10)],
        )


class ListOpsReleased(Task):
    """The released ListOps test set (``listops/test_d20s.tsv``, 10,000 expressions;
    no train split is shared): rows split 50/50 by a fixed seed into train and test,
    ``(`` ``)`` dropped, cut to at most ``max_len`` tokens' expressions."""

    name = "listops-released"
    family = "classification"
    source = "shared data listops/test_d20s.tsv (Nangia & Bowman 2018, MIT), split 50/50"

    def __init__(self, max_len: int = 100, data_dir=None):
        super().__init__(data_dir)
        self.max_len = max_len

    def skip_reason(self):
        return None if self.shared("listops", "test_d20s.tsv") else "listops/test_d20s.tsv is not in the shared data folder"

    def rows(self) -> list[tuple[int, list[str]]]:
        """(label, tokens without parentheses) of every row of the file."""
        out = []
        for n, line in enumerate(self.shared("listops", "test_d20s.tsv").read_text().splitlines(), 1):
            if not line.strip():
                continue
            label, _, expr = line.partition("\t")
            if not label.strip().isdigit() or not expr:
                raise NeurosymError(f"listops/test_d20s.tsv:{n}: expected LABEL<TAB>EXPRESSION")
            out.append((int(label), [t for t in expr.split() if t not in ("(", ")")]))
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        rows = [r for r in self.rows() if len(r[1]) <= self.max_len]
        order = np.random.default_rng(seed).permutation(len(rows))
        half = len(rows) // 2
        tr = [rows[i] for i in order[:half]]
        te = [rows[i] for i in order[half:]]
        tr = [tr[i] for i in sample_rows(len(tr), n_train, seed)]
        te = [te[i] for i in sample_rows(len(te), n_test, seed + 1)]
        vocab = listops_vocab()
        return TaskData(
            classification_split([t for _, t in tr], [y for y, _ in tr], vocab),
            classification_split([t for _, t in te], [y for y, _ in te], vocab),
            vocab, 10, [str(d) for d in range(10)],
        )


# ---------------------------------------------------------------------- arithmetic
ARITH_FILE = "grammars/arith.pcfg"


def arith_value(tokens: Sequence[str]) -> Fraction:
    """The exact value of an arithmetic expression (numbers, ``+ - * /``, parentheses;
    ``*`` and ``/`` bind tighter, left-associative), by recursive descent. Division by
    zero is a NeurosymError."""
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise NeurosymError("arithmetic: the expression ends early")
        pos += 1
        return tokens[pos - 1]

    def factor() -> Fraction:
        t = take()
        if t == "(":
            v = expr()
            if take() != ")":
                raise NeurosymError("arithmetic: missing ')'")
            return v
        if not t.isdigit():
            raise NeurosymError(f"arithmetic: unexpected token {t!r}")
        return Fraction(int(t))

    def term() -> Fraction:
        v = factor()
        while peek() in ("*", "/"):
            op = take()
            r = factor()
            if op == "/" and r == 0:
                raise NeurosymError("arithmetic: division by zero")
            v = v * r if op == "*" else v / r
        return v

    def expr() -> Fraction:
        v = term()
        while peek() in ("+", "-"):
            op = take()
            r = term()
            v = v + r if op == "+" else v - r
        return v

    value = expr()
    if pos != len(tokens):
        raise NeurosymError(f"arithmetic: trailing tokens after position {pos}")
    return value


def arith_label(value: Fraction) -> int:
    """``floor(value) mod 10`` (Python's floor and modulo: -0.5 -> -1 -> 9)."""
    return (value.numerator // value.denominator) % 10


class Arithmetic(Task):
    """Arithmetic expressions of ``grammars/arith.pcfg``: predict ``floor(value) mod 10``.
    Train on at most ``train_len`` tokens, test on ``train_len + 2 .. test_len``."""

    name = "arithmetic"
    family = "classification"
    length_axis = True
    grammar = ARITH_FILE

    def __init__(self, train_len: int = 11, test_len: int = 31, data_dir=None):
        super().__init__(data_dir)
        self.train_len, self.test_len = train_len, test_len
        self.source = f"generated: grammars/arith.pcfg samples, value by an exact evaluator, train <= {train_len} tokens, test {train_len + 2}-{test_len}"

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        n_train = 1000 if n_train is None else n_train
        n_test = 1000 if n_test is None else n_test
        rules = load_pcfg(shipped_file(ARITH_FILE), dtype=torch.float32)  # float32 as before: the same draws, the same data
        vocab = rules.vocab
        want = {"train": n_train, "test": n_test}
        got: dict[str, list[tuple[list[str], int]]] = {"train": [], "test": []}
        for round_ in range(200):
            if all(len(got[k]) >= want[k] for k in got):
                break
            for ids in rules.sample(4000, seed=seed * 1000 + round_, max_len=self.test_len):
                toks = [vocab.tokens[i] for i in ids]
                part = "train" if len(toks) <= self.train_len else "test" if len(toks) >= self.train_len + 2 else None
                if part is None or len(got[part]) >= want[part]:
                    continue
                try:
                    got[part].append((toks, arith_label(arith_value(toks))))
                except NeurosymError:  # division by zero: not an expression with a value
                    continue
        if any(len(got[k]) < want[k] for k in got):
            raise NeurosymError(f"arithmetic: could not sample {n_train} + {n_test} expressions")
        mk = lambda rows: classification_split([t for t, _ in rows], [y for _, y in rows], vocab)  # noqa: E731
        return TaskData(mk(got["train"]), mk(got["test"]), vocab, 10, [str(d) for d in range(10)])


# ---------------------------------------------------------------------- agreement
AGREEMENT_FILE = "grammars/agreement.pcfg"


def agreement_example(tree: Tree) -> tuple[list[str], int]:
    """(the words before the main verb, 0 singular / 1 plural) of a derivation
    ``S -> NP_x VP_x '.'``."""
    np_ = tree.children[0]
    if not isinstance(np_, Tree) or np_.label not in ("NP_sg", "NP_pl"):
        raise NeurosymError(f"agreement: unexpected derivation {tree}")
    return np_.leaves(), int(np_.label == "NP_pl")


class Agreement(Task):
    """Subject-verb agreement with attractors: the words before the main verb of a
    ``grammars/agreement.pcfg`` sentence -> the verb's number."""

    name = "agreement"
    family = "classification"
    grammar = AGREEMENT_FILE
    source = "generated: grammars/agreement.pcfg (Linzen-style attractors), label from the derivation"
    by_construction = {
        "pcfg-prefix-hard": "reads grammars/agreement.pcfg, the grammar that generated the sentences and their labels: its exact "
                            "next-token distribution after the prefix gives the main verb's number, i.e. it is the labelling function",
    }

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        n_train = 1000 if n_train is None else n_train
        n_test = 1000 if n_test is None else n_test
        path = shipped_file(AGREEMENT_FILE)
        rules = load_pcfg(path)  # the vocabulary of the grammar (shared with the pcfg encoder)
        rows = [agreement_example(t) for t in sample_trees(path, n_train + n_test, seed=seed, max_len=30)]
        mk = lambda rs: classification_split([w for w, _ in rs], [y for _, y in rs], rules.vocab)  # noqa: E731
        return TaskData(mk(rows[:n_train]), mk(rows[n_train:]), rules.vocab, 2, ["singular", "plural"])
