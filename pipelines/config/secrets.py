"""Secrets in a configuration: a warning for each one written in the file as a literal, and ``${VAR}``
read from the environment where a client needs it (:func:`resolve_secret`).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from pipelines.errors import ConfigError

log = logging.getLogger("pipelines.config")  # the warnings keep the name of the configuration's logger

#: Last part of a setting name that holds a secret (``sasl.password``, ``client_secret`` ...).
_SECRET_WORDS = {"password", "passwd", "pwd", "secret", "token", "credential", "credentials"}
_SECRET_SUFFIXES = ("user.info", "jaas.config", "api.key", "apikey", "private.key", "access.key", "secret.key")


def warn_literal_secrets(document: Any, origin: str) -> None:
    """Log a warning for each secret written as a literal (``sasl.password: hunter2``): write ``${VAR}``."""
    stack: list[tuple[str, Any]] = [("", document)]
    seen: set[int] = set()
    while stack:
        where, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for name, value in items:
            path = f"{where}.{name}" if where else str(name)
            if isinstance(value, (dict, list)):
                stack.append((path, value))
            elif (
                isinstance(value, str)
                and value.strip()
                and _is_secret_name(str(name))
                and not re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", value.strip())
            ):
                log.warning(
                    "%s: %s holds a secret written in the file; write ${VAR} and set the environment "
                    "variable VAR instead",
                    origin,
                    path,
                )


def _is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return re.split(r"[._-]", lowered)[-1] in _SECRET_WORDS or lowered.endswith(_SECRET_SUFFIXES)


def resolve_secret(value: str) -> str:
    """``${NAME}`` → the environment variable NAME (Kafka SASL/SSL secrets never live in YAML)."""
    m = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value.strip())
    if not m:
        return value
    if m.group(1) not in os.environ:
        raise ConfigError(f"environment variable {m.group(1)} is not set (referenced by the configuration)")
    return os.environ[m.group(1)]
