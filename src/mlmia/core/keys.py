"""Stable integer keys of strings, for seeding generators (not Python's salted hash())."""

from __future__ import annotations

import hashlib


def stable_key(text: str) -> int:
    """A 128-bit integer from the SHA-256 of `text`: the same in every process and machine."""
    digest = hashlib.sha256(str(text).encode("utf-8")).digest()
    return int.from_bytes(digest[:16], "little")
