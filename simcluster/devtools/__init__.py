"""Checks for developers: ``python -m simcluster.devtools.layers``."""
