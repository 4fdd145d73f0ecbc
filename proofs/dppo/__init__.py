"""Claims of one source; shared helpers in ``_common.py``."""
