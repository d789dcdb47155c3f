"""Bytes: canonical standard Base64, from Base64, hexadecimal, a list of byte values or raw bytes."""

from __future__ import annotations

import base64
import binascii

from pipelines.errors import Reject


def canon_base64(text: str) -> str:
    """Validate Base64 and return it in the standard padded alphabet."""
    try:
        return base64.b64encode(base64.b64decode(text, validate=True)).decode("ascii")
    except (binascii.Error, ValueError):
        raise Reject(f"not valid Base64: {text[:60]!r}") from None


def base64_from_hex(text: str) -> str:
    """Base16 (Debezium BYTES, PostgreSQL ``\\x...`` bytea) → Base64."""
    hex_text = text[2:] if text[:2] in ("\\x", "0x", "0X") else text
    try:
        return base64.b64encode(bytes.fromhex(hex_text)).decode("ascii")
    except ValueError:
        raise Reject(f"not valid hexadecimal bytes: {text[:60]!r}") from None


def base64_from_byte_list(values: object) -> str:
    """DRS writes binary as a list of byte values, e.g. ``[106, 103]`` (signed or unsigned)."""
    if not isinstance(values, list):
        raise Reject(f"expected a list of byte values, got {values!r:.60}")
    out = bytearray()
    for v in values:
        try:
            n = int(str(v))
        except ValueError:
            raise Reject(f"not a byte value: {v!r:.20}") from None
        if not -128 <= n <= 255:
            raise Reject(f"byte value out of range: {n}")
        out.append(n & 0xFF)
    return base64.b64encode(bytes(out)).decode("ascii")


def base64_from_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
