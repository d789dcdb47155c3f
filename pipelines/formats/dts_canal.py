"""DTS Canal Json (seed 004 "Canal Json").

Quirks:
* DELETE: instances created before 2022-03-20 put the row in ``old`` with ``data`` null; later
  ones put it in ``data`` with ``old`` null. Decided per message: ``data`` if it has rows,
  else ``old`` (seed 004). The encoder writes the current form (``data``).
* ``id`` (from the timestamp and a DTS offset) orders records: seq = (id,). ``gtid`` → txn.
* ``type`` INIT = full load → SNAPSHOT; DDL messages have ``type`` DDL and the statement in ``sql``.
"""

from __future__ import annotations

from pipelines.formats._canal_family import CanalFamilyDecoder


class DtsCanalDecoder(CanalFamilyDecoder):
    format_id = "dts_canal"
    seeds = "004"
    ordering = "`id` (DTS timestamp + offset serial number)"
    table_and_key = "`database` / `table`; key from `pkNames`, else configuration"
    type_mapping = "`mysqlType` (else `sqlType`, else config) → family; values as text"
    quirks = (
        "DELETE row in `old` (instances before 2022-03-20) or in `data` (later), per message (seed 004)",
        "`type` INIT (full load) → SNAPSHOT; `type` DDL with `sql` (seed 004)",
        "`gtid` → txn (seed 004)",
    )
    snapshot_types = frozenset({"INIT"})
    delete_row_in = "either"
    txn_field = "gtid"
    snapshot_name = "INIT"


DECODER = DtsCanalDecoder()
