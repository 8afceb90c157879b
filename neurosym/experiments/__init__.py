"""The recipes behind `neurosym reproduce ...`, one module each, and the pieces only they use
(controllable decoding in :mod:`.control`, the structured suite's models in :mod:`.suite_heads`)."""
