"""User-facing errors: one clear line, a non-zero exit, no traceback."""


class UserError(Exception):
    """Bad input from the user (a file, a row, a config key). Printed as one line."""
