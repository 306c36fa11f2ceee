"""Errors the CLI turns into one clear line instead of a traceback."""


class UserError(Exception):
    """Bad input from the user: a file, line, field or flag. The message names it."""
