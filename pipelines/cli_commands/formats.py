"""The format commands: ``decode`` (messages → canonical changes as JSON lines) and ``formats`` (the
table of supported formats)."""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.cli_commands.shared import _context_config
from pipelines.formats import ALL_FORMAT_IDS


def cmd_decode(args: argparse.Namespace) -> int:
    """Decode each line to JSON lines of changes; a line that cannot be decoded (whatever the reason)
    prints one quarantine line, and decoding goes on with the next line."""
    from pipelines.formats import Reject, get_decoder
    from pipelines.silver import decode_message, quarantine_reason

    def _quarantine_line(number: int, reason: str, ascii_only: bool = False) -> str:
        line = {"quarantine": {"line": number, "reason": quarantine_reason(reason)}}
        return json.dumps(line, ensure_ascii=ascii_only) + "\n"

    cfg = _context_config(args, args.format)
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


def cmd_formats(args: argparse.Namespace) -> int:
    from pipelines.formats import get_decoder

    rows = []
    for fid in ALL_FORMAT_IDS:
        try:
            d = get_decoder(fid)
        except (ImportError, AttributeError) as exc:
            rows.append((fid, "-", f"not available: {exc}", "", "", ""))
            continue
        rows.append((fid, d.seeds, d.ordering, d.table_and_key, d.type_mapping, "; ".join(d.quirks)))
    if args.markdown:
        print("| id | seeds | ordering | table and key | types | quirks handled |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in r) + " |")
    else:
        for r in rows:
            print(f"{r[0]:22} seeds {r[1]:8} ordering: {r[2]}")
    return 0
