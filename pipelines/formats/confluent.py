"""The Confluent wire format and a client of the Confluent-compatible schema registry REST API.

Wire format (Confluent's "Wire format" documentation; the same framing is written by Confluent's
``KafkaAvroSerializer``, Apicurio's ccompat serdes, Karapace and Redpanda): byte 0 is the magic
byte ``0``, bytes 1-4 the schema id (big-endian unsigned), the rest the Avro binary body of one
datum written with that schema (no container-file header). The writer schema comes from
``GET {url}/schemas/ids/{id}`` → ``{"schema": "<schema JSON text>", "schemaType"?: "AVRO",
"references"?: [{"name", "subject", "version"}]}``, the API Confluent, Apicurio (ccompat path, e.g.
``/apis/ccompat/v7``), Karapace and Redpanda serve; references are fetched from
``GET {url}/subjects/{subject}/versions/{version}``.

Configuration, per format id (YAML ``format_options``; ``${VAR}`` texts are read from the environment
of the process that decodes, so secrets never live in the file)::

    format_options:
      debezium_avro:
        schema_registry:
          url: https://registry.example.com/apis/ccompat/v7   # http(s) only, no credentials in the URL
          username: ${REG_USER}        # optional: HTTP basic auth
          password: ${REG_PASS}
          timeout: 10                  # seconds per request (default 10)
          retry_after: 30              # seconds a failure to reach the registry is remembered (default 30)

Each process (the driver, every Spark executor's Python worker) keeps one client per configuration
and caches every parsed schema by id, thread-safely; a schema id is fetched once per process.

Failures, decided:

* a message that is not framed (first byte not 0, shorter than 5 bytes), an id the registry does not
  know (HTTP 404), a schema that is not Avro or does not parse, a body that does not match its schema:
  :class:`Reject` naming the registry and the id; the message is quarantined, the batch goes on.
* a registry that cannot be reached, answers 5xx, refuses the credentials (401/403), redirects, or
  is slower than ``timeout``, and a ``${VAR}`` that is not set: :class:`RegistryUnavailable`. That is
  not bad data: quarantining every message while the registry is down would leave the mirrors
  silently stale, and later changes would apply past the quarantined ones (only a rebuild from
  bronze repairs that). So it should fail the micro-batch loudly, and the stream restarts from its
  checkpoint once the registry is back. It subclasses :class:`Reject` so that a caller that knows
  only Reject still quarantines (never crashes) and ``lakecdc decode`` prints it; silver must let
  it through to fail the batch. After such a failure the client does not call the registry again
  for ``retry_after`` seconds (each message fails at once with the same reason instead of waiting
  ``timeout`` each); an unknown id is remembered for the same time.

Longer than 420 lines because the framing, the settings, the HTTP client with its failure rules and
the per-process cache are one contract that every Avro format shares.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import fastavro

from pipelines.errors import Outage
from pipelines.formats.base import Change, DecodeContext, Reject

#: The Confluent wire format's first byte.
MAGIC_BYTE = 0
#: Magic byte + 4-byte schema id.
HEADER_BYTES = 5
#: The ``format_options.<format>`` key holding the registry settings.
OPTION = "schema_registry"
DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRY_AFTER = 30.0
#: Largest registry response read (a schema of thousands of columns is well under 1 MiB).
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Deepest chain of schema references followed.
MAX_REFERENCE_DEPTH = 16
_SETTING_KEYS = ("url", "username", "password", "timeout", "retry_after")
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class RegistryUnavailable(Reject, Outage):
    """The schema registry could not answer (down, slow, 5xx, refused credentials): an outage, not bad data.

    An :class:`~pipelines.errors.Outage`, so silver fails the batch and the stream retries it; also a
    Reject, so ``lakecdc decode`` prints it as the message's reason.
    """


# ---------------------------------------------------------------- framing


def unframe(raw: bytes) -> tuple[int, bytes]:
    """(schema id, Avro body) of a Confluent-framed message, or Reject."""
    data = bytes(raw)
    if len(data) < HEADER_BYTES:
        raise Reject(
            f"message of {len(data)} bytes is too short for the Confluent wire format "
            "(magic byte 0, 4-byte schema id, Avro body)"
        )
    if data[0] != MAGIC_BYTE:
        raise Reject(
            f"not in the Confluent wire format: the first byte is 0x{data[0]:02x}, not the magic byte 0x00 "
            "(was the message written by a schema-registry serializer?)"
        )
    return int.from_bytes(data[1:HEADER_BYTES], "big"), data[HEADER_BYTES:]


def frame(schema_id: int, body: bytes) -> bytes:
    """The Confluent wire form of an Avro body written with schema ``schema_id`` (encoders, tests)."""
    return bytes([MAGIC_BYTE]) + int(schema_id).to_bytes(4, "big") + bytes(body)


def is_framed(raw: bytes | None) -> bool:
    """Whether a message starts like a Confluent-framed one (magic byte and room for an id)."""
    return raw is not None and len(raw) >= HEADER_BYTES and raw[0] == MAGIC_BYTE


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class RegistrySettings:
    """The ``schema_registry`` option of one format; credentials as written (``${VAR}`` unexpanded)."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    retry_after: float = DEFAULT_RETRY_AFTER


