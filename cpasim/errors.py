"""The one exception type meant for people.

Anything raised as :class:`CpasimError` reaches the user as a single line on
stderr and exit status 2 (see :mod:`cpasim.cli`).  Its message must name the
key, record or file at fault and say what was expected.
"""


class CpasimError(Exception):
    """A user-facing error: bad scenario, bad trace, bad command-line value."""
