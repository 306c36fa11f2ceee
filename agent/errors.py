"""Errors the CLI turns into clear lines instead of a traceback."""


class UserError(Exception):
    """Bad input from the user: a file, line, field or flag. The message names it.

    Usually one line. A file with several problems (a run config) gives one line per problem,
    each complete on its own (``file: line N: field 'x': ...``), so that fixing them needs one
    run, not one per problem; ``lines`` holds them and the message is them joined by newlines.
    """

    def __init__(self, message: str, *more: str) -> None:
        self.lines: tuple[str, ...] = (message, *more)
        super().__init__("\n".join(self.lines))
