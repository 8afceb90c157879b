"""The tasks of the structured-LM evaluation suite (``neurosym reproduce structured-suite``).

:data:`TASKS` is the registry (name -> factory), in the suite's order; a task joins it
through :func:`register_task` (docs/architecture.md, "How to add a suite task").
:func:`all_tasks` gives every registered task; :data:`NOT_BUILT` names the design's rows
that have no task yet, each with the reason, so a report never drops one silently. See
:mod:`neurosym.tasks.base` for the protocol (priors included).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from neurosym.errors import NeurosymError
from neurosym.tasks.base import (
    BOS_ID, EOS_ID, FAMILIES, IGNORE, Split, Task, TaskData, accuracy, sequence_exact_match, train_test_duplicates,
)
from neurosym.tasks.generated import Agreement, Arithmetic, DyckTask, ListOps, ListOpsReleased, arith_value, listops_value
from neurosym.tasks.lm import CharLM, Cloze, WikiText2LM
from neurosym.tasks.parsing import Chunking, Constituency, DependencyArcs, bracket_f1, uas
from neurosym.tasks.real import NER, NLI, Acceptability, POSTagging, Sentiment, Topic
from neurosym.tasks.seq2seq import Scan, SemanticParsing
from neurosym.tasks.tomita import Tomita, tomita_bank, tomita_vocab

NOT_BUILT: dict[str, str] = {
    "extractive-qa": "SQuAD 1.1: no complete copy in the shared data (its README: not found whole in any stored snapshot)",
    "translation": "no parallel text in the shared data (Multi30k: no licence for the text)",
}


TaskFactory = Callable[[Path | None], Task]
"""What registers a task: ``factory(data_dir) -> Task`` (``data_dir``: ``--data``, or None)."""

TASKS: dict[str, TaskFactory] = {}
"""The suite's tasks, in its order: name -> factory. :func:`register_task` adds to it."""


def register_task(name: str, factory: TaskFactory, replace: bool = False) -> None:
    """Make a task part of the suite (``neurosym reproduce structured-suite --tasks NAME``,
    :func:`all_tasks`, :func:`get_task`): ``factory(data_dir)`` builds it, and its
    ``name`` must be ``name``. The task declares its priors on itself (``regex_prior``,
    ``regex_target``, ``regex_bank``, ``grammar``; see :class:`~neurosym.tasks.base.Task`).
    A name already registered is an error unless ``replace``."""
    if not name or not isinstance(name, str) or "," in name or name != name.strip():
        raise NeurosymError(f"register_task: expected a task name without commas or surrounding spaces, got {name!r}")
    if (name in TASKS or name in NOT_BUILT) and not replace:
        raise NeurosymError(f"register_task: a task {name!r} is already registered (pass replace=True to replace it)")
    TASKS[name] = factory


def _built(name: str, data_dir) -> Task:
    task = TASKS[name](Path(data_dir) if data_dir is not None else None)
    if not isinstance(task, Task) or task.name != name:
        got = f"a task named {task.name!r}" if isinstance(task, Task) else type(task).__name__
        raise NeurosymError(f"task {name!r}: its factory returned {got}, expected a neurosym.tasks.Task named {name!r}")
    return task


def all_tasks(data_dir=None) -> list[Task]:
    """Every registered task, in the suite's order (generated first, then real data:
    language models, tagging and parsing, classification, sequence-to-sequence; then the
    tasks registered from outside, in the order they were registered)."""
    return [_built(name, data_dir) for name in TASKS]


def get_task(name: str, data_dir=None) -> Task:
    """The task called ``name`` (a NeurosymError listing the known names otherwise)."""
    if name not in TASKS:
        hint = f" ({NOT_BUILT[name]})" if name in NOT_BUILT else ""
        raise NeurosymError(f"unknown task {name!r}{hint}; known: {', '.join(TASKS)}")
    return _built(name, data_dir)


for _i in range(1, 8):
    register_task(f"tomita{_i}", lambda data_dir, i=_i: Tomita(i, data_dir))
for _name, _factory in (
    ("dyck1", lambda data_dir: DyckTask(1, data_dir)),
    ("dyck2", lambda data_dir: DyckTask(2, data_dir)),
    ("listops", lambda data_dir: ListOps(data_dir=data_dir)),
    ("listops-released", lambda data_dir: ListOpsReleased(data_dir=data_dir)),
    ("arithmetic", lambda data_dir: Arithmetic(data_dir=data_dir)),
    ("agreement", Agreement),
    ("wikitext2-lm", WikiText2LM),
    ("char-lm", CharLM),
    ("cloze", Cloze),
    ("pos", POSTagging),
    ("dependency-arcs", DependencyArcs),
    ("ner", NER),
    ("chunking", Chunking),
    ("constituency", Constituency),
    ("sentiment", Sentiment),
    ("topic", Topic),
    ("acceptability", Acceptability),
    ("nli", NLI),
    ("scan", lambda data_dir: Scan("simple", data_dir)),
    ("scan-length", lambda data_dir: Scan("length", data_dir)),
    ("semantic-parsing", SemanticParsing),
):
    register_task(_name, _factory)
del _i, _name, _factory


__all__ = [
    "BOS_ID", "EOS_ID", "FAMILIES", "IGNORE", "NER", "NLI", "NOT_BUILT", "Acceptability", "Agreement", "Arithmetic", "CharLM",
    "Chunking", "Cloze", "Constituency", "DependencyArcs", "DyckTask", "ListOps", "ListOpsReleased", "POSTagging", "Scan",
    "SemanticParsing", "Sentiment", "Split", "TASKS", "Task", "TaskData", "TaskFactory", "Tomita", "Topic", "WikiText2LM", "accuracy", "all_tasks",
    "arith_value", "bracket_f1", "get_task", "listops_value", "register_task", "sequence_exact_match", "tomita_bank", "tomita_vocab", "train_test_duplicates", "uas",
]
