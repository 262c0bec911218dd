"""The hostile-input corpus: generated cases (``corpus.py``), the runner that feeds them to the real command line and
classifies every outcome (``run.py``), and the byte map of an artifact's zip structure they share (``zipmodel.py``).

``python -m tests.hostile.run`` runs the whole corpus and prints the summary table of RELIABILITY.md.
"""
