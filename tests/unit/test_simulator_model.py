"""The simulator and the reference model (pure Python, fast).

* Property tests, for every format (ALL_FORMAT_IDS) with an encoder: the decoded messages fed to
  MirrorModel in *delivered* order (duplicated, split over partitions by key, reordered across
  partitions; reordered freely where seq is a total order) give the same mirror as the decoded
  history in source order. That is what proves each format's ordering fields make delivery
  recoverable. A second property: the model over the source order equals the source tables.
  Both also for histories with keyless tables (``keyless_tables=True``), in every format that
  can carry one: there a redelivered duplicate must be applied once.
* Semantic unit tests of MirrorModel: no stale write, durable tombstones, partial updates vs
  NULL, key changes (also as DataWorks UPDATE_BEFOR/UPDATE_AFTER halves), snapshot handoff,
  truncate, keyless tables as multisets; and the known model gaps as strict xfails.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.formats import ALL_FORMAT_IDS, get_decoder
from pipelines.formats.base import Change, DecodeContext, TableSpec
from pipelines.testing.model import MirrorModel
from pipelines.testing.simulator import (
    CAPABILITIES,
    compare,
    decode_delivery,
    deliver,
    encodable_formats,
    generate_history,
    has_encoder,
    landing_lines,
    model_rows,
    pipeline_yaml,
    pipeline_yaml_many,
    soak,
    truth_diffs,
    truth_safe_options,
)

FORMATS = encodable_formats()
KEYLESS_FORMATS = [f for f in FORMATS if CAPABILITIES[f].keyless]
#: (format, generate_history options): every format, then every format that can carry keyless tables
HISTORY_KINDS = [pytest.param(f, {}, id=f) for f in FORMATS] + [
    pytest.param(f, {"keyless_tables": True}, id=f"{f}-keyless") for f in KEYLESS_FORMATS
]
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_format_with_an_encoder_has_capabilities():
    with_encoder = [f for f in ALL_FORMAT_IDS if has_encoder(f)]
    assert with_encoder, "no encoders found"
    assert sorted(FORMATS) == sorted(with_encoder), set(with_encoder) ^ set(FORMATS)


# ---------------------------------------------------------------- properties per format


@pytest.mark.parametrize("format_id, options", HISTORY_KINDS)
@PROPERTY
@given(seed=st.integers(0, 10**6), partitions=st.integers(1, 4), n_changes=st.integers(1, 60))
def test_delivered_order_gives_the_source_order_mirror(format_id, options, seed, partitions, n_changes):
    history = generate_history(
        format_id, seed, n_changes, composite_keys=truth_safe_options(format_id)["composite_keys"], **options
    )
    delivery = deliver(history, seed, partitions=partitions)
    assert len(delivery.messages) == len(history.messages) + delivery.duplicates
    got = model_rows(decode_delivery(history, delivery))
    diffs = compare(delivery.expected, {t: got.get(t, []) for t in delivery.expected}, col_types=history.column_types())
    assert diffs == [], f"{format_id} seed {seed} partitions {partitions}: " + "\n".join(diffs[:10])


@pytest.mark.parametrize("format_id, options", HISTORY_KINDS)
@PROPERTY
@given(seed=st.integers(0, 10**6), n_changes=st.integers(1, 60))
def test_source_order_mirror_equals_the_source_tables(format_id, options, seed, n_changes):
    history = generate_history(format_id, seed, n_changes, **truth_safe_options(format_id), **options)
    diffs = truth_diffs(history)
    assert diffs == [], f"{format_id} seed {seed}: " + "\n".join(diffs[:10])


@pytest.mark.parametrize("format_id", FORMATS)
def test_histories_use_what_the_format_can_express(format_id):
    caps = CAPABILITIES[format_id]
    ops, details, partial, key_changes = set(), set(), False, False
    for seed in range(12):
        h = generate_history(format_id, seed, 80)
        for ch in h.decoded:
            ops.add(ch.op)
            details.add(ch.detail)
            partial |= ch.op == "UPDATE" and ch.changed is not None
            if ch.op == "UPDATE" and ch.before and ch.after:
                merged = {**ch.before, **ch.after}
                key_changes |= any(merged.get(k) != ch.before.get(k) for k in ch.key_columns)
        assert len(h.tables) == 1 or caps.multi_table
    # DebeziumSmt cannot tell INSERT from UPDATE: both decode as an UPDATE of the full row
    assert ({"UPDATE", "DELETE"} if format_id == "oms_debezium_smt" else {"INSERT", "UPDATE", "DELETE"}) <= ops
    assert ("TRUNCATE" in ops) == caps.truncate
    assert ("DDL" in ops) == caps.ddl
    assert ("SNAPSHOT" in ops) == (caps.snapshot == "op")
    assert partial == (caps.partial is not None)
    if caps.split_update:
        assert "UPDATE_BEFOR" in details
    if caps.key_change and not caps.split_update:
        assert key_changes


@pytest.mark.parametrize("format_id", KEYLESS_FORMATS)
def test_keyless_histories_hold_duplicate_rows_and_change_them_one_at_a_time(format_id):
    seen_ops, copies = set(), 0
    for seed in range(12):
        h = generate_history(format_id, seed, 60, keyless_tables=True)
        keyless = {t.qualified for t in h.tables if not t.key}
        assert h.tables[0].qualified in keyless
        assert all("key" not in h.config_tables()[t] for t in keyless)
        for c in h.decoded:
            if f"{c.db}.{c.table}" in keyless and c.op != "DDL":
                assert c.key_columns == (), c
                assert c.op != "SNAPSHOT" and c.changed is None, c  # no full load, no partial image
                seen_ops.add(c.op)
        for t in keyless:
            rows = [json.dumps(r, sort_keys=True) for r in h.truth[t]]
            copies += len(rows) - len(set(rows))
    assert {"INSERT", "UPDATE", "DELETE"} <= seen_ops
    assert copies > 0, "no history ends with two equal rows in a keyless table"


@pytest.mark.parametrize("format_id", sorted(set(FORMATS) - set(KEYLESS_FORMATS)))
def test_keyless_tables_only_where_the_format_can_carry_them(format_id):
    with pytest.raises(ValueError, match="without a key"):
        generate_history(format_id, 1, 10, keyless_tables=True)
    assert all(t.key for seed in range(5) for t in generate_history(format_id, seed, 10).tables)


def test_delivery_duplicates_and_reorders():
    history = generate_history("oms_canal", 5, 60)
    delivery = deliver(history, 5, partitions=3, dup_rate=0.5)
    assert delivery.duplicates > 0
    assert {p for p, _o, _r in delivery.messages} <= {0, 1, 2}
    assert [r for _p, _o, r in delivery.messages] != history.messages


def test_delivery_keeps_partition_order_without_a_total_order():
    history = generate_history("oms_debezium_smt", 3, 60)
    delivery = deliver(history, 3, partitions=3, dup_rate=0.5)
    for p in range(3):
        offsets = [o for q, o, _r in delivery.messages if q == p]
        # a consumer restart re-reads from an earlier offset, then goes on in order
        drops = [i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]]
        assert len(drops) <= 1
        if drops:
            assert offsets[drops[0] :] == sorted(offsets[drops[0] :])


def test_landing_lines_and_yaml_for_the_cli():
    import yaml

    from pipelines.config import parse_config

    history = generate_history("oms_shareplex", 2, 20)
    delivery = deliver(history, 2)
    lines = landing_lines(history, delivery).splitlines()
    assert len(lines) == len(delivery.messages)
    cfg = parse_config(yaml.safe_load(pipeline_yaml(history, "/tmp/wh")))
    ctx = cfg.decode_context("oms_shareplex")
    assert ctx.tables == history.ctx.tables


def test_one_pipeline_yaml_for_many_formats():
    import yaml

    from pipelines.config import parse_config

    histories = [generate_history(f, 3, 20, n_tables=2, db=f) for f in ("oms_canal", "drs_avro", "oms_debezium_smt")]
    cfg = parse_config(
        yaml.safe_load(pipeline_yaml_many(histories, "/tmp/wh", {h.format_id: f"/l/{h.format_id}" for h in histories}))
    )
    assert [(s.format, s.path) for s in cfg.sources] == [(h.format_id, f"/l/{h.format_id}") for h in histories]
    assert cfg.default_table == "oms_debezium_smt.t0"  # the one format whose messages name no table
    for h in histories:
        ctx = cfg.decode_context(h.format_id)
        assert {t: ctx.tables[t] for t in h.ctx.tables} == h.ctx.tables and ctx.options == h.ctx.options
    with pytest.raises(ValueError, match="own db"):
        pipeline_yaml_many(
            [histories[0], generate_history("drs_json", 3, 20, db="oms_canal")],
            "/tmp/wh",
            {"oms_canal": "/a", "drs_json": "/b"},
        )


def test_compare_reports_value_for_value():
    expected = {"s.t": [{"id": "1", "d": "1.50", "v": "x"}, {"id": "2", "d": None, "v": None}]}
    exported = {"s.t": [{"id": 1, "d": "1.500", "v": "y"}, {"id": 3, "d": None, "v": None}]}
    diffs = compare(expected, exported, col_types={"s.t": {"id": "bigint", "d": "decimal(10,3)", "v": "varchar"}})
    assert any("column v: expected 'x', got 'y'" in d for d in diffs)
    assert any("('\"2\"',): expected row missing" in d for d in diffs)
    assert any("unexpected row" in d and "'id': 3" in d for d in diffs)
    assert not any("column d" in d for d in diffs)  # 1.50 == 1.500 for DECIMAL
    assert compare({"s.t": [{"id": "1", "n": None}]}, {"s.t": [{"id": 1}]}) == []  # absent = NULL


def test_compare_keyless_tables_as_multisets():
    types = {"s.t": {"d": "decimal(10,3)", "v": "varchar"}}
    expected = {"s.t": [{"d": "1.5", "v": "x"}, {"d": "1.5", "v": "x"}, {"d": None, "v": "y"}]}
    assert (
        compare(expected, {"s.t": [{"v": "y"}, {"d": "1.500", "v": "x"}, {"d": "1.50", "v": "x"}]}, col_types=types)
        == []
    )
    diffs = compare(
        expected,
        {"s.t": [{"d": "1.5", "v": "x"}, {"d": None, "v": "y"}, {"d": None, "v": "y"}]},
        keys={"s.t": ()},
        col_types=types,
    )
    assert diffs == [
        "s.t (no key): row {'d': None, 'v': 'y'} expected 1 times, got 2",
        "s.t (no key): row {'d': '1.5', 'v': 'x'} expected 2 times, got 1",
    ]


def test_soak_reports_what_it_checked():
    lines = []
    report = soak("dataworks_kafka", 300, seed=11, progress=lines.append, history_size=100)
    assert report.ok, report.mismatches[:5]
    assert report.truth_mismatches == []
    assert report.changes >= 300 and report.histories == 3
    assert report.messages >= report.changes
    assert report.tables >= 3 and report.seconds > 0
    assert "soak dataworks_kafka" in lines[-1] or any("soak dataworks_kafka" in m for m in lines)


# ---------------------------------------------------------------- MirrorModel semantics

T = ("shop", "t")


def ch(op, seq, before=None, after=None, changed=None, key=("id",)):
    return Change(
        op=op, db=T[0], table=T[1], key_columns=key, before=before, after=after, changed=changed, seq=tuple(seq)
    )


def rows_of(*changes):
    return MirrorModel().add_all(changes).rows("shop.t")


def test_no_stale_write():
    newer = ch("UPDATE", [3], {"id": "1", "v": "a"}, {"id": "1", "v": "new"})
    older = ch("UPDATE", [2], {"id": "1", "v": "x"}, {"id": "1", "v": "old"})
    insert = ch("INSERT", [1], after={"id": "1", "v": "x"})
    assert rows_of(newer, insert, older) == [{"id": "1", "v": "new"}]
    assert rows_of(insert, older, newer) == [{"id": "1", "v": "new"}]


def test_tombstones_are_durable():
    delete = ch("DELETE", [5], before={"id": "1", "v": "x"})
    late_insert = ch("INSERT", [2], after={"id": "1", "v": "x"})
    late_update = ch("UPDATE", [3], {"id": "1", "v": "x"}, {"id": "1", "v": "y"})
    assert rows_of(delete, late_update, late_insert) == []
    reinsert = ch("INSERT", [6], after={"id": "1", "v": "again"})
    assert rows_of(reinsert, delete, late_insert) == [{"id": "1", "v": "again"}]


def test_partial_update_touches_only_what_it_carries_and_null_is_a_value():
    insert = ch("INSERT", [1], after={"id": "1", "a": "x", "b": "y", "c": "z"})
    partial = ch("UPDATE", [2], {"id": "1"}, {"b": None, "c": "new"}, changed=("b", "c"))
    assert rows_of(insert, partial) == [{"id": "1", "a": "x", "b": None, "c": "new"}]
    full = ch("UPDATE", [3], {"id": "1"}, {"id": "1", "a": "only"})  # a full image replaces the row
    assert rows_of(partial, full, insert) == [{"id": "1", "a": "only"}]


def test_key_change_moves_the_row():
    insert = ch("INSERT", [1], after={"id": "1", "v": "x"})
    move = ch("UPDATE", [2], {"id": "1", "v": "x"}, {"id": "2", "v": "x"})
    reuse = ch("INSERT", [3], after={"id": "1", "v": "reused"})
    assert rows_of(reuse, move, insert) == [{"id": "1", "v": "reused"}, {"id": "2", "v": "x"}]
    partial_move = ch("UPDATE", [2], {"id": "1", "v": "x"}, {"id": "2"}, changed=("id",))
    assert rows_of(partial_move, insert) == [{"id": "2", "v": "x"}]


def _dataworks_split(before, after, seq_id):
    ctx = DecodeContext(tables={"shop.t": TableSpec(key=("id",), columns={"id": "bigint", "v": "varchar(8)"})})
    dec = get_decoder("dataworks_kafka")
    common = dict(
        db="shop", table="t", key_columns=("id",), col_types={"id": "bigint", "v": "varchar(8)"}, seq=(seq_id,)
    )
    halves = [
        Change("DELETE", before=before, detail="UPDATE_BEFOR", **common),
        Change("UPDATE", after=after, detail="UPDATE_AFTER", **common),
    ]
    return [dec.decode(dec.encode(h, ctx), ctx)[0] for h in halves], dec, ctx


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_key_change_as_dataworks_halves_in_either_order(order):
    (befor, after), dec, ctx = _dataworks_split({"id": "1", "v": "x"}, {"id": "2", "v": "y"}, 1620457642589000001)
    assert befor.seq == (1620457642589000001, 0) and after.seq == (1620457642589000001, 1)
    insert = dec.decode(
        dec.encode(
            Change(
                "INSERT",
                db="shop",
                table="t",
                key_columns=("id",),
                col_types={"id": "bigint", "v": "varchar(8)"},
                after={"id": "1", "v": "x"},
                seq=(1620457642589000000,),
            ),
            ctx,
        ),
        ctx,
    )[0]
    arrivals = [(befor, after)[i] for i in order]
    assert rows_of(*arrivals, insert) == [{"id": "2", "v": "y"}]
    # same key: UPDATE_AFTER arriving before its UPDATE_BEFOR is not deleted by it
    (b2, a2), _, _ = _dataworks_split({"id": "2", "v": "y"}, {"id": "2", "v": "z"}, 1620457642589000002)
    assert rows_of(a2, insert, befor, b2, after) == [{"id": "2", "v": "z"}]


@pytest.mark.parametrize("snapshot_seq", [(), (4,)])
def test_snapshot_handoff_newer_incremental_wins_whichever_arrives_first(snapshot_seq):
    snap = ch("SNAPSHOT", snapshot_seq, after={"id": "1", "v": "snapshot"})
    update = ch("UPDATE", [5], {"id": "1", "v": "snapshot"}, {"id": "1", "v": "incremental"})
    assert rows_of(snap, update) == rows_of(update, snap) == [{"id": "1", "v": "incremental"}]
    delete = ch("DELETE", [6], before={"id": "1", "v": "incremental"})
    assert rows_of(delete, snap, update) == []
    other = ch("SNAPSHOT", snapshot_seq, after={"id": "2", "v": "only snapshot"})
    assert rows_of(update, other, snap) == [{"id": "1", "v": "incremental"}, {"id": "2", "v": "only snapshot"}]


def test_snapshot_with_a_seq_older_than_an_incremental_change_loses():
    update = ch("UPDATE", [5], {"id": "1", "v": "a"}, {"id": "1", "v": "incremental"})
    older_snapshot = ch("SNAPSHOT", [3], after={"id": "1", "v": "stale"})
    newer_snapshot = ch("SNAPSHOT", [7], after={"id": "1", "v": "read later"})
    assert rows_of(update, older_snapshot) == [{"id": "1", "v": "incremental"}]
    assert rows_of(newer_snapshot, update) == [{"id": "1", "v": "read later"}]


def test_truncate_empties_the_table_as_of_its_sequence():
    a = ch("INSERT", [1], after={"id": "1", "v": "a"})
    b = ch("INSERT", [2], after={"id": "2", "v": "b"})
    trunc = Change(op="TRUNCATE", db="shop", table="t", key_columns=("id",), seq=(3,))
    after_trunc = ch("INSERT", [4], after={"id": "3", "v": "c"})
    assert rows_of(after_trunc, trunc, b, a) == [{"id": "3", "v": "c"}]  # late inserts older than it stay gone
    other_table = Change(op="TRUNCATE", db="shop", table="other", seq=(9,))
    assert rows_of(a, other_table) == [{"id": "1", "v": "a"}]


def test_keyless_table_is_a_multiset_and_a_redelivered_change_applies_once():
    def kl(op, seq, before=None, after=None):
        return ch(op, seq, before, after, key=())

    first, second = kl("INSERT", [1], after={"v": "x"}), kl("INSERT", [2], after={"v": "x"})
    assert rows_of(first, second) == [{"v": "x"}, {"v": "x"}]  # equal rows, two inserts: two rows
    assert rows_of(first, second, first, second) == [{"v": "x"}, {"v": "x"}]  # redelivered: once each
    update = kl("UPDATE", [3], {"v": "x"}, {"v": "y"})
    delete = kl("DELETE", [4], before={"v": "x"})
    assert rows_of(first, second, update) == [{"v": "x"}, {"v": "y"}]  # one equal row replaced
    assert rows_of(update, delete, second, first, delete, update) == [{"v": "y"}]
    assert rows_of(first, second, delete, kl("DELETE", [5], before={"v": "x"})) == []


def test_duplicates_are_idempotent():
    insert = ch("INSERT", [1], after={"id": "1", "v": "x"})
    update = ch("UPDATE", [2], {"id": "1", "v": "x"}, {"id": "1", "v": "y"})
    partial = ch("UPDATE", [3], {"id": "1"}, {"v": "z"}, changed=("v",))
    assert rows_of(insert, update, partial, update, insert, partial) == [{"id": "1", "v": "z"}]


def test_partial_update_changing_one_column_of_a_composite_key():
    key = ("id", "k2")
    insert = ch("INSERT", [1], after={"id": "1", "k2": "a", "v": "x"}, key=key)
    # SharePlex: data carries only the changed column (id), key carries the before-image
    move = ch("UPDATE", [2], {"id": "1", "k2": "a", "v": "x"}, {"id": "2"}, changed=("id",), key=key)
    delete = ch("DELETE", [3], before={"id": "2", "k2": "a", "v": "x"}, key=key)
    assert rows_of(insert, move, delete) == []  # the new key is before overlaid with after


def test_partial_update_of_a_row_the_mirror_does_not_hold_lands_on_its_before_image():
    # row 3 existed before the stream; a SharePlex update moves it to 2 before the full load reaches it
    move = ch("UPDATE", [2], {"id": "3", "v": "x", "w": "kept"}, {"id": "2", "v": "y"}, changed=("id", "v"))
    assert rows_of(move) == [{"id": "2", "v": "y", "w": "kept"}]


def test_shareplex_partial_key_change_round_trip_is_exact_with_a_single_key():
    h = generate_history("oms_shareplex", 4, 60, composite_keys=False)
    assert any(c.op == "UPDATE" and c.changed is not None for c in h.decoded)
    assert truth_diffs(h) == []
    json.dumps([c.to_json_dict() for c in h.decoded], ensure_ascii=False)


def test_a_history_that_ends_before_the_full_load_point_still_runs_the_full_load():
    # hypothesis found it: one DataWorks update is two messages (UPDATE_BEFOR + UPDATE_AFTER), so a
    # 2-change history ended before its full load began and rows older than the stream never arrived
    history = generate_history("dataworks_kafka", 475712, 2, **truth_safe_options("dataworks_kafka"))
    assert any(c.op in ("INSERT", "SNAPSHOT") for c in history.decoded), "the full load delivered the old rows"
    assert truth_diffs(history) == []
