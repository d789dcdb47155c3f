"""OMS Canal (seed 000 and 001 "Canal" sections): Canal JSON as OceanBase OMS writes it.

Quirks (decisions recorded in tests/fixtures/seeds/oms_canal.CORRECTIONS.md):
* No ``id`` in the OMS field table (seeds 000/001): seq = (es,) — source time in ms; ties keep
  queue order. A producer that does write ``id`` too (open-source Canal, the Flink corpus) gets
  (es, id): every message is ordered on the one scale ``es``, so a message without ``id`` never
  sorts by a different scale than one with it. A row change without ``es`` has no ordering and is
  rejected.
* ``bigint`` values above 2^63-1 (seed col13 = 10223372036854775806) are BIGINT UNSIGNED with
  the UNSIGNED dropped: kept exactly, col_types records ``bigint unsigned``.
* Numbers as JSON numbers or text; DECIMAL/DOUBLE keep every digit; BLOB Base64; TIMESTAMP
  ``sec.fraction``; DATETIME ``YYYY-MM-DD HH:mm:ss[.n] [zoneId]`` keeps the wall clock.
* DDL: ``isDdl`` true, ``type`` ALTER/CREATE/..., statement in ``sql``.
* No full-load op: OMS full migration arrives as INSERT (a SNAPSHOT is encoded as INSERT).
"""

from __future__ import annotations

from pipelines.formats._canal_family import CanalFamilyDecoder


class OmsCanalDecoder(CanalFamilyDecoder):
    format_id = "oms_canal"
    seeds = "000, 001"
    ordering = "`es` (ms), then `id` when present: (es[, id]); required on row changes; ties keep queue order"
    table_and_key = "`database` / `table`; key from `pkNames`, else configuration"
    type_mapping = "`mysqlType` (else `sqlType` java.sql.Types, else config) → family; text or JSON numbers"
    quirks = (
        "one change per `data` row; UPDATE before = `data` overlaid with `old` (seed 000, 001)",
        "`bigint` above 2^63-1 kept as BIGINT UNSIGNED (seed 000, 001)",
        "30+ digit DECIMAL/DOUBLE kept exactly; BLOB Base64; TIMESTAMP sec.fraction (seed 000, 001)",
        "DATETIME `[zoneId]` suffix dropped, wall clock kept (seed 000)",
        "pkNames not in the row → Reject (seed 000 DELETE example)",
        "DDL: isDdl + type ALTER/CREATE/..., statement in `sql` (seed 000)",
    )
    id_required = False


DECODER = OmsCanalDecoder()
