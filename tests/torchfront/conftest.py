"""The corpus is loss files for the checker, not a test module (the doctest
collector must not import it)."""

collect_ignore = ["corpus.py"]
