"""The comparisons behind ``neurosym bench ...``: ours vs a reference, in one run."""
