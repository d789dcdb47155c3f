"""OMS SharePlex-compatible JSON (seeds 000, 001). Everything lives in :mod:`._shareplex_family`.

meta.op is ``ins`` / ``upd`` / ``del`` / ``ddl`` (seed 000; 001 lists the first three).
meta.rowid is ``{db.table}-{key values separated by \\u0001}``.
"""

from __future__ import annotations

from pipelines.formats._shareplex_family import SharePlexFamily


class OmsSharePlexDecoder(SharePlexFamily):
    format_id = "oms_shareplex"
    seeds = "000, 001"
    ordering = (
        "(meta.scn, meta.seq) as integers, scn required on row changes; (scn,) without meta.seq "
        "(written only with transactionEnabled); none when scn is 'null' (DDL)"
    )
    quirks = (
        "UPDATE data holds only the changed columns (partial after); key holds the before-image (seed 000, 001)",
        "scn 'null' (text) on DDL → no ordering (seed 000)",
        "meta.rowid '{db.table}-{key values}' → synthetic key __rowid when no key is configured (seed 000, 001)",
        "DDL statement in sql.ddl (seed 000)",
    )


DECODER = OmsSharePlexDecoder()