def registry_settings(options: Mapping[str, Any] | None) -> RegistrySettings | None:
    """The registry settings in a format's options (None when not set), or Reject naming the bad field.

    ``config`` calls this at load time (an error there is a ConfigError); decoders call it again.
    """
    if not options or options.get(OPTION) is None:
        return None
    raw = options[OPTION]
    if isinstance(raw, str):
        raw = {"url": raw}
    if not isinstance(raw, Mapping):
        raise Reject(f"{OPTION} should be a mapping with url (and username, password, timeout), got {raw!r:.60}")
    unknown = sorted(str(k) for k in raw if k not in _SETTING_KEYS)
    if unknown:
        raise Reject(f"{OPTION} has unknown settings {', '.join(unknown)}; known: {', '.join(_SETTING_KEYS)}")
    url = raw.get("url")
    if not isinstance(url, str) or not url.strip():
        raise Reject(f"{OPTION}.url is required: the registry's base URL, e.g. http://127.0.0.1:8081")
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Reject(f"{OPTION}.url must be an http:// or https:// URL, got {url!r:.120}")
    if parts.username or parts.password:
        raise Reject(f"{OPTION}.url must not carry credentials: set {OPTION}.username and password (${{VAR}})")
    if parts.query or parts.fragment:
        raise Reject(f"{OPTION}.url must be a base URL without query or fragment, got {url!r:.120}")
    for name in ("username", "password"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise Reject(f"{OPTION}.{name} should be text (write ${{VAR}} to read it from the environment)")
    if (raw.get("username") is None) != (raw.get("password") is None):
        raise Reject(f"{OPTION}: username and password go together (HTTP basic auth)")
    numbers = {}
    for name, default in (("timeout", DEFAULT_TIMEOUT), ("retry_after", DEFAULT_RETRY_AFTER)):
        value = raw.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
            raise Reject(f"{OPTION}.{name} should be a number of seconds between 0 and 3600, got {value!r:.40}")
        numbers[name] = float(value)
    return RegistrySettings(
        url=url.strip().rstrip("/"),
        username=raw.get("username"),
        password=raw.get("password"),
        **numbers,
    )


def expand_env(value: str, what: str) -> str:
    """``${NAME}`` (anywhere in the text) → the environment variable NAME; an unset one → RegistryUnavailable.

    The same rule as ``config.resolve_secret`` for Kafka secrets, applied where the decoding runs.
    """

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise RegistryUnavailable(
                f"environment variable {m.group(1)} is not set (referenced by {OPTION}.{what}) in this process"
            )
        return os.environ[m.group(1)]

    return _ENV_RE.sub(one, value)


# ---------------------------------------------------------------- schemas


def _strip_logical(schema: Any) -> Any:
    """A copy of an Avro schema without ``logicalType``: values are read as their underlying type."""
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    return schema


@dataclass
class RegistrySchema:
    """One writer schema of the registry: its JSON and the schemas it references (dependencies first)."""

    schema_id: int
    registry: str
    schema: Any
    references: tuple[Any, ...] = ()
    #: what decoders derive from the schema once (e.g. debezium_avro's Connect converter), by their key
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _parse(self, plain: bool) -> tuple[Any, dict[str, Any]]:
        named: dict[str, Any] = {}
        fix = _strip_logical if plain else (lambda s: s)
        try:
            for ref in self.references:
                fastavro.parse_schema(fix(ref), named_schemas=named)
            return fastavro.parse_schema(fix(self.schema), named_schemas=named), named
        except Exception as exc:  # fastavro raises SchemaParseException, UnknownType, KeyError ...
            raise Reject(
                f"schema id {self.schema_id} of the schema registry {self.registry} is not a usable Avro schema: "
                f"{type(exc).__name__}: {exc}"[:300]
            ) from None

    @cached_property
    def logical(self) -> tuple[Any, dict[str, Any]]:
        """(parsed schema, every named type by full name), logical types applied when reading."""
        return self._parse(plain=False)

    @property
    def parsed(self) -> Any:
        """The schema parsed by fastavro: names fully qualified, extra properties (``connect.*``) kept."""
        return self.logical[0]

    @cached_property
    def plain(self) -> tuple[Any, dict[str, Any]]:
        """(parsed schema without logical types, every named type by full name): values as written."""
        return self._parse(plain=True)

    def read(self, body: bytes, *, plain: bool = False, record_names: bool = False) -> Any:
        """The datum in ``body``, which must be consumed exactly, or Reject."""
        parsed = self.plain[0] if plain else self.parsed
        buf = io.BytesIO(body)
        try:
            datum = fastavro.schemaless_reader(buf, parsed, return_record_name=record_names)
        except Exception as exc:  # EOFError, ValueError, UnicodeDecodeError, IndexError ...
            raise Reject(
                f"the Avro body does not match schema id {self.schema_id} of {self.registry}: "
                f"{type(exc).__name__}: {exc}"[:300]
            ) from None
        if buf.tell() != len(body):
            raise Reject(
                f"{len(body) - buf.tell()} bytes left over after the Avro datum of schema id {self.schema_id} "
                f"of {self.registry}"
            )
        return datum


# ---------------------------------------------------------------- client


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are errors: requests (and credentials) go only to the configured registry."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 - urllib's signature
        return None


class SchemaRegistry:
    """A Confluent-compatible schema registry: ``schema(id)`` → :class:`RegistrySchema`, cached per id.

    Thread-safe; one request at a time per client (concurrent misses of one id fetch it once).
    """

    def __init__(
        self,
        url: str,
        username: str | None = None,
        password: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry_after: float = DEFAULT_RETRY_AFTER,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self.retry_after = float(retry_after)
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        self._opener = urllib.request.build_opener(_NoRedirect())
        self._cache: dict[int, RegistrySchema] = {}
        self._missing: dict[int, tuple[float, str]] = {}  # id → (until, reason): unknown ids, remembered
        self._down: tuple[float, str] | None = None  # (until, reason) after a failure to reach the registry
        self._lock = threading.RLock()
        self.requests = 0  # HTTP requests made (for tests and logs)

    @classmethod
    def from_settings(cls, settings: RegistrySettings) -> SchemaRegistry:
        username = expand_env(settings.username, "username") if settings.username is not None else None
        password = expand_env(settings.password, "password") if settings.password is not None else None
        return cls(settings.url, username, password, settings.timeout, settings.retry_after)

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.url!r})"

    def schema(self, schema_id: int) -> RegistrySchema:
        """The writer schema of an id, from the cache or the registry; Reject / RegistryUnavailable."""
        found = self._cache.get(schema_id)
        if found is not None:
            return found
        with self._lock:
            found = self._cache.get(schema_id)
            if found is not None:
                return found
            now = time.monotonic()
            missing = self._missing.get(schema_id)
            if missing and missing[0] > now:
                raise Reject(missing[1])
            if self._down and self._down[0] > now:
                raise RegistryUnavailable(f"{self._down[1]} (not asked again for {self.retry_after:g} s)")
            try:
                doc = self._get(f"/schemas/ids/{schema_id}", f"schema id {schema_id}")
                refs = self._references(doc, f"schema id {schema_id}", depth=0)
            except RegistryUnavailable as exc:
                self._down = (time.monotonic() + self.retry_after, str(exc))
                raise
            except _NotFound as exc:
                reason = f"schema id {schema_id} is not in the schema registry {self.url} ({exc})"
                self._missing[schema_id] = (time.monotonic() + self.retry_after, reason)
                raise Reject(reason) from None
            self._down = None
            found = RegistrySchema(schema_id, self.url, _schema_json(doc, f"schema id {schema_id}", self.url), refs)
            found.parsed  # noqa: B018 - parse now: a schema fastavro refuses is refused at once, not cached
            self._cache[schema_id] = found
            return found

    def _references(self, doc: dict[str, Any], what: str, depth: int) -> tuple[Any, ...]:
        """The schemas ``doc`` references, each after its own references (dependencies first)."""
        refs = doc.get("references") or []
        if not isinstance(refs, list):
            raise Reject(f"{what} of {self.url}: 'references' should be a list")
        if refs and depth >= MAX_REFERENCE_DEPTH:
            raise Reject(f"{what} of {self.url}: schema references nested deeper than {MAX_REFERENCE_DEPTH}")
        out: list[Any] = []
        for ref in refs:
            if not isinstance(ref, dict) or not isinstance(ref.get("subject"), str) or ref.get("version") is None:
                raise Reject(f"{what} of {self.url}: a reference without subject and version: {ref!r:.100}")
            path = f"/subjects/{urllib.parse.quote(ref['subject'], safe='')}/versions/{ref['version']}"
            label = f"reference {ref['subject']!r} version {ref['version']} of {what}"
            try:
                sub = self._get(path, label)
            except _NotFound as exc:
                raise Reject(f"{label} is not in the schema registry {self.url} ({exc})") from None
            out.extend(self._references(sub, label, depth + 1))
            out.append(_schema_json(sub, label, self.url))
        return tuple(out)

    def _get(self, path: str, what: str) -> dict[str, Any]:
        """GET one registry resource as a JSON object, within ``timeout`` (connect, then the whole body)."""
        url = self.url + path
        request = urllib.request.Request(url, headers=self._headers, method="GET")
        self.requests += 1
        deadline = time.monotonic() + self.timeout
        prefix = f"schema registry {self.url} unavailable fetching {what}"
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body = _read_within(response, deadline)
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            if exc.code == 404:
                raise _NotFound(f"HTTP 404{detail}") from None
            if exc.code in (401, 403):
                raise RegistryUnavailable(
                    f"schema registry {self.url} refused the credentials (HTTP {exc.code}{detail}) fetching {what}"
                ) from None
            if 300 <= exc.code < 400:
                raise RegistryUnavailable(
                    f"{prefix}: HTTP {exc.code} redirect to {exc.headers.get('Location')!r:.120}; "
                    "configure the final URL (requests never follow a redirect)"
                ) from None
            raise RegistryUnavailable(f"{prefix}: HTTP {exc.code}{detail}") from None
        except TimeoutError:
            raise RegistryUnavailable(f"{prefix}: no answer within {self.timeout:g} s") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryUnavailable(f"{prefix}: {type(reason).__name__}: {reason}"[:400]) from None
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise RegistryUnavailable(f"{prefix}: the answer is not JSON: {body[:80]!r}") from None
        if not isinstance(doc, dict):
            raise RegistryUnavailable(f"{prefix}: the answer is not a JSON object: {body[:80]!r}")
        return doc


