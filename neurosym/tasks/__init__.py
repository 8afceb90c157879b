"""The tasks of the structured-LM evaluation suite (``neurosym reproduce structured-suite``).

:func:`all_tasks` gives every built task in the suite's order; :data:`NOT_BUILT` names
the design's rows that have no task yet, each with the reason, so a report never drops
one silently. See :mod:`neurosym.tasks.base` for the protocol.
"""

from __future__ import annotations

from neurosym.errors import NeurosymError
from neurosym.tasks.base import FAMILIES, IGNORE, Split, Task, TaskData, accuracy
from neurosym.tasks.generated import Agreement, Arithmetic, DyckTask, ListOps, ListOpsReleased, arith_value, listops_value
from neurosym.tasks.real import NER, NLI, Acceptability, POSTagging, Sentiment, Topic
from neurosym.tasks.tomita import Tomita, tomita_bank, tomita_vocab

NOT_BUILT: dict[str, str] = {
    "wikitext2-lm": "word-level LM: needs a next-token head; the suite has classification and tagging heads only",
    "char-lm": "character-level LM: needs a next-token head (and enwik8/text8 are not in the shared data)",
    "dependency-arcs": "UD English-EWT head prediction: needs an arc-scoring head, not built yet",
    "chunking": "CoNLL-2000 is not freely licensed; chunks derived from gum-const trees are not built yet",
    "constituency": "PTB sample not freely licensed; gum-const trees need a span head, not built yet",
    "cloze": "LAMBADA: no complete copy in the shared data",
    "scan": "SCAN: a sequence-to-sequence task; the suite has no decoder head yet",
    "semantic-parsing": "advising text-to-SQL: a sequence-to-sequence task; no decoder head yet",
    "extractive-qa": "SQuAD: no complete copy in the shared data",
    "translation": "Multi30k: no licence for the text; no decoder head yet",
}


def all_tasks(data_dir=None) -> list[Task]:
    """Every built task, in the suite's order (generated first, then real data)."""
    return [
        *(Tomita(i, data_dir) for i in range(1, 8)),
        DyckTask(1, data_dir),
        DyckTask(2, data_dir),
        ListOps(data_dir=data_dir),
        ListOpsReleased(data_dir=data_dir),
        Arithmetic(data_dir=data_dir),
        Agreement(data_dir),
        POSTagging(data_dir),
        NER(data_dir),
        Sentiment(data_dir),
        Topic(data_dir),
        Acceptability(data_dir),
        NLI(data_dir),
    ]


def get_task(name: str, data_dir=None) -> Task:
    """The task called ``name`` (a NeurosymError listing the known names otherwise)."""
    tasks = {t.name: t for t in all_tasks(data_dir)}
    if name not in tasks:
        hint = f" ({NOT_BUILT[name]})" if name in NOT_BUILT else ""
        raise NeurosymError(f"unknown task {name!r}{hint}; known: {', '.join(tasks)}")
    return tasks[name]


__all__ = [
    "FAMILIES", "IGNORE", "NER", "NLI", "NOT_BUILT", "Acceptability", "Agreement", "Arithmetic", "DyckTask", "ListOps",
    "ListOpsReleased", "POSTagging", "Sentiment", "Split", "Task", "TaskData", "Tomita", "Topic", "accuracy", "all_tasks",
    "arith_value", "get_task", "listops_value", "tomita_bank", "tomita_vocab",
]
