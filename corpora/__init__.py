"""Real-text corpora shipped with neurosym (package data: see neurosym.data.text.corpus_path).

Third-party text under CC BY-SA, kept apart from the code; README.md says where each
file comes from, how it was derived and under which licence."""
