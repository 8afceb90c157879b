"""The training configs shipped with neurosym (package data: see neurosym.files.shipped_file)."""
