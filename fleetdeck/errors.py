"""Errors that end a command with one plain sentence instead of a traceback."""


class UserError(Exception):
    """A mistake the user can fix (bad argument, unreachable broker, bad config).

    The CLI prints ``str(err)`` on stderr and exits non-zero; keep the message one sentence
    that says what was wrong and, where it helps, what to do.
    """

    exit_code = 2
