"""Alibaba Canal flat messages (Canal server's MQ mode, Canal-Adapter, Alibaba DMS), as Paimon and Flink read them.

No seed describes this writer; the sources are Canal's own code (``FlatMessage``,
``LogEventConvert``) and the messages Apache Paimon and Apache Flink test against
(tests/fixtures/real/canal/, their ATTRIBUTION.md). Decisions are recorded in
tests/fixtures/seeds/canal.CORRECTIONS.md. Where it differs from ``oms_canal`` (same JSON shape),
the difference is an attribute of the Canal family (pipelines/formats/_canal_family.py):

* ``binary_text = "latin1"``: BINARY / VARBINARY / BLOB values are ``new String(bytes,
  ISO_8859_1)``, one character per byte (``"v4":"nine.bin"``), not Base64. Decoded to the exact
  bytes; a character above U+00FF is Reject. TEXT columns are text (Canal decodes them with the
  column charset). Geometry columns are kept as that ISO-8859-1 text (lossless, one char per byte).
* ``numeric_enum_bit``: ENUM is its 1-based index (``"1"`` → ``value1``), SET its bit mask
  (``"3"`` → ``a,b``), BIT the number's decimal text (→ its big-endian bytes), from the member
  list / width in ``mysqlType`` (Paimon's alltype resource; Canal ``LogEventConvert``).
* Ordering, ``id_orders = False``: seq = (es,). ``es`` is the binlog event's execute time,
  ``LogHeader.when * 1000``: whole seconds in milliseconds, so every row of a transaction, and
  every transaction of the same second, ties. Ties keep queue order: Canal writes a table's (or a
  key's, with ``partitionHash``) changes to one partition in binlog order, and gold orders equal
  seqs by queue position, then by the row's place in its message (pipelines/gold/order.py).
  ``id`` is not an order: it is the Canal server's batch id, shared by every message of a batch
  (a DDL and the next INSERT carry the same id in Paimon's resources) and restarting with the
  instance (ids 92, 94, then 13, 14 in Paimon's schemaevolution resources while ``es`` goes
  forward). ``ts`` is Canal's own processing time: ignored for order. So delivery across
  partitions is recovered to the second, and within a second by each partition's order.
* A row change without ``es`` is Reject, unless the format option ``ordering: queue`` is set:
  then every message has seq () and queue order alone decides (Paimon's "incomplete" messages
  carry neither ``es`` nor a table; ``default_table`` names the table).
* ``type``: INSERT / UPDATE / DELETE (one change per ``data`` row; UPDATE before = ``data``
  overlaid with ``old``, which holds the changed columns only; DELETE rows in ``data``), INIT
  (Flink's canal-data-with-init resource: full load → SNAPSHOT), TRUNCATE (→ TRUNCATE, with
  ``sql``), CREATE / ALTER / ERASE / RENAME / CINDEX / DINDEX / QUERY (``isDdl``, statement in
  ``sql`` → DDL), MHEARTBEAT / GTID / XA* → HEARTBEAT. ``gtid`` (Canal 1.1.5+) → txn.
* Key: ``pkNames`` (``[]`` = no key: a keyless table, Paimon's nonpk resource), resolved
  case-insensitively against the row's column names (``key_case_insensitive``); else configured.
* Types: ``mysqlType`` (``VARBINARY(10)``, ``DECIMAL(8, 0) unsigned zerofill``), else
  ``sqlType`` (java.sql.Types: 2004 BLOB, -3 VARBINARY, 93 TIMESTAMP ...), else configured.
  TIMESTAMP is wall-clock text in the Canal server's zone (``options['source_time_zone']``, default UTC).
  MySQL's SERIAL reads as BIGINT UNSIGNED and FIXED as DECIMAL (Paimon's alltype resource).
"""

from __future__ import annotations

from typing import Any

from pipelines.formats._canal_family import CanalFamilyDecoder, wall_text_in_zone
from pipelines.formats.base import DecodeContext
from pipelines.values import parse_type

#: MySQL synonyms (Canal writes the column's declared type): SERIAL is BIGINT UNSIGNED NOT NULL
#: AUTO_INCREMENT (values.py reads ``serial`` as PostgreSQL's int4), FIXED is DECIMAL.
MYSQL_SYNONYMS = {"serial": "bigint unsigned", "fixed": "decimal"}


class CanalDecoder(CanalFamilyDecoder):
    format_id = "canal"
    seeds = "none (Canal FlatMessage / LogEventConvert; Paimon and Flink test resources)"
    ordering = (
        "`es` (binlog execute time, whole seconds in ms): (es,); ties keep queue order; `id` is a batch id, "
        "never an order; option `ordering: queue` for streams without `es`"
    )
    table_and_key = (
        "`database` / `table` (else `default_table`); key from `pkNames` (case-insensitive), else configuration"
    )
    type_mapping = "`mysqlType` (else `sqlType` java.sql.Types, else config) → family; values as text"
    quirks = (
        "BINARY/VARBINARY/BLOB as ISO-8859-1 text of the bytes (`nine.bin`), not Base64",
        "ENUM as 1-based index, SET as bit mask, BIT as a decimal number → labels / bytes from `mysqlType`",
        "one change per `data` row; UPDATE before = `data` overlaid with `old` (changed columns only)",
        "INIT → SNAPSHOT; TRUNCATE → TRUNCATE; CREATE/ALTER/ERASE/QUERY... (`isDdl`, `sql`) → DDL; `gtid` → txn",
        "`es` ties (same second) keep queue order; `id` restarts with the Canal instance, so it is ignored",
    )
    id_required = False
    id_orders = False
    binary_text = "latin1"
    numeric_enum_bit = True
    key_case_insensitive = True
    table_from_config = True
    queue_order_option = True
    snapshot_types = frozenset({"INIT"})
    snapshot_name = "INIT"
    txn_field = "gtid"
    delete_hint = " while 'old' has rows: a DTS Canal topic? use format dts_canal"

    def types(self, obj: dict[str, Any], db: str | None, table: str | None, ctx: DecodeContext) -> dict[str, str]:
        """The family's types, with MySQL's SERIAL and FIXED named by what they are (``MYSQL_SYNONYMS``)."""
        out = super().types(obj, db, table, ctx)
        for col, source_type in out.items():
            base = parse_type(source_type)[0]
            if base in MYSQL_SYNONYMS:
                out[col] = MYSQL_SYNONYMS[base] + source_type.strip()[len(base) :]
        return out

    def encode_timestamp(self, instant: str, ctx: DecodeContext) -> str:
        """Canal writes TIMESTAMP as the server zone's wall clock (``2023-03-23 15:00:10.123456``)."""
        return wall_text_in_zone(instant, self.source_zone(ctx))


DECODER = CanalDecoder()
