"""The tasks of the structured-LM evaluation suite (``neurosym reproduce structured-suite``).

:func:`all_tasks` gives every built task in the suite's order; :data:`NOT_BUILT` names
the design's rows that have no task yet, each with the reason, so a report never drops
one silently. See :mod:`neurosym.tasks.base` for the protocol.
"""

from __future__ import annotations

from neurosym.errors import NeurosymError
from neurosym.tasks.base import BOS_ID, EOS_ID, FAMILIES, IGNORE, Split, Task, TaskData, accuracy, sequence_exact_match
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


def all_tasks(data_dir=None) -> list[Task]:
    """Every built task, in the suite's order (generated first, then real data: language
    models, tagging and parsing, classification, sequence-to-sequence)."""
    return [
        *(Tomita(i, data_dir) for i in range(1, 8)),
        DyckTask(1, data_dir),
        DyckTask(2, data_dir),
        ListOps(data_dir=data_dir),
        ListOpsReleased(data_dir=data_dir),
        Arithmetic(data_dir=data_dir),
        Agreement(data_dir),
        WikiText2LM(data_dir),
        CharLM(data_dir),
        Cloze(data_dir),
        POSTagging(data_dir),
        DependencyArcs(data_dir),
        NER(data_dir),
        Chunking(data_dir),
        Constituency(data_dir),
        Sentiment(data_dir),
        Topic(data_dir),
        Acceptability(data_dir),
        NLI(data_dir),
        Scan("simple", data_dir),
        Scan("length", data_dir),
        SemanticParsing(data_dir),
    ]


def get_task(name: str, data_dir=None) -> Task:
    """The task called ``name`` (a NeurosymError listing the known names otherwise)."""
    tasks = {t.name: t for t in all_tasks(data_dir)}
    if name not in tasks:
        hint = f" ({NOT_BUILT[name]})" if name in NOT_BUILT else ""
        raise NeurosymError(f"unknown task {name!r}{hint}; known: {', '.join(tasks)}")
    return tasks[name]


__all__ = [
    "BOS_ID", "EOS_ID", "FAMILIES", "IGNORE", "NER", "NLI", "NOT_BUILT", "Acceptability", "Agreement", "Arithmetic", "CharLM",
    "Chunking", "Cloze", "Constituency", "DependencyArcs", "DyckTask", "ListOps", "ListOpsReleased", "POSTagging", "Scan",
    "SemanticParsing", "Sentiment", "Split", "Task", "TaskData", "Tomita", "Topic", "WikiText2LM", "accuracy", "all_tasks",
    "arith_value", "bracket_f1", "get_task", "listops_value", "sequence_exact_match", "tomita_bank", "tomita_vocab", "uas",
]
