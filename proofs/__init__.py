"""The papers' claims, one package per source (see README.md)."""
