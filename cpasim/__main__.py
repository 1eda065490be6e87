"""``python -m cpasim``: the command line."""

from cpasim.cli import console

console()
