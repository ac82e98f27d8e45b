"""User-facing errors: one clear line, a non-zero exit, no traceback."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager


class UserError(Exception):
    """Bad input from the user (a file, a row, a config key). Printed as one line."""


#: the longest value that a message quotes from an id column
ID_MAX_LENGTH = 64


def looks_like_id(value) -> bool:
    """Whether `value` looks like an identifier: short, printable, with no whitespace."""
    text = str(value)
    return 0 < len(text) <= ID_MAX_LENGTH and text.isprintable() and not any(c.isspace() for c in text)


def shown_id(value, column: str = "sample_id", quoted: bool = True) -> str:
    """How a message shows a value of an id or group column: quoted when it looks like an id;
    otherwise withheld, since a column taken for the id may hold a note's text (the data we
    audit is clinical, and text never reaches a message). Say where it is instead: the file,
    row and column."""
    if looks_like_id(value):
        return repr(value) if quoted else str(value)
    return f"(a {column} value that is not id-like: not shown)"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none), for a
    one-line error that names what a library said."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def naming_keys(keys: Mapping[str, str]):
    """A user's files named by the config key that gives them: a UserError raised inside about one
    of `keys`' paths (its message starts with the path: a file, or a file inside a directory)
    becomes "config key <key>: <message>"; any other passes as it is."""
    try:
        yield
    except UserError as exc:
        text = str(exc)
        for path in sorted((str(p) for p in keys if p), key=len, reverse=True):
            if text.startswith(path) and not text.startswith("config key "):
                raise UserError(f"config key {keys[path]}: {text}") from None
        raise
