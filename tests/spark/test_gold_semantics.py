"""Gold semantics on real Delta tables, batch by batch: tables without a key (multiset), schema
changes under each ``schema_changes`` policy, and the one-job profile of a many-table batch.

Changes are written as Canal messages (it states each column's MySQL type and its key), decoded
by the real decoder and applied with :func:`pipelines.gold.stage.apply_gold_batch`, one call per
micro-batch, as the stream would.
"""

from __future__ import annotations

import pytest

from pipelines.config import parse_config
from pipelines.export import export_warehouse
from pipelines.formats import get_decoder
from pipelines.formats.base import Change
from pipelines.gold.order import with_order
from pipelines.gold.profile import SOURCE_TABLE, profile_batch
from pipelines.gold.schema import SchemaChangeError
from pipelines.gold.stage import apply_gold_batch, source_table_col
from pipelines.silver import decode_frame, ensure_silver
from pipelines.testing.model import MirrorModel
from pipelines.warehouse import Warehouse

FMT = "oms_canal"
TYPES = {"id": "bigint", "a": "int", "b": "varchar(16)", "d": "decimal(10,2)"}


def change(op: str, n: int, before=None, after=None, types=None, key=("id",), table="t") -> Change:
    """A change of shop.<table> at sequence n: OMS Canal orders by ``es``, the source time in ms, so
    the change happens n ms after a fixed instant."""
    types = dict(TYPES if types is None else types)
    cols = set(before or {}) | set(after or {})
    return Change(
        op=op,
        db="shop",
        table=table,
        key_columns=key,
        before=before,
        after=after,
        col_types={c: t for c, t in types.items() if c in cols},
        seq=(1_700_000_000_000 + n,),
        event_time=f"2023-11-14T22:13:20.{n:03d}Z",
    )


class Gold:
    """A warehouse and its silver tables; ``apply`` runs one gold micro-batch of changes."""

    def __init__(self, spark, tmp_path, quality_checks: bool = False, fmt: str = FMT, **table_options):
        self.fmt = fmt
        doc = {
            "warehouse": str(tmp_path / "wh"),
            "quality_checks": quality_checks,
            "sources": [{"name": "s", "format": fmt, "path": str(tmp_path / "none")}],
        }
        if table_options:
            doc["tables"] = {"shop.t": table_options}
        self.spark, self.cfg = spark, parse_config(doc)
        self.wh = Warehouse.from_config(self.cfg)
        ensure_silver(spark, self.wh)
        self.batches = 0

    def frame(self, changes: list[Change]):
        ctx = self.cfg.decode_context(self.fmt)
        return self.frame_of_messages([get_decoder(self.fmt).encode(ch, ctx) for ch in changes])

    def frame_of_messages(self, messages: list[bytes]):
        rows = [
            ("s", self.fmt, raw, f"file:/x#{self.batches}.{i}", f"{self.batches:06d}{i:06d}", None)
            for i, raw in enumerate(messages)
        ]
        bronze = self.spark.createDataFrame(
            rows, "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
        )
        return decode_frame(bronze, self.cfg).where("kind = 'change'").drop("kind")

    def apply(self, changes: list[Change]):
        return self.apply_frame(self.frame(changes))

    def apply_messages(self, messages: list[bytes]):
        """One gold micro-batch of what silver decodes from these messages (its format's own)."""
        return self.apply_frame(self.frame_of_messages(messages))

    def apply_frame(self, frame):
        stats = apply_gold_batch(self.spark, frame, self.batches, self.cfg, self.wh, "app-test")
        self.batches += 1
        return stats

    def rows(self, table: str = "shop.t") -> list[dict]:
        return export_warehouse(self.spark, self.wh).get(table, [])

    def mirror(self, table: str = "shop.t"):
        return self.wh.mirror(table).read(self.spark)

    def quarantine(self):
        return self.wh.silver("quarantine").read(self.spark).where("stage = 'gold'").collect()


def _multiset(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted(r.items())) for r in rows)


# ---------------------------------------------------------------- keyless tables


def test_a_table_without_a_key_is_a_multiset(spark, tmp_path):
    types = {"a": "int", "b": "varchar(16)"}
    x, y, z = {"a": "1", "b": "x"}, {"a": "2", "b": "y"}, {"a": "3", "b": "z"}
    first = [
        change("INSERT", 1, after=x, types=types, key=()),
        change("INSERT", 2, after=x, types=types, key=()),
        change("INSERT", 3, after=y, types=types, key=()),
    ]
    second = [
        change("DELETE", 4, before=x, types=types, key=()),
        change("UPDATE", 5, before=y, after=z, types=types, key=()),
        first[2],
    ]  # a redelivered copy of an insert the first batch applied
    gold = Gold(spark, tmp_path)
    assert gold.apply(first).applied == 3
    stats = gold.apply(second + [second[0]])  # ... and a copy of this batch's delete
    assert (stats.applied, stats.stale) == (2, 2)
    expected = MirrorModel().add_all(first + second[:2]).rows("shop.t")
    assert (
        _multiset(gold.rows())
        == _multiset([{"a": 1, "b": "x"}, {"a": 3, "b": "z"}])
        == _multiset([{"a": int(r["a"]), "b": r["b"]} for r in expected])
    )
    row_ids = [r["_row_id"] for r in gold.mirror().collect()]
    assert len(set(row_ids)) == 2 and all(row_ids), "every row has its own id: the change that inserted it"

    gold.apply(second)  # the whole second batch delivered again later
    assert _multiset(gold.rows()) == _multiset([{"a": 1, "b": "x"}, {"a": 3, "b": "z"}])
    assert "_row_id" not in gold.rows()[0], "the row id is a system column, not exported"


