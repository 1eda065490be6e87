"""``python -m cpasim.cli``: the command line."""

from cpasim.cli import console

console()