class _NotFound(Exception):
    """HTTP 404 from the registry (internal: becomes a Reject naming what was missing)."""


def _read_within(response: Any, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError
        chunk = response.read(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ValueError(f"answer larger than {MAX_RESPONSE_BYTES} bytes")
        chunks.append(chunk)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """``, error_code 40403: message`` from a registry's JSON error body, if it has one."""
    try:
        doc = json.loads(exc.read(4096).decode("utf-8"))
    except Exception:  # noqa: BLE001 - the status code alone is the message then
        return ""
    if not isinstance(doc, dict):
        return ""
    code = f", error_code {doc['error_code']}" if doc.get("error_code") is not None else ""
    message = f": {str(doc['message'])[:200]}" if doc.get("message") else ""
    return code + message


def _schema_json(doc: dict[str, Any], what: str, registry: str) -> Any:
    """The parsed schema JSON of a registry answer; only Avro schemas are accepted."""
    kind = doc.get("schemaType") or "AVRO"
    if kind != "AVRO":
        raise Reject(f"{what} of the schema registry {registry} is a {str(kind)[:20]} schema, not Avro")
    text = doc.get("schema")
    if not isinstance(text, str):
        raise Reject(f"{what} of the schema registry {registry}: the answer has no 'schema' text")
    try:
        return json.loads(text)
    except ValueError:
        # a bare primitive name ("string") is valid Avro schema text too
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", text.strip()):
            return text.strip()
        raise Reject(f"{what} of the schema registry {registry}: the schema text is not JSON") from None


# ---------------------------------------------------------------- per-process clients

_REGISTRIES: dict[RegistrySettings, SchemaRegistry] = {}
_REGISTRIES_LOCK = threading.Lock()


#: The last (options, client) looked up: a decode context passes the same options object for every
#: message, so the settings are validated once per context, not once per message.
_LAST_LOOKUP: tuple[object, SchemaRegistry | None] = (object(), None)


def registry_for(options: Mapping[str, Any] | None) -> SchemaRegistry | None:
    """This process's client for a format's ``schema_registry`` option (None when the option is not set)."""
    global _LAST_LOOKUP
    last_options, last_found = _LAST_LOOKUP
    if options is last_options:
        return last_found
    settings = registry_settings(options)
    found = None
    if settings is not None:
        found = _REGISTRIES.get(settings)
        if found is None:
            with _REGISTRIES_LOCK:
                found = _REGISTRIES.get(settings)
                if found is None:
                    found = _REGISTRIES[settings] = SchemaRegistry.from_settings(settings)
    _LAST_LOOKUP = (options, found)
    return found


def read_framed(
    raw: bytes, registry: SchemaRegistry, *, plain: bool = False, record_names: bool = False
) -> tuple[Any, RegistrySchema]:
    """(datum, writer schema) of one Confluent-framed Avro message."""
    schema_id, body = unframe(raw)
    schema = registry.schema(schema_id)
    return schema.read(body, plain=plain, record_names=record_names), schema


class RegistryFramed:
    """Mixin for an Avro decoder: with ``format_options.<id>.schema_registry`` set, each message is
    Confluent-framed and read with the registry's writer schema, then handed to the decoder's
    ``decode_avro_record(record, ctx)``; without it the decoder reads messages as before."""

    #: read unions of records as (record name, value), as the DTS Record decoder expects
    avro_record_names: bool = False

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        registry = registry_for(ctx.options)
        if registry is None:
            return super().decode(raw, ctx)  # type: ignore[misc]
        self.check_size(raw, ctx)  # type: ignore[attr-defined]
        record, schema = read_framed(raw, registry, record_names=self.avro_record_names)
        try:
            return self.decode_avro_record(record, ctx)  # type: ignore[attr-defined]
        except Reject:
            raise
        except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise Reject(
                f"malformed {self.format_id} record (schema id {schema.schema_id}): "  # type: ignore[attr-defined]
                f"{type(exc).__name__}: {exc}"[:300]
            ) from None


__all__ = [
    "OPTION",
    "RegistryFramed",
    "RegistrySchema",
    "RegistrySettings",
    "RegistryUnavailable",
    "SchemaRegistry",
    "frame",
    "is_framed",
    "read_framed",
    "registry_for",
    "registry_settings",
    "unframe",
]