def test_keyless_delete_takes_only_a_copy_that_exists_at_its_sequence(spark, tmp_path):
    types = {"a": "int", "b": "varchar(16)"}
    x = {"a": "1", "b": "x"}
    gold = Gold(spark, tmp_path)
    # one batch, arriving out of order: the second insert (seq 3) comes after the delete (seq 2)
    gold.apply(
        [
            change("INSERT", 3, after=x, types=types, key=()),
            change("DELETE", 2, before=x, types=types, key=()),
            change("INSERT", 1, after=x, types=types, key=()),
        ]
    )
    assert gold.rows() == [{"a": 1, "b": "x"}]


# ---------------------------------------------------------------- schema changes


def _row(n: int, **values) -> dict:
    return {"id": str(n), **values}


def test_delta_allowed_widening_evolves_the_mirror(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", 1, after=_row(1, a="7", d="12345678.91"))])
    wide = {"id": "bigint", "a": "bigint", "d": "decimal(20,4)"}
    gold.apply([change("INSERT", 2, after=_row(2, a="5000000000", d="1234567890123456.1234"), types=wide)])
    types = {f.name: f.dataType.simpleString() for f in gold.mirror().schema.fields}
    assert (types["a"], types["d"]) == ("bigint", "decimal(20,4)")
    assert gold.rows() == [
        {"id": 1, "a": 7, "d": "12345678.9100"},
        {"id": 2, "a": 5000000000, "d": "1234567890123456.1234"},
    ]
    assert gold.quarantine() == []


def _drop_b(gold: Gold) -> None:
    gold.apply(
        [change("INSERT", 1, after=_row(1, a="1", b="kept")), change("INSERT", 2, after=_row(2, a="2", b="two"))]
    )


def test_a_dropped_column_stops_the_stream_by_default(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    _drop_b(gold)
    with pytest.raises(SchemaChangeError, match=r"column 'b' dropped.*tables\.shop\.t\.schema_changes"):
        gold.apply([change("UPDATE", 3, before=_row(2, a="2"), after=_row(2, a="20"))])
    assert gold.rows() == [{"id": 1, "a": 1, "b": "kept"}, {"id": 2, "a": 2, "b": "two"}], "nothing applied"


def test_a_dropped_column_under_quarantine(spark, tmp_path):
    gold = Gold(spark, tmp_path, schema_changes="quarantine")
    _drop_b(gold)
    stats = gold.apply(
        [
            change("UPDATE", 3, before=_row(2, a="2"), after=_row(2, a="20")),
            change("INSERT", 4, after=_row(4, a="4", b="carried")),
        ]
    )
    assert (stats.applied, stats.quarantined) == (1, 1)
    [bad] = gold.quarantine()
    assert "schema change: column 'b' dropped" in bad["reason"] and bad["bronze_position"].startswith("file:")
    assert gold.rows()[1] == {"id": 2, "a": 2, "b": "two"}, "not set to NULL"


def test_a_dropped_column_under_evolve_leaves_the_mirror_and_stays_gone(spark, tmp_path):
    gold = Gold(spark, tmp_path, schema_changes="evolve")
    _drop_b(gold)
    gold.apply([change("UPDATE", 5, before=_row(2, a="2"), after=_row(2, a="20"))])
    assert gold.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 20}]
    # a late change from before the drop still carries b: it applies, and b stays dropped
    gold.apply([change("UPDATE", 3, before=_row(1, a="1", b="kept"), after=_row(1, a="10", b="late"))])
    assert gold.rows() == [{"id": 1, "a": 10}, {"id": 2, "a": 20}]


def test_a_dropped_column_under_ignore_keeps_its_values(spark, tmp_path):
    gold = Gold(spark, tmp_path, schema_changes="ignore")
    _drop_b(gold)
    gold.apply(
        [change("UPDATE", 3, before=_row(1, a="1"), after=_row(1, a="10")), change("INSERT", 4, after=_row(4, a="4"))]
    )
    assert gold.rows() == [{"id": 1, "a": 10, "b": "kept"}, {"id": 2, "a": 2, "b": "two"}, {"id": 4, "a": 4, "b": None}]


