"""Independent reference implementations that the library is checked against.

Slow, obviously-correct oracles (brute-force enumeration, float64 dynamic programs
written the textbook way) live here, not in the library: the library holds each
algorithm once, and the tests compare it with these. In the spirit of
pytorch-struct's ``tests/extensions.py``.
"""

from __future__ import annotations

# --- automata and edit distances
#     (kept in this section: language enumeration, brute-force distances)


# --- PCFG oracles
#     (kept in this section: CKY by hand in float64)
