"""The one error type users see: a clear, one-line message and a non-zero exit."""


class ShardlabError(Exception):
    """Bad input from a user (config, path, submission). The CLI prints
    `error: <message>` and exits with status 2; never a traceback."""
