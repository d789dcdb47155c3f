"""Bytes: canonical standard Base64, from Base64, hexadecimal, a list of byte values or raw bytes."""

from __future__ import annotations

import base64
import binascii

from pipelines.errors import Reject

#: Widest bit value a message may state: MySQL's BIT(M) holds M <= 64, and Debezium's Bits (its
#: ``parameters.length``) is held to the same, so a width never pads a value beyond 8 bytes.
MAX_BITS = 64


def bit_width(value: object, what: str) -> int:
    """A width in bits stated by a message (``bit(12)``, Bits ``length``): ASCII digits, 1 to
    :data:`MAX_BITS`, else Reject (``length: "800000000"`` made a 133 MB value of a few bytes)."""
    text = str(value).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 3 and 0 < int(text) <= MAX_BITS):
        raise Reject(f"{what} {text[:40]!a} is not a width of 1 to {MAX_BITS} bits")
    return int(text)


def base64_from_bit_number(n: int, bits: int | None = None) -> str:
    """A BIT value written as its number (Canal, DTS Avro's Integer) → Base64 of its big-endian bytes:
    ``ceil(bits / 8)`` of them, or as few as hold it when the width is not stated."""
    limit = bits or MAX_BITS
    if n < 0 or n >> limit:
        raise Reject(f"out of range for BIT({limit}): {str(n)[:40]}")
    width = max(1, ((bits or n.bit_length()) + 7) // 8)
    return base64.b64encode(n.to_bytes(width, "big")).decode("ascii")


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
