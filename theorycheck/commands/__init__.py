"""One module per CLI sub-command (discovered by :mod:`theorycheck.cli`)."""
