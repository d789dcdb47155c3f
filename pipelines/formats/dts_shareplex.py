"""DTS Shareplex Json (seed 004). Everything lives in :mod:`._shareplex_family`.

Seed 004's table lists op values INSERT, UPDATE, DELETE, TRUNCATE, DROP COLUMN, UPDATE BEFORE,
UPDATE AFTER while its examples write ``ins`` / ``upd`` / ``del``: both spellings are accepted
(case-insensitive). Decisions: TRUNCATE → TRUNCATE; DROP COLUMN → DDL (statement from sql.ddl
when present, else none); UPDATE AFTER → UPDATE (partial after, ``key`` as before-image);
UPDATE BEFORE alone changes no row (its UPDATE AFTER carries the change) → HEARTBEAT with
detail "UPDATE BEFORE". meta.time is UTC (seed 004). meta.rowid is the Oracle ROWID; values of
DATE columns may carry a time of day (Oracle).
"""

from __future__ import annotations

from pipelines.formats._shareplex_family import SharePlexFamily


class DtsSharePlexDecoder(SharePlexFamily):
    format_id = "dts_shareplex"
    seeds = "004"
    ordering = "(meta.scn, meta.seq) as integers, both required on row changes; none when scn is 'null' (DDL)"
    op_map = {
        "ins": "INSERT",
        "upd": "UPDATE",
        "del": "DELETE",
        "ddl": "DDL",
        "insert": "INSERT",
        "update": "UPDATE",
        "delete": "DELETE",
        "truncate": "TRUNCATE",
        "drop column": "DDL",
        "update after": "UPDATE",
        "update before": "HEARTBEAT",
    }
    oracle = True
    seq_required = True  # seed 004: "the ordinal number of the operation within the transaction", from 1
    quirks = (
        "op written as ins/upd/del in the examples but INSERT/UPDATE/DELETE/... in the table: both accepted (seed 004)",
        "UPDATE data holds only the changed columns; key holds the before-image (seed 004)",
        "UPDATE BEFORE → HEARTBEAT (changes no row alone), UPDATE AFTER → UPDATE, DROP COLUMN → DDL (seed 004)",
        "meta.rowid (Oracle ROWID) → synthetic key __rowid when no key is configured (seed 004)",
    )


DECODER = DtsSharePlexDecoder()