def test_a_renamed_column_under_evolve_keeps_its_values(spark, tmp_path):
    gold = Gold(spark, tmp_path, schema_changes="evolve")
    _drop_b(gold)
    types = {"id": "bigint", "a": "int", "c": "varchar(16)"}
    gold.apply([change("UPDATE", 5, before=_row(2, a="2", c="two"), after=_row(2, a="20", c="two"), types=types)])
    assert gold.rows() == [{"id": 1, "a": 1, "c": "kept"}, {"id": 2, "a": 20, "c": "two"}]
    # an older image still names it b: read as c
    gold.apply([change("UPDATE", 3, before=_row(1, a="1", b="kept"), after=_row(1, a="1", b="renamed late"))])
    assert gold.rows()[0] == {"id": 1, "a": 1, "c": "renamed late"}


def test_an_unrelated_type_under_evolve_becomes_text_and_narrowing_keeps_the_wider_type(spark, tmp_path):
    types = {"id": "bigint", "a": "datetime", "d": "decimal(12,2)"}  # every INT fits DECIMAL(12,2)
    gold = Gold(spark, tmp_path, schema_changes="evolve")
    gold.apply([change("INSERT", 1, after=_row(1, a="2023-11-14T22:13:20.5", d="1.50"), types=types)])
    gold.apply([change("INSERT", 2, after=_row(2, a="42", d="7"), types={"id": "bigint", "a": "int", "d": "int"})])
    fields = {f.name: f.dataType.simpleString() for f in gold.mirror().schema.fields}
    assert (fields["a"], fields["d"]) == ("string", "decimal(12,2)")
    assert gold.rows() == [{"id": 1, "a": "2023-11-14T22:13:20.5", "d": "1.50"}, {"id": 2, "a": "42", "d": "7.00"}]


