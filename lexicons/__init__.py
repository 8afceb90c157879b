"""The example lexicons shipped with neurosym (package data: see neurosym.data.shipped_file)."""
