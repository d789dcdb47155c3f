"""Errors every layer may raise: the lowest layer of the package, importing nothing of it."""


class ConfigError(ValueError):
    """A configuration problem; the message names the file and the field."""


class Reject(ValueError):
    """The message cannot be decoded; ``str(exc)`` is the quarantine reason."""


class Outage(Exception):
    """Something decoding depends on is down (a schema registry that does not answer): not bad data.

    Silver lets it fail the batch, which the stream retries from its checkpoint, instead of
    quarantining: quarantined messages of a live table would let later changes apply past them,
    and only a rebuild would repair the mirror.
    """


class InvalidValue(Reject):
    """A value the source itself holds as invalid, passed on as the source wrote it: MySQL's zero
    dates (``0000-00-00 00:00:00``) and dates OMS passes as their original text (seeds 000, 001:
    "invalid dates display the original string", "invalid timestamps display as 0000-00-00
    00:00:00"). Decoders keep the row with the column NULL and the raw text in ``Change.invalid``;
    gold follows the table's ``invalid_values`` policy."""

    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(reason)
        self.raw = raw
