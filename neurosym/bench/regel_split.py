"""The fixed development / test split of Regel's problems (issue 19).

Made once by :func:`make_split` (per suite, the problem files sorted by number and
permuted by ``numpy.random.default_rng(19)``; the first half is development, the rest
test) and written here so it never moves: the synthesiser's choices are tuned on
``DEV`` only and ``TEST`` is reported. A test checks that :func:`make_split`
reproduces these lists from the shared data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SEED = 19

DEV: tuple[str, ...] = (
    "so/1", "so/2", "so/4", "so/5", "so/6", "so/7", "so/8", "so/11", "so/16", "so/17", "so/18",
    "so/22", "so/25", "so/26", "so/28", "so/30", "so/32", "so/33", "so/37", "so/38", "so/39",
    "so/40", "so/45", "so/47", "so/49", "so/50", "so/57", "so/61", "so/63", "so/64", "so/66",
    "so/68", "so/70", "so/72", "so/73", "so/74", "so/75", "so/76", "so/78", "so/79", "so/81",
    "so/82", "so/86", "so/89", "so/90", "so/91", "so/93", "so/97", "so/99", "so/100", "so/103",
    "so/106", "so/110", "so/112", "so/113", "so/114", "so/115", "so/117", "so/120", "so/123",
    "so/124", "deepregex/1", "deepregex/2", "deepregex/3", "deepregex/4", "deepregex/5",
    "deepregex/6", "deepregex/7", "deepregex/8", "deepregex/10", "deepregex/11", "deepregex/14",
    "deepregex/16", "deepregex/17", "deepregex/18", "deepregex/20", "deepregex/22", "deepregex/24",
    "deepregex/25", "deepregex/26", "deepregex/27", "deepregex/28", "deepregex/29", "deepregex/30",
    "deepregex/32", "deepregex/33", "deepregex/37", "deepregex/38", "deepregex/39", "deepregex/40",
    "deepregex/43", "deepregex/47", "deepregex/50", "deepregex/51", "deepregex/54", "deepregex/58",
    "deepregex/61", "deepregex/64", "deepregex/66", "deepregex/67", "deepregex/68", "deepregex/69",
    "deepregex/72", "deepregex/75", "deepregex/76", "deepregex/78", "deepregex/81", "deepregex/87",
    "deepregex/89", "deepregex/91", "deepregex/96", "deepregex/101", "deepregex/103",
    "deepregex/104", "deepregex/105", "deepregex/106", "deepregex/108", "deepregex/113",
    "deepregex/114", "deepregex/116", "deepregex/117", "deepregex/118", "deepregex/120",
    "deepregex/122", "deepregex/127", "deepregex/128", "deepregex/132", "deepregex/133",
    "deepregex/134", "deepregex/135", "deepregex/136", "deepregex/138", "deepregex/141",
    "deepregex/142", "deepregex/143", "deepregex/145", "deepregex/146", "deepregex/147",
    "deepregex/149", "deepregex/153", "deepregex/156", "deepregex/158", "deepregex/161",
    "deepregex/162", "deepregex/164", "deepregex/172", "deepregex/173", "deepregex/180",
    "deepregex/183", "deepregex/184", "deepregex/185", "deepregex/188", "deepregex/189",
    "deepregex/190", "deepregex/191", "deepregex/194", "deepregex/195", "deepregex/197",
    "deepregex/199", "deepregex/201", "deepregex/202",
)

TEST: tuple[str, ...] = (
    "so/3", "so/9", "so/10", "so/12", "so/13", "so/14", "so/15", "so/19", "so/20", "so/21",
    "so/23", "so/24", "so/29", "so/31", "so/35", "so/36", "so/41", "so/42", "so/43", "so/44",
    "so/46", "so/48", "so/51", "so/52", "so/53", "so/55", "so/56", "so/58", "so/59", "so/60",
    "so/62", "so/65", "so/69", "so/71", "so/77", "so/80", "so/83", "so/84", "so/85", "so/87",
    "so/88", "so/92", "so/94", "so/95", "so/96", "so/98", "so/101", "so/102", "so/104", "so/105",
    "so/107", "so/108", "so/109", "so/111", "so/116", "so/118", "so/119", "so/121", "so/122",
    "so/125", "so/126", "deepregex/9", "deepregex/12", "deepregex/13", "deepregex/15",
    "deepregex/19", "deepregex/21", "deepregex/23", "deepregex/31", "deepregex/34", "deepregex/35",
    "deepregex/36", "deepregex/41", "deepregex/42", "deepregex/44", "deepregex/45", "deepregex/46",
    "deepregex/48", "deepregex/49", "deepregex/52", "deepregex/53", "deepregex/55", "deepregex/56",
    "deepregex/57", "deepregex/59", "deepregex/60", "deepregex/62", "deepregex/63", "deepregex/65",
    "deepregex/70", "deepregex/73", "deepregex/74", "deepregex/77", "deepregex/79", "deepregex/80",
    "deepregex/82", "deepregex/83", "deepregex/84", "deepregex/86", "deepregex/88", "deepregex/90",
    "deepregex/92", "deepregex/94", "deepregex/95", "deepregex/97", "deepregex/98",
    "deepregex/100", "deepregex/102", "deepregex/107", "deepregex/109", "deepregex/110",
    "deepregex/112", "deepregex/115", "deepregex/119", "deepregex/121", "deepregex/123",
    "deepregex/125", "deepregex/126", "deepregex/129", "deepregex/130", "deepregex/131",
    "deepregex/137", "deepregex/139", "deepregex/140", "deepregex/144", "deepregex/148",
    "deepregex/150", "deepregex/152", "deepregex/154", "deepregex/155", "deepregex/157",
    "deepregex/159", "deepregex/160", "deepregex/163", "deepregex/165", "deepregex/166",
    "deepregex/167", "deepregex/168", "deepregex/169", "deepregex/170", "deepregex/171",
    "deepregex/174", "deepregex/175", "deepregex/176", "deepregex/177", "deepregex/178",
    "deepregex/179", "deepregex/181", "deepregex/182", "deepregex/187", "deepregex/192",
    "deepregex/193", "deepregex/196", "deepregex/198", "deepregex/200", "deepregex/203",
    "deepregex/204", "deepregex/205", "deepregex/206", "deepregex/207", "deepregex/208",
)


def make_split(names_by_suite: dict[str, Sequence[str]], seed: int = SEED) -> tuple[list[str], list[str]]:
    """``(dev, test)`` problem names (``"suite/file"``) from each suite's file names."""
    dev: list[str] = []
    test: list[str] = []
    for suite, names in names_by_suite.items():
        names = sorted(names, key=int)
        perm = np.random.default_rng(seed).permutation(len(names))
        half = len(names) // 2
        dev += [f"{suite}/{n}" for n in sorted((names[i] for i in perm[:half]), key=int)]
        test += [f"{suite}/{n}" for n in sorted((names[i] for i in perm[half:]), key=int)]
    return dev, test


def split_of(name: str) -> str:
    """``"dev"`` or ``"test"`` for a problem name such as ``"so/12"``."""
    if name in _DEV:
        return "dev"
    if name in _TEST:
        return "test"
    raise KeyError(name)


_DEV = frozenset(DEV)
_TEST = frozenset(TEST)

__all__ = ["DEV", "SEED", "TEST", "make_split", "split_of"]
