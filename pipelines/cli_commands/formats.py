"""The format commands: ``decode`` (messages → canonical changes as JSON lines) and ``formats`` (the
table of supported formats)."""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.cli_commands.shared import context_config
from pipelines.formats import ALL_FORMAT_IDS


def cmd_decode(args: argparse.Namespace) -> int:
    """Decode each line to JSON lines of changes; a line that cannot be decoded (whatever the reason)
    prints one quarantine line, and decoding goes on with the next line."""
    from pipelines.formats import Reject, get_decoder
    from pipelines.silver import decode_message, quarantine_reason

    def _quarantine_line(number: int, reason: str, ascii_only: bool = False) -> str:
        line = {"quarantine": {"line": number, "reason": quarantine_reason(reason)}}
        return json.dumps(line, ensure_ascii=ascii_only) + "\n"

    cfg = context_config(args, args.format)
    ctx = cfg.decode_context(args.format)
    decoder = get_decoder(args.format)
    stream = open(args.input, "rb") if args.input else sys.stdin.buffer
    out = sys.stdout
    with stream:
        for number, raw in enumerate(stream, start=1):
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            if decoder.binary:
                import base64
                import binascii

                try:
                    raw = base64.b64decode(raw.strip(), validate=True)
                except binascii.Error:
                    pass
            try:
                text = "".join(
                    json.dumps(change.to_json_dict(), ensure_ascii=False) + "\n"
                    for change in decode_message(decoder, raw, ctx)
                )
            except Exception as exc:  # noqa: BLE001 - Reject, or anything else: this line only
                text = _quarantine_line(number, str(exc) if isinstance(exc, Reject) else f"{type(exc).__name__}: {exc}")
            try:
                out.write(text)
            except UnicodeEncodeError as exc:  # stdout's encoding cannot print it: say so, go on
                out.write(_quarantine_line(number, f"cannot print the change here: {exc.reason}", ascii_only=True))
    return 0


def format_rows() -> list[tuple[str, str, str, str, str, tuple[str, ...]]]:
    """(id, seeds, ordering, table and key, types, quirks) of every format, as its decoder states them."""
    from pipelines.formats import get_decoder

    rows = []
    for fid in ALL_FORMAT_IDS:
        try:
            d = get_decoder(fid)
        except (ImportError, AttributeError) as exc:
            rows.append((fid, "-", f"not available: {exc}", "", "", ()))
            continue
        rows.append((fid, d.seeds, d.ordering, d.table_and_key, d.type_mapping, tuple(d.quirks)))
    return rows


def formats_markdown() -> str:
    """Every format as Markdown (docs/formats.md): a table of ids and seeds linking to one section per
    format, its ordering, table and key, types, and the quirks it handles as a list."""

    def text(value: str) -> str:  # a decoder's words as Markdown: `table-*` outside code is no emphasis
        parts = value.replace("\n", " ").split("`")
        return "`".join(part if i % 2 else part.replace("*", "\\*") for i, part in enumerate(parts))

    def cell(value: str) -> str:
        return text(value).replace("|", "\\|")

    rows = format_rows()
    lines = ["| format | seeds |", "| --- | --- |"]
    lines += [f"| [`{fid}`](#{fid}) | {cell(seeds)} |" for fid, seeds, *_ in rows]
    for fid, seeds, ordering, table_and_key, types, quirks in rows:
        lines += ["", f"### `{fid}`", "", f"* **Seeds:** {text(seeds)}", f"* **Ordering:** {text(ordering)}"]
        lines += [f"* **Table and key:** {text(table_and_key)}", f"* **Types:** {text(types)}"]
        if quirks:
            lines += ["* **Quirks handled:**", *(f"  * {text(quirk)}" for quirk in quirks)]
    return "\n".join(lines) + "\n"


def cmd_formats(args: argparse.Namespace) -> int:
    if args.markdown:
        sys.stdout.write(formats_markdown())
        return 0
    for fid, seeds, ordering, *_ in format_rows():
        print(f"{fid:22} seeds {seeds:8} ordering: {ordering}")
    return 0
