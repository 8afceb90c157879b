"""``neurosym bench synth --suites corpus``: one regex per token class of UD English-EWT,
scored on the test tokens next to two baselines that need no synthesis (the
memorised forms and the word shapes).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from neurosym.data import shared_data
from neurosym.synth import clock
from neurosym.synth.corpus import read_corpus, synthesize_corpus

CORPUS_CLASSES = ("NUM", "PUNCT", "SYM", "X", "PROPN")


def _prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0}


def memorised(train: Sequence[tuple[str, str]]):
    """The memorised-forms baseline: each training form's majority label (ties: the
    label seen first), an unseen form the majority class of the training tokens."""
    by_form: dict[str, Counter] = {}
    for form, label in train:
        by_form.setdefault(form, Counter())[label] += 1
    majority = Counter(label for _, label in train).most_common(1)[0][0]
    table = {form: c.most_common(1)[0][0] for form, c in by_form.items()}
    return lambda form: table.get(form, majority), majority


SHAPE_RUN = 4  # longest run of one character kind a shape keeps


def word_shape(form: str) -> str:
    """A form's word shape: upper-case letters ``X``, lower-case ``x``, digits ``d``, other
    letters ``L``, every other character itself, and runs of one kind cut to
    ``SHAPE_RUN`` (``"Varsha"`` -> ``"Xxxxx"``, ``"12.50"`` -> ``"dd.dd"``, ``"2024-01-15"``
    -> ``"dddd-dd-dd"``)."""
    out: list[str] = []
    run = 0
    for ch in form:
        k = "X" if ch.isupper() else "x" if ch.islower() else "d" if ch.isdigit() else "L" if ch.isalpha() else ch
        run = run + 1 if out and out[-1] == k and k in "XxdL" else 1
        if run <= SHAPE_RUN:
            out.append(k)
    return "".join(out)


def shaped(train: Sequence[tuple[str, str]]):
    """The word-shape baseline: a training form gets its majority label (as in
    :func:`memorised`); an unseen form gets the majority label of the training tokens of
    its :func:`word_shape`, an unseen shape the majority class."""
    known, majority = memorised(train)
    by_form = {form for form, _ in train}
    by_shape: dict[str, Counter] = {}
    for form, label in train:
        by_shape.setdefault(word_shape(form), Counter())[label] += 1
    table = {shape: c.most_common(1)[0][0] for shape, c in by_shape.items()}
    return lambda form: known(form) if form in by_form else table.get(word_shape(form), majority)


BASELINES = ("memorised", "shape")


def run_corpus(
    classes: Sequence[str] = CORPUS_CLASSES,
    time_budget: float = 60.0,
    train_split: str = "train",
    test_split: str = "test",
    label: str = "UPOS",
    log=None,
    **options,
) -> dict:
    """Corpus mode on UD English-EWT: one regex per class learnt from ``train_split``'s
    tokens (negatives: every other label's tokens), scored on ``test_split``'s tokens —
    precision, recall and F1 of "the form fullmatches the class's regex" against the
    gold label, on all test tokens and on the tokens whose form never occurs in
    training — next to the memorised-forms baseline (:func:`memorised`) and the
    word-shape baseline (:func:`shaped`). Tune on
    ``test_split="dev"``; report ``"test"``."""
    folder = shared_data("ud-english-ewt")
    train = read_corpus(folder / f"en_ewt-ud-{train_split}.conllu", label)
    test = read_corpus(folder / f"en_ewt-ud-{test_split}.conllu", label)
    t0 = clock.now()
    results = synthesize_corpus(train, classes=classes, time_budget=time_budget, progress=(lambda r: log(str(r))) if log else None, **options)
    seconds = clock.now() - t0
    seen = {form for form, _ in train}
    predict, majority = memorised(train)
    by_shape = shaped(train)
    rows = {}
    for res in results:
        rx = re.compile(res.pattern)
        row = {"pattern": res.pattern, "train_accuracy": res.accuracy, "train_f1": res.f1, "seconds": res.seconds, "rounds": len(res.rounds)}
        for scope in ("all", "unseen"):
            toks = [(f, lab) for f, lab in test if scope == "all" or f not in seen]
            counts = {"regex": [0, 0, 0], "memorised": [0, 0, 0], "shape": [0, 0, 0]}
            for form, gold in toks:
                guesses = (("regex", rx.fullmatch(form) is not None), ("memorised", predict(form) == res.label), ("shape", by_shape(form) == res.label))
                for who, guess in guesses:
                    truth = gold == res.label
                    c = counts[who]
                    c[0] += guess and truth
                    c[1] += guess and not truth
                    c[2] += truth and not guess
            row[scope] = {who: _prf(*c) for who, c in counts.items()}
            row[scope]["tokens"] = sum(1 for _, lab in toks if lab == res.label)
        rows[res.label] = row
    return {
        "train": train_split,
        "test": test_split,
        "train_tokens": len(train),
        "test_tokens": len(test),
        "unseen_test_tokens": sum(1 for f, _ in test if f not in seen),
        "majority_class": majority,
        "seconds": seconds,
        "time_budget": time_budget,
        "classes": rows,
    }


__all__ = ["BASELINES", "CORPUS_CLASSES", "SHAPE_RUN", "memorised", "run_corpus", "shaped", "word_shape"]
