"""The package version, in a base module that the CLI can import without the root."""

__version__ = "0.1.0"
