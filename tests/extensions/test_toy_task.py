"""A suite task registered from outside the package, with its own regex prior, run
through the suite's recipe entry point (docs/architecture.md, "How to add a suite task")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neurosym.compile.regex import RegexBank, compile_bank
from neurosym.dsl.regex import parse_regex_bank
from neurosym.errors import NeurosymError
from neurosym.experiments import structured_suite as suite
from neurosym.experiments import suite_report
from neurosym.tasks import TASKS, Task, TaskData, all_tasks, get_task, register_task
from neurosym.tasks.base import classification_split
from neurosym.vocab import Vocab

# The toy prior: a bank whose EVEN pattern is exactly the task's label.
TOY_BANK = """
EVEN: /(b*ab*a)*b*/     # an even number of a's
ENDS_A: /(a|b)*a/
"""


class EvenAs(Task):
    """Strings over {a, b}: is the number of a's even? Train on lengths 1-8, test on 9-16."""

    name = "toy-even-as"
    family = "classification"
    source = "generated in tests/extensions/test_toy_task.py"
    length_axis = True
    regex_prior = "bank"
    regex_target = "EVEN"

    def regex_bank(self, vocab: Vocab) -> RegexBank:
        return compile_bank(parse_regex_bank(TOY_BANK), vocab)

    def build(self, n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> TaskData:
        vocab = Vocab.words(["a", "b"])
        rng = np.random.default_rng(seed)
        splits = []
        for n, (lo, hi) in ((n_train or 200, (1, 8)), (n_test or 100, (9, 16))):
            words = [list(rng.choice(["a", "b"], size=int(rng.integers(lo, hi + 1)))) for _ in range(n)]
            splits.append(classification_split(words, [int(w.count("a") % 2 == 0) for w in words], vocab))
        return TaskData(splits[0], splits[1], vocab, 2, ["odd", "even"])


@pytest.fixture
def toy_task():
    register_task(EvenAs.name, EvenAs)
    yield
    TASKS.pop(EvenAs.name, None)


def test_a_registered_task_joins_the_suite_with_its_prior(toy_task, tmp_path):
    assert get_task("toy-even-as").name == "toy-even-as" and all_tasks()[-1].name == "toy-even-as"
    budget = suite.budget_for(True, n_train=120, n_test=60, steps=5, shares=(1.0,), share_tasks=())
    report = suite.reproduce(tmp_path, ["toy-even-as"], ["lstm", "regex-hard", "regex-others", "pcfg-hard"], seeds=1, budget=budget,
                             progress=False)
    row = report["tasks"]["toy-even-as"]
    assert set(row) == {"lstm", "regex-hard", "regex-others"}
    # the prior: the readout starts by reading EVEN, which is the label, so the cold start is exact
    assert report["cold_start"] == {"toy-even-as": 1.0}
    assert row["regex-hard"]["accuracy"] == 1.0  # frozen automata, 5 steps: still exact
    assert report["not_applicable"]["toy-even-as"] == {"pcfg-hard": "no grammar for this task"}
    assert "toy-even-as" in report["by_length"]
    # the run's record, and the report files
    record = json.loads((tmp_path / "results" / "toy-even-as" / "regex-hard-share1-seed0.json").read_text())
    assert record["cold_start"] == 1.0 and record["task"] == "toy-even-as"
    text = suite_report.write_report(report, tmp_path).read_text(encoding="utf-8")
    assert "| toy-even-as | " in text and "regex-others" in text


def test_registration_is_checked(toy_task):
    with pytest.raises(NeurosymError, match="already registered"):
        register_task("toy-even-as", EvenAs)
    with pytest.raises(NeurosymError, match="already registered"):
        register_task("tomita3", EvenAs)
    register_task("toy-misnamed", EvenAs)
    try:
        with pytest.raises(NeurosymError, match="named 'toy-even-as', expected a neurosym.tasks.Task named 'toy-misnamed'"):
            get_task("toy-misnamed")
    finally:
        TASKS.pop("toy-misnamed")
    with pytest.raises(NeurosymError, match="regex_target 'NOPE' is not in its bank"):
        task = EvenAs()
        task.regex_target = "NOPE"
        data = task.build(20, 10)
        suite.build_model(task, data, "regex-hard", 8, seed=0)
