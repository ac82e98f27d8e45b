"""mlmia: membership inference attacks on masked language models."""

__version__ = "0.1.0"
