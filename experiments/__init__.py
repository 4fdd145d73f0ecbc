"""One experiment per module (``main(argv)``, a config dataclass, ``--tiny``)."""