def test_narrowing_stops_the_stream_by_default(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", 1, after=_row(1, a="5"), types={"id": "bigint", "a": "bigint"})])
    with pytest.raises(SchemaChangeError, match=r"column 'a' narrowed from bigint to int"):
        gold.apply([change("INSERT", 2, after=_row(2, a="7"))])


# ---------------------------------------------------------------- fan-out


def _jobs(spark, fn, group: str) -> int:
    """The number of Spark jobs ``fn`` runs (the status tracker keeps finished jobs per group)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, "count the jobs of one call")
    try:
        fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_the_batch_profile_costs_the_same_jobs_for_one_table_or_many(spark, tmp_path):
    gold = Gold(spark, tmp_path)

    def batch(tables: int):
        changes = [change("INSERT", i, after=_row(i, a=str(i)), table=f"t{i % tables}") for i in range(12)]
        return with_order(gold.frame(changes).withColumn(SOURCE_TABLE, source_table_col())).cache()

    one, six = batch(1), batch(6)
    one.count(), six.count()
    profiles = {}
    jobs_one = _jobs(spark, lambda: profiles.update(one=profile_batch(one)), f"profile-one-{tmp_path.name}")
    jobs_six = _jobs(spark, lambda: profiles.update(six=profile_batch(six)), f"profile-six-{tmp_path.name}")
    assert sorted(p.source.name for p in profiles["six"].values()) == [f"shop.t{i}" for i in range(6)]
    assert all(p.key == ("id",) and set(p.columns) == {"id", "a"} for p in profiles["six"].values())
    assert sum(p.changes for p in profiles["six"].values()) == 12
    assert jobs_one == jobs_six, (jobs_one, jobs_six)


def test_the_batch_profile_read_off_its_kinds_of_change_is_the_one_read_off_every_change(spark, tmp_path):
    """The profile groups a batch's changes by kind (a table, the columns carried, their stated types) before it
    reads the columns' facts: each column's types, sequence range and newest type must be what reading every
    change gives, with kinds that differ in columns (a narrower INSERT, a DELETE's before-image) and in a stated
    type (``b`` widened mid-batch, then stated narrower again by an older change of another table)."""
    gold = Gold(spark, tmp_path)
    wide = {**TYPES, "b": "varchar(32)"}
    changes = [
        change("INSERT", 5, after=_row(1, a="1", b="x"), table="t"),
        change("INSERT", 3, after=_row(2, a="2"), table="t"),
        change("UPDATE", 9, before=_row(1, a="1", b="x"), after=_row(1, a="7", b="wider"), types=wide, table="t"),
        change("DELETE", 7, before=_row(2, a="2"), table="t"),
        change("INSERT", 1, after=_row(3, d="1.10"), table="u"),
        change("INSERT", 8, after=_row(4, d="2.20", b="y"), table="u"),
        change("INSERT", 2, after=_row(5, b="z"), types=wide, table="u"),
    ]
    batch = with_order(gold.frame(changes).withColumn(SOURCE_TABLE, source_table_col())).cache()
    profiles = profile_batch(batch)
    expected: dict[str, dict[str, tuple]] = {}
    for r in batch.collect():  # every change, in Python: the columns it carries and the types it states
        columns = expected.setdefault(r[SOURCE_TABLE], {})
        for c in set(r["after"] or {}) | set(r["before"] or {}):
            types, first, last, newest = columns.get(c, (set(), None, None, None))
            stated = (r["col_types"] or {}).get(c)
            if stated is not None:
                types = types | {stated}
                newest = max(newest or (r["ord"], stated), (r["ord"], stated))
            if r["seq"]:
                first, last = min(first or r["seq"], r["seq"]), max(last or r["seq"], r["seq"])
            columns[c] = (types, first, last, newest)
    assert set(profiles) == set(expected)
    for name, columns in expected.items():
        got = profiles[name].columns
        assert set(got) == set(columns), name
        for c, (types, first, last, newest) in columns.items():
            assert (got[c].types, got[c].first_seq, got[c].last_seq) == (types, first, last), (name, c)
            assert got[c].newest == (newest[1] if newest else None), (name, c)
    t = profiles[next(n for n in profiles if '"t"' in n)]
    assert t.columns["b"].types == {"varchar(16)", "varchar(32)"} and t.columns["b"].newest == "varchar(32)"
    assert sum(p.changes for p in profiles.values()) == len(changes)


def test_a_keyed_change_carries_its_new_and_old_key_and_a_moved_key_deletes_first(spark, tmp_path, monkeypatch):
    """The keyed rows of a batch (``decide.keyed_changes``): ``k`` and ``kimg`` of the row a change writes,
    ``old_k``/``old_kimg`` of an UPDATE's before-image, none for a table without a key; an UPDATE that moves its
    row is two keyed rows of the one change (an ``explode``), the old key's DELETE ordered first, and an UPDATE that
    keeps its key is one."""
    import pipelines.gold.batch_decision as decision

    seen = []
    rows_with_key_state = decision.rows_with_key_state

    def kept_rows(run, good, plans, lookups, small):
        rows = rows_with_key_state(run, good, plans, lookups, small)
        seen.extend(
            rows.select("_source_table", "op", "seq", "k", "kimg", "old_k", "old_kimg", "moved", "ord").collect()
        )
        return rows

    monkeypatch.setattr(decision, "rows_with_key_state", kept_rows)
    gold = Gold(spark, tmp_path)
    gold.apply(
        [
            change("INSERT", 1, after=_row(1, a="1")),
            change("UPDATE", 2, before=_row(1, a="1"), after=_row(2, a="2")),  # moves its row from key 1 to 2
            change("UPDATE", 3, before=_row(2, a="2"), after=_row(2, a="3")),
            change("INSERT", 4, after={"x": "9"}, types={"x": "int"}, key=(), table="u"),
        ]
    )
    by_seq = {}
    for r in seen:
        by_seq.setdefault(r["seq"][-1], []).append(r)
    assert sorted(by_seq) == ["1", "2", "3"]  # the keyless table's change is no keyed row
    (insert,) = by_seq["1"]
    assert (insert["op"], insert["k"], insert["kimg"], insert["old_k"], insert["moved"]) == (
        "INSERT", '["1"]', {"id": "1"}, None, False,
    )  # fmt: skip
    moving = sorted(by_seq["2"], key=lambda r: r["ord"])
    assert [(r["op"], r["k"], r["kimg"], r["moved"]) for r in moving] == [
        ("DELETE", '["1"]', {"id": "1"}, True),
        ("UPDATE", '["2"]', {"id": "2"}, False),
    ]
    assert [(r["old_k"], r["old_kimg"]) for r in moving] == [('["1"]', {"id": "1"})] * 2
    (staying,) = by_seq["3"]
    assert (staying["op"], staying["k"], staying["old_k"], staying["moved"]) == ("UPDATE", '["2"]', '["2"]', False)
    assert sorted((r["id"], r["a"]) for r in gold.rows()) == [(2, 3)]


# ---------------------------------------------------------------- SCD type 2 history


def _history(gold: Gold) -> list[tuple]:
    rows = gold.wh.history("shop.t").read(gold.spark).collect()
    return sorted(
        (
            r["id"],
            r["a"],
            r["_valid_from_seq"][-2:],
            (r["_valid_to_seq"] or "--")[-2:],
            r["_current"],
            r["_valid_to"] is None,
        )
        for r in rows
    )


def test_history_keeps_every_version_whatever_the_batch_boundaries(spark, tmp_path):
    first = [
        change("INSERT", 1, after=_row(1, a="1")),
        change("UPDATE", 2, before=_row(1, a="1"), after=_row(1, a="2")),
        change("INSERT", 3, after=_row(2, a="20")),
    ]
    second = [
        change("UPDATE", 5, before=_row(1, a="2"), after=_row(1, a="3")),
        change("DELETE", 6, before=_row(2, a="20")),
        change("UPDATE", 7, before=_row(1, a="3"), after=_row(3, a="3")),
        first[1],
    ]  # a late copy of an old change: stale, never a version
    in_two = Gold(spark, tmp_path / "two", history=True)
    in_two.apply(first)
    in_two.apply(second)
    expected = [
        (1, 1, "01", "02", False, False),
        (1, 2, "02", "05", False, False),
        (1, 3, "05", "07", False, False),
        (2, 20, "03", "06", False, False),
        (3, 3, "07", "--", True, True),
    ]
    assert _history(in_two) == expected
    in_one = Gold(spark, tmp_path / "one", history=True)
    in_one.apply(first + second)
    assert _history(in_one) == expected
    assert in_two.rows() == in_one.rows() == [{"id": 3, "a": 3}], "the mirror holds the current version"


def test_truncate_closes_the_current_versions(spark, tmp_path):
    gold = Gold(spark, tmp_path, history=True)
    gold.apply([change("INSERT", 1, after=_row(1, a="1")), change("INSERT", 2, after=_row(2, a="2"))])
    truncate = Change(
        op="TRUNCATE",
        db="shop",
        table="t",
        key_columns=("id",),
        seq=(1_700_000_000_005,),
        event_time="2023-11-14T22:13:20.005Z",
        ddl="TRUNCATE TABLE shop.t",
    )
    gold.apply([truncate, change("INSERT", 6, after=_row(3, a="3"))])
    assert _history(gold) == [
        (1, 1, "01", "05", False, False),
        (2, 2, "02", "05", False, False),
        (3, 3, "06", "--", True, True),
    ]
    assert gold.rows() == [{"id": 3, "a": 3}]


def _tombstones(gold: Gold) -> list[tuple[int, str]]:
    """The deleted keys key state holds for shop.t that still count (newer than the mirror's TRUNCATE),
    as (id, last three digits of the delete's sequence)."""
    import json

    from pipelines.gold.state import GoldState
    from pipelines.gold.truncate import TRUNCATED_SEQ_PROPERTY
    from pipelines.mirror_columns import table_properties

    truncated = table_properties(gold.spark, gold.wh.mirror("shop.t")).get(TRUNCATED_SEQ_PROPERTY, "")
    rows = GoldState(gold.wh).current_keys(gold.spark).where("mirror = 'shop__t' AND NOT live").collect()
    return sorted((int(json.loads(r["k"])[0]), r["seq"][-3:]) for r in rows if r["seq"] > truncated)


def _last_write(gold: Gold) -> str:
    return gold.spark.sql(f"DESCRIBE HISTORY {gold.wh.mirror('shop.t').sql} LIMIT 1").first()["operation"]


def test_a_truncate_supersedes_the_tombstones_before_it_and_late_changes_stay_stale(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    insert = change("INSERT", 1, after=_row(1, a="1"))
    gold.apply([insert, change("DELETE", 2, before=_row(1, a="1")), change("DELETE", 4, before=_row(9, a="9"))])
    assert _tombstones(gold) == [(1, "002"), (9, "004")]
    truncate = Change(
        op="TRUNCATE",
        db="shop",
        table="t",
        key_columns=("id",),
        seq=(1_700_000_000_003,),
        event_time="2023-11-14T22:13:20.003Z",
        ddl="TRUNCATE TABLE shop.t",
    )
    gold.apply([truncate])
    assert _tombstones(gold) == [(9, "004")], "only the tombstone newer than the truncate"
    stats = gold.apply([insert, change("INSERT", 3, after=_row(9, a="99"))])  # both older than what they meet
    assert (stats.applied, stats.stale) == (0, 2)
    assert gold.rows() == []


def test_deleted_keys_stay_in_key_state_and_new_keys_are_appended(spark, tmp_path):
    """Key state keeps one row per deleted key, with the sequence of its delete, so a late change older
    than the delete never brings the row back; a key inserted again lives again. A batch whose keys are
    all new to the mirror appends them (one write, not a MERGE)."""
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", n, after=_row(n, a=str(n))) for n in (1, 2, 3)])
    assert _last_write(gold) == "WRITE"
    gold.apply([change("DELETE", 10, before=_row(1, a="1")), change("DELETE", 11, before=_row(2, a="2"))])
    assert (_tombstones(gold), _last_write(gold)) == ([(1, "010"), (2, "011")], "MERGE")
    gold.apply([change("DELETE", 12, before=_row(3, a="3")), change("DELETE", 13, before=_row(1, a="1"))])
    assert _tombstones(gold) == [(1, "013"), (2, "011"), (3, "012")], "key 1 deleted again: its newer delete"
    gold.apply([change("INSERT", 14, after=_row(2, a="22")), change("DELETE", 15, before=_row(7, a="7"))])
    assert _tombstones(gold) == [(1, "013"), (3, "012"), (7, "015")], "key 2 lives again"
    gold.apply([change("INSERT", 16, after=_row(8, a="8"))])
    assert _last_write(gold) == "WRITE", "a key never seen: appended"
    stats = gold.apply([change("INSERT", 9, after=_row(7, a="7"))])  # older than key 7's delete
    assert (stats.applied, stats.stale) == (0, 1)
    assert [r["id"] for r in gold.rows()] == [2, 8]


@pytest.mark.parametrize("key", [("id",), ()], ids=["keyed", "keyless"])
def test_every_change_of_a_batch_is_applied_stale_or_quarantined(spark, tmp_path, key):
    """The changes a batch's last TRUNCATE supersedes (an earlier TRUNCATE too) count stale, the TRUNCATE
    applied: nothing falls out of the counts."""
    gold = Gold(spark, tmp_path)

    def truncate(n: int) -> Change:
        return Change(
            op="TRUNCATE",
            db="shop",
            table="t",
            key_columns=key,
            seq=(1_700_000_000_000 + n,),
            event_time=f"2023-11-14T22:13:20.{n:03d}Z",
            ddl="TRUNCATE TABLE shop.t",
        )

    stats = gold.apply(
        [
            change("INSERT", 1, after=_row(1, a="1"), key=key),
            change("INSERT", 2, after=_row(2, a="2"), key=key),
            truncate(3),
            truncate(4),
            change("INSERT", 5, after=_row(3, a="3"), key=key),
            change("INSERT", 6, after=_row(4, a="4"), key=key),
        ]
    )
    assert (stats.changes, stats.applied, stats.stale, stats.quarantined) == (6, 3, 3, 0)
    assert stats.unaccounted == 0
    assert sorted(r["id"] for r in gold.rows()) == [3, 4]


def test_two_equal_keyless_rows_of_one_message_stay_two(spark, tmp_path):
    """A Canal message carries several rows in ``data``: two equal ones are two source rows."""
    import json

    types = {"a": "int", "b": "varchar(16)"}
    gold = Gold(spark, tmp_path)
    message = json.loads(
        get_decoder(FMT).encode(
            change("INSERT", 1, after={"a": "1", "b": "x"}, types=types, key=()), gold.cfg.decode_context(FMT)
        )
    )
    message["data"] = message["data"] * 2
    raw = json.dumps(message).encode()
    frame = gold.frame_of_messages([raw, raw])  # the message, and a redelivered copy of it
    assert frame.count() == 4
    apply_gold_batch(spark, frame, 0, gold.cfg, gold.wh, "app-test")
    assert gold.rows() == [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}]


# ---------------------------------------------------------------- column names that need quoting

#: Quotes, dots, backslashes and symbols through fold, MERGE, tombstones and history; the names Delta refuses
#: without column mapping (spaces, commas, parentheses, backticks) are kept by the hostile replay's mirrors.
ODD_TYPES = {"i.d": "bigint", "a'b": "int", "e.f": "varchar(16)", "x$%^&*\\": "varchar(16)"}


def _odd(n: int, a: str, e: str, x: str | None) -> dict:
    return {"i.d": str(n), "a'b": a, "e.f": e, "x$%^&*\\": x}


def test_column_names_that_need_quoting_fold_merge_and_keep_history(spark, tmp_path):
    """Names come from messages: quotes, dots, backslashes and symbols in the key, in the data columns the
    fold carries by name, and in the history."""
    gold = Gold(spark, tmp_path, history=True)
    key = ("i.d",)
    gold.apply(
        [
            change("INSERT", 1, after=_odd(1, "1", "one", "x1"), types=ODD_TYPES, key=key),
            change("INSERT", 2, after=_odd(2, "2", "two", "x2"), types=ODD_TYPES, key=key),
        ]
    )
    gold.apply(
        [
            change(
                "UPDATE",
                3,
                before=_odd(1, "1", "one", "x1"),
                after=_odd(1, "10", "ONE", None),
                types=ODD_TYPES,
                key=key,
            ),
            change(
                "UPDATE", 4, before=_odd(2, "2", "two", "x2"), after=_odd(5, "2", "two", "x2"), types=ODD_TYPES, key=key
            ),
        ]
    )
    assert gold.rows() == [
        {"i.d": 1, "a'b": 10, "e.f": "ONE", "x$%^&*\\": None},
        {"i.d": 5, "a'b": 2, "e.f": "two", "x$%^&*\\": "x2"},
    ]
    import json

    from pipelines.gold.state import GoldState

    deleted = GoldState(gold.wh).current_keys(spark).where("NOT live").collect()
    assert [json.loads(r["k"]) for r in deleted] == [["2"]], "the moved key"
    history = sorted(
        (r["i.d"], r["a'b"], r["e.f"], r["_current"]) for r in gold.wh.history("shop.t").read(spark).collect()
    )
    assert history == [(1, 1, "one", False), (1, 10, "ONE", True), (2, 2, "two", False), (5, 2, "two", True)]


def test_column_names_that_need_quoting_in_a_table_without_a_key(spark, tmp_path):
    types = {"a'b": "int", "e.f": "varchar(16)"}
    x = {"a'b": "1", "e.f": "x"}
    gold = Gold(spark, tmp_path)
    gold.apply(
        [
            change("INSERT", 1, after=x, types=types, key=()),
            change("INSERT", 2, after=x, types=types, key=()),
            change("DELETE", 3, before=x, types=types, key=()),
        ]
    )
    assert gold.rows() == [{"a'b": 1, "e.f": "x"}]


# ---------------------------------------------------------------- one mirror, one source table


def test_a_second_source_table_aimed_at_a_mirror_is_quarantined_and_the_first_keeps_it(spark, tmp_path):
    """Two ``target``s alike: the mirror records the source table that created it, and gold refuses the
    other one's changes (quarantined, naming both) instead of merging two tables into one mirror."""
    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config(
        {
            "warehouse": str(tmp_path / "wh"),
            "quality_checks": False,
            "sources": [{"name": "s", "format": FMT, "path": str(tmp_path / "none")}],
            "tables": {t: {"target": "merged"} for t in ("shop.t", "shop.u", "shop.v")},
        }
    )
    row = {"id": "1", "a": "1", "b": "x", "d": "1.00"}
    stats = gold.apply([change("INSERT", 1, after=row), change("INSERT", 2, after={**row, "id": "2"}, table="u")])
    assert (stats.applied, stats.quarantined) == (1, 1)
    assert [r["id"] for r in gold.rows("merged")] == [1]
    [refused] = gold.quarantine()
    assert "'shop.t'" in refused["reason"] and "'shop.u'" in refused["reason"] and "target" in refused["reason"]
    # two source tables refused in one batch: each one's quarantine append lands (a stamp per source table)
    gold.apply(
        [
            change("UPDATE", 3, before=row, after={**row, "b": "y"}),
            change("INSERT", 4, after=row, table="u"),
            change("INSERT", 5, after=row, table="v"),
        ]
    )
    assert [(r["id"], r["b"]) for r in gold.rows("merged")] == [(1, "y")]
    reasons = [r["reason"] for r in gold.quarantine()]
    assert len(reasons) == 3, reasons
    assert sum("'shop.u' may not" in r for r in reasons) == 2 and sum("'shop.v' may not" in r for r in reasons) == 1


def test_a_failing_rule_stops_the_batch_and_its_results_are_kept(spark, tmp_path):
    """A ``fail`` rule on the batch or on the mirror stops the stream, and ``dq_results`` holds its failed
    row at once (the batch's one append never comes); a batch that passes writes every rule's row."""
    from pipelines.quality.batch import QualityFailure
    from pipelines.quality.storage import dq_results_ref

    gold = Gold(
        spark,
        tmp_path,
        expectations=[
            {"name": "a_small", "expect": "between", "column": "a", "min": 0, "max": 100, "action": "fail"},
            {"name": "few_rows", "expect": "row_count_between", "max": 2, "action": "fail"},
        ],
    )

    def results(batch: int) -> dict:
        rows = dq_results_ref(gold.wh).read(spark).where(f"batch_id = {batch} AND `table` = 'shop.t'").collect()
        return {r["expectation"]: r["success"] for r in rows if not r["expectation"].startswith("cdc_")}

    gold.apply([change("INSERT", 1, after=_row(1, a="1")), change("INSERT", 2, after=_row(2, a="2"))])
    assert results(0) == {"a_small": True, "few_rows": True}
    with pytest.raises(QualityFailure, match="few_rows"):  # the mirror rule: a third row
        gold.apply([change("INSERT", 3, after=_row(3, a="3"))])
    assert results(1) == {"few_rows": False}
    gold.batches += 1
    with pytest.raises(QualityFailure, match="a_small"):  # the batch rule: a value out of range
        gold.apply([change("UPDATE", 4, before=_row(1), after=_row(1, a="101"))])
    assert results(2) == {"a_small": False}


def test_the_change_checks_see_the_mirror_as_the_batch_found_it(spark, tmp_path):
    """Gold runs the sequence and drift checks before its merge: a clean UPDATE and DELETE pass (read
    after the merge, the deleted row would be missing: drift), a before-image the mirror does not hold
    is drift, and a sequence behind the mirror's row goes backwards."""
    from pipelines.quality.storage import dq_results_ref

    gold = Gold(spark, tmp_path, quality_checks=True)

    def checks(batch: int) -> dict:
        rows = dq_results_ref(gold.wh).read(spark).where(f"batch_id = {batch} AND `table` = 'shop.t'").collect()
        return {
            r["expectation"]: (r["success"], r["unexpected_count"])
            for r in rows
            if r["expectation"] in ("cdc_source_drift", "cdc_seq_not_backwards")
        }

    gold.apply([change("INSERT", n, after=_row(n, a=str(n))) for n in (1, 2, 3)])
    assert checks(0) == {"cdc_source_drift": (True, 0), "cdc_seq_not_backwards": (True, 0)}
    gold.apply(
        [change("UPDATE", 4, before=_row(1, a="1"), after=_row(1, a="5")), change("DELETE", 5, before=_row(2, a="2"))]
    )
    assert checks(1) == {"cdc_source_drift": (True, 0), "cdc_seq_not_backwards": (True, 0)}
    gold.apply(
        [
            change("UPDATE", 7, before=_row(1, a="9"), after=_row(1, a="6")),  # the mirror holds a = 5
            change("UPDATE", 2, before=_row(3, a="3"), after=_row(3, a="8")),  # the mirror's row is at 3
        ]
    )
    assert checks(2) == {"cdc_source_drift": (False, 1), "cdc_seq_not_backwards": (False, 1)}
    assert [(r["id"], r["a"]) for r in gold.rows()] == [(1, 6), (3, 3)]


def _check_results(gold: Gold, batch: int, names=("cdc_source_drift", "cdc_seq_not_backwards")) -> dict:
    from pipelines.quality.storage import dq_results_ref

    rows = dq_results_ref(gold.wh).read(gold.spark).where(f"batch_id = {batch}").collect()
    return {r["expectation"]: r for r in rows if r["expectation"] in names}


def test_drift_names_the_columns_that_differ_and_the_rows_missing(spark, tmp_path):
    """Against key state's hashes of each column: an UPDATE whose before-image holds another value (the
    columns named), a DELETE of a row the mirror never had, and a DELETE whose before-image carries only
    its key (nothing to compare: it matches)."""
    gold = Gold(spark, tmp_path, quality_checks=True)
    gold.apply([change("INSERT", n, after=_row(n, a=str(n), b="x", d="1.50")) for n in (1, 2, 3)])
    gold.apply(
        [
            # a differs; d 1.5 is the mirror's 1.50
            change("UPDATE", 7, before=_row(1, a="9", b="x", d="1.5"), after=_row(1, a="6", b="x", d="1.5")),
            change("DELETE", 8, before=_row(42, a="1")),  # never in the mirror
            change("DELETE", 9, before={"id": "3"}),  # only its key
        ]
    )
    drift = _check_results(gold, 1)["cdc_source_drift"]
    assert (drift["success"], drift["element_count"], drift["unexpected_count"]) == (False, 3, 2)
    assert "differs: a" in drift["details"] and "row missing" in drift["details"]
    assert "#1.0" in drift["details"] and "#1.1" in drift["details"] and "#1.2" not in drift["details"]


def test_a_change_older_than_its_keys_delete_is_no_drift(spark, tmp_path):
    """An UPDATE older than the DELETE its key already applied is stale: its before-image describes a row the
    mirror rightly no longer holds, so the drift check compares it with nothing (it once counted "row missing").
    A DELETE of a key the mirror never held, in the same batch, still is drift."""
    gold = Gold(spark, tmp_path, quality_checks=True)
    gold.apply([change("INSERT", n, after=_row(n, a=str(n))) for n in (1, 2)])
    gold.apply([change("DELETE", 9, before=_row(1, a="1"))])
    gold.apply(
        [
            change("UPDATE", 5, before=_row(1, a="1"), after=_row(1, a="7")),  # older than the DELETE at 9
            change("DELETE", 10, before=_row(42, a="1")),  # never in the mirror
        ]
    )
    drift = _check_results(gold, 2)["cdc_source_drift"]
    assert (drift["success"], drift["element_count"], drift["unexpected_count"]) == (False, 1, 1)
    assert "#2.1" in drift["details"] and "#2.0" not in drift["details"]
    assert [(r["id"], r["a"]) for r in gold.rows()] == [(2, 2)]


@pytest.mark.parametrize("key", [("i.d",), ("x$%^&*\\",)], ids=["dotted key", "symbol key"])
def test_the_drift_check_compares_columns_however_named(spark, tmp_path, key):
    gold = Gold(spark, tmp_path, quality_checks=True)
    row = {"i.d": "1", "a'b": "1", "e.f": "old", "x$%^&*\\": "k1"}
    gold.apply([change("INSERT", 1, after=row, types=ODD_TYPES, key=key)])
    gold.apply(
        [change("UPDATE", 2, before={**row, "e.f": "stale"}, after={**row, "e.f": "new"}, types=ODD_TYPES, key=key)]
    )
    drift = _check_results(gold, 1)["cdc_source_drift"]
    assert (drift["success"], drift["unexpected_count"]) == (False, 1)
    assert "differs: e.f" in drift["details"]
