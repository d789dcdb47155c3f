"""Errors every layer may raise: the lowest layer of the package, importing nothing of it."""


class ConfigError(ValueError):
    """A configuration problem; the message names the file and the field."""
