"""The exact JSON reader and writer every text format uses: numbers kept as their source text
(:class:`Num`), duplicate keys refused, depth and width bounded before parsing.

Parsing is msgspec's C parser (``float_hook`` hands each non-integer number's text to :class:`Num`;
integers come back as exact Python ints, whatever their size, and become :class:`Num` of their
digits in one walk of the tree). msgspec keeps the last of two equal keys without a word, so the walk
counts keys and strings and compares them with the text (:func:`_has_duplicates`); whatever the fast
path cannot vouch for (a suspected duplicate, an integer ``-0``, a lone surrogate escape, an integer
msgspec cannot hold, any parse error) is read again by the standard library's parser with the hooks
this module always had, so the result and every refusal's reason are exactly as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from pipelines.errors import Reject

#: Default limit on JSON nesting; a CDC message needs a handful of levels.
DEFAULT_MAX_DEPTH = 64
#: Default limit on the elements of one JSON array or object: far above any row (MySQL allows
#: 4096 columns) or Canal ``data`` array (thousands of rows), far below a width bomb.
DEFAULT_MAX_WIDTH = 100_000
#: Default limit on all elements of one message, every level counted (``limits.max_elements``):
#: thousands of rows of hundreds of columns pass (5,000 × 150 decode in about 2.5 s, the cost of
#: the data itself); a message of a million tiny values is refused before it is parsed.
DEFAULT_MAX_ELEMENTS = 1_000_000


class Num(str):
    """A JSON number kept as its exact source text (never a float).

    ``9.999999999999999093266253`` and ``10223372036854775806`` keep every digit, ``1.10`` its zero,
    ``1e400`` its text. ``isinstance(v, Num)`` tells a JSON number from a JSON string.
    """

    __slots__ = ()


_FAST = msgspec.json.Decoder(float_hook=Num)
#: The :class:`Num` of small integers seen already (a Num is immutable text: one object serves them all).
_SMALL_NUMS: dict[int, Num] = {0: Num(0)}
#: An integer ``-0`` (an int 0 cannot say it had a sign): after a separator, not followed by a fraction.
_MINUS_ZERO_RE = re.compile(r"[:,\[]\s*-0(?![0-9.eE])")


def loads_exact(
    raw: bytes | str,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_width: int = DEFAULT_MAX_WIDTH,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> Any:
    """Parse JSON keeping every number as its exact text (:class:`Num`).

    Rejects invalid UTF-8, non-JSON, NaN/Infinity, an object with a duplicated key (which value
    counts is ambiguous: ``"type":"DELETE",...,"type":"INSERT"``), nesting deeper than
    ``max_depth``, and more than ``max_width`` elements in one array / object or ``max_elements``
    in all (:func:`check_shape`, before parsing, so a bomb costs one linear scan).
    """
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Reject(f"invalid UTF-8 at byte {exc.start}") from None
    else:
        text = raw
    check_shape(text, max_depth, max_width, max_elements)
    try:
        value = _FAST.decode(text)
        counts = [0, 0, False]  # keys, string values, an int 0 seen
        if type(value) is dict or type(value) is list:
            _walk(value, counts)
    except Exception:  # noqa: BLE001 - anything the fast path cannot read, the reference reads (or refuses)
        return _loads_slow(text, max_depth)
    if type(value) is dict or type(value) is list:
        if counts[2] and _MINUS_ZERO_RE.search(text) or _has_duplicates(text, counts[0], counts[1]):
            return _loads_slow(text, max_depth)
        return value
    if type(value) is int:
        return _loads_slow(text, max_depth) if value == 0 else Num(value)
    return value


def _walk(node: dict | list, counts: list) -> None:
    """Integers → :class:`Num` in place; counts keys, string values and whether an int 0 was seen."""
    if type(node) is dict:
        counts[0] += len(node)
        items = node.items()
    else:
        items = enumerate(node)
    for key, value in items:
        kind = type(value)
        if kind is str:
            counts[1] += 1
        elif kind is int:
            num = _SMALL_NUMS.get(value)
            if num is None:
                num = Num(value)
                if len(_SMALL_NUMS) < 4096 and -(2**31) <= value < 2**31:  # type codes, flags, small ids repeat
                    _SMALL_NUMS[value] = num
            elif not value:  # 0 is always cached
                counts[2] = True
            node[key] = num
        elif kind is dict or kind is list:
            _walk(value, counts)


def _has_duplicates(text: str, keys: int, strings: int) -> bool:
    """Whether the text holds more object keys than the parsed tree (msgspec kept one of two equal keys).

    Without a backslash every ``"`` of the text opens or closes a string, so the text has
    ``count('"') / 2`` strings: the tree's keys and string values, unless a key was dropped. With
    one, strings are blanked and the structural colons (one per key) counted."""
    if "\\" not in text:
        return text.count('"') != 2 * (keys + strings)
    return _STRING_RE.sub("", text).count(":") != keys


def _loads_slow(text: str, max_depth: int) -> Any:
    """The standard library's parser with exact hooks: the reference reading, and every refusal's reason."""
    try:
        return json.loads(
            text, parse_int=Num, parse_float=Num, parse_constant=_no_constant, object_pairs_hook=_unique_keys
        )
    except RecursionError:
        raise Reject(f"JSON nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise Reject(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _no_constant(name: str) -> Any:
    raise Reject(f"not valid JSON: {name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise Reject(f"duplicate key {key[:60]!r} in a JSON object: which value counts is ambiguous")
            seen.add(key)
    return obj


#: A JSON string (also the strings of MongoDB shell text); unrolled, so matching is linear.
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_STRUCTURE_RE = re.compile(r"[^\[\]{},]+")


def check_shape(
    text: str, max_depth: int, max_width: int = DEFAULT_MAX_WIDTH, max_elements: int = DEFAULT_MAX_ELEMENTS
) -> None:
    """Reject JSON-like text nested deeper than ``max_depth`` or wider than the element limits.

    Strings are blanked first (brackets and commas inside them do not count); an array or object
    holds its commas + 1 elements, so the total is commas + containers. Linear in the text, with a
    Python loop only over the brackets and commas, and only when the plain counts exceed a limit.
    Malformed text may be counted loosely: the parser that follows rejects it anyway.
    """
    if "[" not in text and "{" not in text:
        return
    # blanking strings only removes brackets and commas: within the limits counted raw, within them blanked
    opened, commas = text.count("[") + text.count("{"), text.count(",")
    if opened <= max_depth and commas + 1 <= max_width and commas + opened <= max_elements:
        return
    bare = _STRING_RE.sub("0", text) if '"' in text else text
    opened = bare.count("[") + bare.count("{")
    commas = bare.count(",")
    if commas + opened > max_elements:
        raise Reject(f"JSON has more than {max_elements} elements in all (limits.max_elements)")
    if opened <= max_depth and commas + 1 <= max_width:
        return
    widths = [0]
    for ch in _NOT_STRUCTURE_RE.sub("", bare):
        if ch == ",":
            widths[-1] += 1
            if widths[-1] >= max_width:
                raise Reject(f"a JSON array or object has more than {max_width} elements (limits.max_width)")
        elif ch in "[{":
            widths.append(0)
            if len(widths) > max_depth + 1:
                raise Reject(f"JSON nested deeper than {max_depth} levels")
        elif len(widths) > 1:
            widths.pop()


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in words (for a reason a person reads)."""
    if isinstance(value, list):
        return "a JSON array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Num):
        return "a number"
    return "a string" if isinstance(value, str) else type(value).__name__


def dumps_exact(value: Any) -> str:
    """JSON text with :class:`Num` written as a bare number (the inverse of :func:`loads_exact`).

    Used by encoders and to keep nested values (JSON columns, Mongo documents) as exact text.
    """
    if isinstance(value, Num):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, dict):
        return (
            "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{dumps_exact(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps_exact(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
