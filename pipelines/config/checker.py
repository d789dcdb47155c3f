"""The generic checks of a configuration document: a field's type (mapping, list, text, boolean), the allowed
keys of a mapping, and every error collected so one :class:`~pipelines.errors.ConfigError` names them all.

:mod:`pipelines.config.validation` (the document's own fields) and :mod:`pipelines.config.choices` (the
per-table and naming choices) both check through it; neither imports the other's validator type.
"""

from __future__ import annotations

from typing import Any

from pipelines.errors import ConfigError


class Checker:
    """Checks each field's type and value, collecting every error; :meth:`done` raises them together.

    A check that fails records the error and returns a harmless default, so validation goes on.
    """

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.errors: list[str] = []

    def fail(self, where: str, message: str) -> None:
        self.errors.append(f"{self.origin}: {where or 'top level'}: {message}")

    def done(self) -> None:
        if len(self.errors) == 1:
            raise ConfigError(self.errors[0])
        if self.errors:
            raise ConfigError(
                f"{self.origin}: {len(self.errors)} configuration errors:\n"
                + "\n".join(f"  - {e}" for e in self.errors)
            )

    def mapping(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping, got {type(value).__name__}")
            return {}
        return value

    def sequence(self, value: Any, where: str) -> list:
        if not isinstance(value, list):
            self.fail(where, f"expected a list, got {type(value).__name__}")
            return []
        return value

    def text(self, value: Any, where: str, default: str | None) -> Any:
        """A string (None when absent and the default is None); anything else is an error."""
        if value is None and default is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(where, f"must be a non-empty string, got {value!r:.80}")
            return default if default is not None else ""
        return value

    def only(self, value: dict, where: str, allowed: set[str]) -> None:
        prefix = f"{where}." if where else ""
        for unknown in sorted(set(map(str, value)) - allowed):
            self.fail(f"{prefix}{unknown}", f"unknown field; allowed here: {', '.join(sorted(allowed))}")

    def boolean(self, value: Any, where: str, default: bool = False) -> bool:
        if not isinstance(value, bool):
            self.fail(where, f"must be true or false, got {value!r:.80}")
            return default
        return value

    def one_of(self, value: Any, where: str, allowed: tuple[str, ...], default: str, what: str) -> str:
        """One of ``allowed`` (``what`` says what the choice decides, in the error)."""
        if value not in allowed:
            self.fail(where, f"must be one of {', '.join(allowed)} ({what}), got {value!r:.80}")
            return default
        return value
