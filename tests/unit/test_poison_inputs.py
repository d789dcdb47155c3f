"""Issue 10: no message, name or value can stop or stall the pipeline; decoders raise only Reject.

One regression test (or a few) per item, each written against the public entry points that existed
before the fix (``decode_message``, ``make_decode_batches``, ``lakecdc decode``, ``parse_config`` /
``load_config``, the decoders), so each fails on the old code: by a hang (timed), a crash, a wrong value,
or a change that should have been quarantined.
"""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path

import fastavro
import pytest

from pipelines.config import ConfigError, load_config, parse_config
from pipelines.formats import DecodeContext, Reject, get_decoder
from pipelines.formats._dts_record import NS, PARSED_BORN
from pipelines.formats.base import Change
from pipelines.silver import decode_message, decoded_rows, seq_text
from pipelines.values import canon_instant, family, parse_type, spark_type
from tests.unit._carriers import silver

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "fixtures" / "seeds"
CTX = DecodeContext()
BRONZE_DDL = "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"


def decode(fmt: str, raw: bytes | dict, ctx: DecodeContext = CTX) -> list[Change]:
    """Silver's own path for one message (Reject on failure)."""
    if isinstance(raw, dict):
        raw = json.dumps(raw).encode()
    return decode_message(get_decoder(fmt), raw, ctx)


def timed(call, *args):
    start = time.perf_counter()
    try:
        result = call(*args)
    except Reject as exc:
        result = exc
    return result, time.perf_counter() - start


def silver_rows(messages: list[tuple[str, bytes]]) -> list[dict]:
    """Run silver's mapInArrow function on one bronze batch, as Spark would."""
    return silver(messages, CTX)


def canal(**fields) -> dict:
    msg = {
        "type": "INSERT",
        "database": "shop",
        "table": "t",
        "id": 1,
        "es": 1600000000000,
        "pkNames": ["id"],
        "data": [{"id": "1"}],
    }
    msg.update(fields)
    return {k: v for k, v in msg.items() if v is not None}


# ---------------------------------------------------------------- 1. catastrophic regex backtracking


def test_type_name_parsing_is_linear():
    for n in (70, 100, 10_000):
        hostile = "a" + " " * n + "!"
        (_, took) = timed(parse_type, hostile)
        assert took < 0.5, f"{n} spaces took {took:.2f}s"
        assert spark_type(hostile) == "STRING"  # gold asks the same question


def test_issue_canal_message_with_a_hostile_type_is_decoded_quickly():
    for memo in (parse_type, family, spark_type):
        memo.cache_clear()  # the issue's own type name, parsed afresh
    raw = (
        b'{"type":"INSERT","database":"d","table":"t","id":1,"data":[{"c":"1"}],"mysqlType":{"c":"a'
        + b" " * 70
        + b'!"}}'
    )
    for fmt in ("dts_canal", "auto"):
        result, took = timed(decode, fmt, raw)
        assert took < 0.5, f"{fmt}: {took:.2f}s"
        assert isinstance(result, (list, Reject))


def _with_types(obj, hostile: str):
    """Every type name a message states (Canal, DRS, DataWorks, OMS Extend) replaced by ``hostile``."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("mysqlType", "columnType") and isinstance(v, dict):
                out[k] = {c: hostile for c in v}
            elif k == "schemaType" or (k == "type" and "name" in obj):  # __light_type; {name, type} columns
                out[k] = hostile
            else:
                out[k] = _with_types(v, hostile)
        return out
    if isinstance(obj, list):
        return [_with_types(v, hostile) for v in obj]
    return obj


@pytest.mark.parametrize(
    "fmt",
    ["oms_canal", "dts_canal", "drs_json", "drs_gaussdb", "dataworks_kafka", "oms_dataworks", "oms_default_extend"],
)
def test_every_format_with_type_names_stays_fast(fmt):
    hostile = fmt.replace("_", "") + " " * 90 + "!"  # a name of its own: no cache hides the cost
    for line in (SEEDS / f"{fmt}.jsonl").read_bytes().splitlines():
        result, took = timed(decode, fmt, _with_types(json.loads(line), hostile))
        assert took < 0.5, f"{fmt}: {took:.2f}s"


def test_an_overlong_type_name_is_a_reject_with_a_reason():
    with pytest.raises(Reject, match="longer than 1024 characters"):
        decode("dts_canal", canal(mysqlType={"id": "int" + " " * 2000 + "x"}, data=[{"id": None}]))


# ---------------------------------------------------------------- 2. lone surrogates

SURROGATE = b'{"type":"INSERT","database":"shop","table":"t\\ud800","id":1,"pkNames":["id"],"data":[{"id":"1"}]}'


@pytest.mark.parametrize(
    "raw",
    [
        SURROGATE,
        b'{"type":"INSERT","database":"shop","table":"t","id":1,"pkNames":["id"],"data":[{"id":"\\udfff"}]}',
        b'{"type":"INSERT","database":"shop","table":"t","id":1,"pkNames":["id\\ud800"],"data":[{"id\\ud800":"1"}]}',
        b'{"type":"INSERT","database":"shop","table":"t","id":1,"pkNames":["id"],"data":[{"id":"1"}],'
        b'"mysqlType":{"id":"varchar\\udbff"}}',
    ],
)
def test_strings_utf8_cannot_encode_are_quarantined(raw):
    with pytest.raises(Reject, match="not valid Unicode"):
        decode("dts_canal", raw)


def test_one_surrogate_never_fails_the_silver_batch():
    good = json.dumps(canal(id=2)).encode()
    rows = silver_rows([("dts_canal", SURROGATE), ("dts_canal", good), ("no_such_format", good)])
    assert [r["kind"] for r in rows] == ["quarantine", "change", "quarantine"]
    assert "not valid Unicode" in rows[0]["reason"] and rows[1]["table"] == "t"


def test_a_row_arrow_refuses_quarantines_its_message_only(monkeypatch):
    """Defence in depth: were a bad string to pass the decode-time check, the batch still builds."""
    import pipelines.silver

    monkeypatch.setattr(pipelines.silver, "check_changes", lambda changes, *_: changes)
    rows = silver_rows([("dts_canal", SURROGATE), ("dts_canal", json.dumps(canal(id=2)).encode())])
    assert [r["kind"] for r in rows] == ["quarantine", "change"]
    assert rows[0]["reason"].startswith("silver cannot store the decoded change")


def test_lakecdc_decode_prints_a_quarantine_line_and_goes_on(tmp_path, capsys):
    from pipelines.cli import main

    path = tmp_path / "in.jsonl"
    path.write_bytes(SURROGATE + b"\n" + json.dumps(canal(id=2)).encode() + b"\n")
    assert main(["decode", "--format", "dts_canal", "--input", str(path)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0]["quarantine"]["line"] == 1 and "not valid Unicode" in out[0]["quarantine"]["reason"]
    assert out[1]["op"] == "INSERT" and out[1]["table"] == "t"


def avro_record(
    after: list, fields: list[dict] | None = None, operation: str = "INSERT", rid: int = 5, tags: dict | None = None
) -> bytes:
    """One DTS Avro Record (newer generation) with the given afterImages."""
    fields = fields or [{"name": "c", "dataTypeNumber": 253}]
    rec = {
        "version": 1,
        "id": rid,
        "sourceTimestamp": 1700000000,
        "sourcePosition": "1",
        "safeSourcePosition": "",
        "sourceTxid": "",
        "source": {"sourceType": "MySQL", "version": "8"},
        "operation": operation,
        "objectName": "shop.t",
        "processTimestamps": None,
        "tags": tags or {},
        "fields": fields,
        "beforeImages": None,
        "afterImages": after,
        "bornTimestamp": 0,
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_BORN, rec)
    return buf.getvalue()


def character(value: bytes, charset: str) -> tuple:
    return (NS + "Character", {"charset": charset, "value": value})


@pytest.mark.parametrize(
    "charset, value",
    [
        ("raw_unicode_escape", b"\\ud800"),
        ("unicode_escape", b"\\udc00"),
        ("utf-7", b"+2AA-"),
        ("rot13", b"abc"),
        ("hex", b"616263"),
        ("zlib", b"x"),
        ("base64", b"YWJj"),
        ("", b"a"),
        ("\x00", b"a"),
    ],
)
@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
def test_avro_character_with_odd_charsets_is_a_reject(fmt, charset, value):
    raw = avro_record([character(value, charset)])
    with pytest.raises(Reject, match="character set"):
        get_decoder(fmt).decode(raw, CTX)  # the decoder itself raises only Reject
    assert [r["kind"] for r in silver_rows([(fmt, raw)])] == ["quarantine"]


@pytest.mark.parametrize(
    "pk_uk_info",
    ['{"PRIMARY":["c"],"PRIMARY":["d"]}', "[" * 200_000 + "]" * 200_000, '{"PRIMARY":[' + "1," * 200_000 + "1]}"],
    ids=["duplicate_key", "deep", "wide"],
)
@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
def test_avro_key_tag_that_is_ambiguous_or_a_bomb_is_a_reject(fmt, pk_uk_info):
    """``tags.pk_uk_info`` is JSON text inside the Avro record: a duplicated ``PRIMARY`` (which key?) or a
    depth/width bomb is a Reject from the decoder itself, never last-key-wins or a RecursionError."""
    raw = avro_record([character(b"1", "utf8")], tags={"pk_uk_info": pk_uk_info})
    with pytest.raises(Reject, match="pk_uk_info"):
        get_decoder(fmt).decode(raw, CTX)
    assert get_decoder(fmt).decode(
        avro_record([character(b"1", "utf8")], tags={"pk_uk_info": '{"PRIMARY":["c"]}'}), CTX
    )[0].key_columns == ("c",)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[" + "1," * 200_000 + "1]", "[1,"])
def test_drs_avro_byte_list_bombs_are_a_reject(text):
    """DRS Avro carries binary as the text of a byte list; that text is bounded like a message."""
    from pipelines.formats.drs_avro import _value

    with pytest.raises(Reject, match="DRS byte list"):
        _value(text, "blob")
    assert _value("[106, 103]", "blob") == "amc="


def test_avro_character_with_real_charsets_still_decodes():
    raw = avro_record([character("中文".encode("gbk"), "gbk")])
    assert get_decoder("dts_avro").decode(raw, CTX)[0].after == {"c": "中文"}
    raw = avro_record([character("é".encode(), "UTF-8")])
    assert get_decoder("dts_avro").decode(raw, CTX)[0].after == {"c": "é"}


# ---------------------------------------------------------------- 4. width bombs


def test_a_2mb_drs_mongo_width_bomb_is_rejected_quickly():
    doc = '{"_id": ObjectId("64650cf67dc36a464e76e583"), "a": [' + ",".join(["1"] * 1_000_000) + "]}"
    raw = json.dumps(
        {
            "id": 1,
            "op": "INSERT",
            "db": "d",
            "coll": "c",
            "value": doc,
            "clusterTime": "1684344064:1",
            "es": 1684315111439,
        }
    ).encode()
    assert len(raw) > 2_000_000
    result, took = timed(decode, "drs_mongo", raw)
    assert isinstance(result, Reject) and "limits.max_" in str(result)
    assert took < 2, f"{took:.2f}s"


@pytest.mark.parametrize("fmt", ["oms_canal", "dts_canal", "drs_json", "ogg_json", "aws_dms", "auto"])
def test_json_width_bombs_are_rejected_quickly(fmt):
    wide = canal(data=[{"id": str(i)} for i in range(200_000)])
    result, took = timed(decode, fmt, wide)
    assert isinstance(result, Reject) and "max_width" in str(result) and took < 5  # a hang detector, not a benchmark
    # 100k values in all against a limit of 100k (the default, 1M, works the same on a 10 MB message)
    total = canal(data=[{f"c{j}": "1" for j in range(50)} for _ in range(2_000)])
    result, took = timed(decode, fmt, total, DecodeContext(max_elements=100_000))
    assert isinstance(result, Reject) and "max_elements" in str(result) and took < 2


def test_real_wide_messages_pass_and_limits_are_configurable():
    rows = [{"id": str(i), **{f"c{j}": f"v{j}" for j in range(100)}} for i in range(3000)]  # 3000 rows × 101
    assert len(decode("dts_canal", canal(data=rows))) == 3000
    narrow = DecodeContext(max_width=10)
    with pytest.raises(Reject, match="max_width"):
        decode("dts_canal", canal(data=[{"id": str(i)} for i in range(11)]), narrow)
    cfg = parse_config(
        {"sources": [{"name": "s", "format": "auto", "path": "/x"}], "limits": {"max_width": 10, "max_elements": 99}}
    )
    assert (cfg.decode_context().max_width, cfg.decode_context().max_elements) == (10, 99)


# ---------------------------------------------------------------- 5. YAML bombs


def test_a_billion_laughs_configuration_is_refused_quickly(tmp_path):
    # the anchors sit where any value is allowed (format options); a column type refers to the last
    lines = ["format_options:", "  drs_avro:", '    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"    {name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines += ["sources: [{name: s, format: oms_canal, path: /x}]", "tables: {a.b: {columns: {x: *i}}}"]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="alias"):
        load_config(path)
    assert time.perf_counter() - start < 2


def test_recursive_aliases_are_refused_and_ordinary_anchors_work(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("x: &x [*x]\nsources: [{name: s, format: oms_canal, path: /x}]\n")
    with pytest.raises(ConfigError, match="refers to the node that contains it"):
        load_config(path)
    path.write_text(
        "sources: [{name: s, format: oms_canal, path: /x}]\n"
        "tables:\n  shop.a: &t {key: [id], columns: {id: bigint}}\n  shop.b: *t\n"
    )
    assert load_config(path).tables["shop.b"].key == ("id",)


# ---------------------------------------------------------------- 7. missing ordering fields


def test_oms_default_incremental_change_without_sequence_is_rejected():
    line = json.loads((SEEDS / "oms_default.jsonl").read_bytes().splitlines()[3])  # the seed's DELETE
    assert line["recordType"] == "DELETE"
    line["allMetaData"]["storeDataSequence"] = None
    with pytest.raises(Reject, match="storeDataSequence"):
        decode("oms_default", line)
    snapshot = json.loads((SEEDS / "oms_default.jsonl").read_bytes().splitlines()[1])  # full load ROW
    assert decode("oms_default", snapshot)[0].seq == ()


def test_oms_canal_orders_every_message_on_one_scale():
    without_id = decode("oms_canal", canal(id=None, es=1600000000005))[0].seq
    with_id = decode("oms_canal", canal(id=7, es=1600000000000))[0].seq
    assert without_id == (1600000000005,) and with_id == (1600000000000, 7)
    assert seq_text(with_id) < seq_text(without_id)  # es first: the later change is never stale
    with pytest.raises(Reject, match="without 'es'"):
        decode("oms_canal", canal(id=7, es=None))


def test_shareplex_without_scn_or_seq():
    def msg(**meta):
        return {"data": {"id": "1"}, "meta": {"op": "ins", "table": "S.T", "time": "2017-06-16T14:24:34", **meta}}

    for fmt in ("oms_shareplex", "dts_shareplex"):
        with pytest.raises(Reject, match="meta.scn"):
            decode(fmt, msg(seq=1))
    with pytest.raises(Reject, match="meta.seq"):
        decode("dts_shareplex", msg(scn="100"))
    assert decode("oms_shareplex", msg(scn="100"))[0].seq == (100,)  # OMS: scn alone orders
    assert decode("dts_shareplex", msg(scn="100", seq=2))[0].seq == (100, 2)


def test_debezium_change_without_position_is_rejected():
    env = {"op": "d", "source": {"db": "d", "table": "t", "ts_ms": 1}, "before": {"id": 1}, "after": None}
    for fmt in ("oms_debezium", "oms_debezium_flatten"):
        with pytest.raises(Reject, match="source.pos"):
            decode(fmt, env)
    snapshot = {**env, "op": "r", "before": None, "after": {"id": 1}}
    assert decode("oms_debezium_flatten", snapshot)[0].seq == ()  # full sync rows carry none (seed 000)


@pytest.mark.parametrize("seq_id", ["123456789012345678901", "-5", "1e5", "²"])
def test_ordering_components_silver_cannot_sort_are_rejected(seq_id):
    with pytest.raises(Reject, match="ordering field 'id'"):
        decode("dts_canal", canal(id=seq_id))
    assert decode("dts_canal", canal(id="12345678901234567890"))[0].seq == (12345678901234567890,)


def test_seq_text_refuses_what_it_cannot_sort():
    assert seq_text((0, 10**20 - 1)) == "00000000000000000000.99999999999999999999"
    for bad in ((10**20,), (-1,)):
        with pytest.raises(Reject):
            seq_text(bad)


def test_a_decoder_bug_giving_bad_seq_is_quarantined():
    class Buggy:
        format_id = "buggy"

        def decode(self, raw, ctx):
            return [Change("INSERT", table="t", after={"a": "1"}, seq=(10**21,))]

    with pytest.raises(Reject, match="ordering component"):
        decode_message(Buggy(), b"{}", CTX)


# ---------------------------------------------------------------- 8. duplicate JSON keys


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"DELETE","database":"shop","table":"t","id":1,"pkNames":["id"],"data":[{"id":"1"}],"type":"INSERT"}',
        b'{"type":"INSERT","database":"shop","table":"t","id":1,"pkNames":["id"],"data":[{"id":"1","id":"2"}]}',
    ],
)
def test_duplicate_keys_are_ambiguous_and_quarantined(raw):
    for fmt in ("dts_canal", "auto"):
        with pytest.raises(Reject, match="duplicate key"):
            decode(fmt, raw)


def test_duplicate_fields_in_a_mongo_document_are_rejected():
    raw = {
        "id": 1,
        "op": "INSERT",
        "db": "d",
        "coll": "c",
        "clusterTime": "1:1",
        "value": '{"_id": ObjectId("64650cf67dc36a464e76e583"), "a": 1, "a": 2}',
    }
    with pytest.raises(Reject, match="duplicate field"):
        decode("drs_mongo", raw)


# ---------------------------------------------------------------- 10. OMS Avro DateTime

TIME_FIELD = [{"name": "t", "dataTypeNumber": 11}]


def datetime_value(**parts) -> tuple:
    return (NS + "DateTime", {k: parts.get(k) for k in ("year", "month", "day", "hour", "minute", "second", "millis")})


@pytest.mark.parametrize("fmt", ["oms_avro", "dts_avro"])
def test_avro_datetime_parts(fmt):
    dec = get_decoder(fmt)
    half = avro_record([datetime_value(hour=0, minute=1, second=2, millis=500_000)], TIME_FIELD)
    assert dec.decode(half, CTX)[0].after == {"t": "00:01:02.5"}  # millis holds microseconds
    with pytest.raises(Reject, match="out of range"):  # was 00:01:02.15
        dec.decode(avro_record([datetime_value(hour=0, minute=1, second=2, millis=1_500_000)], TIME_FIELD), CTX)
    assert dec.decode(avro_record([datetime_value()], TIME_FIELD), CTX)[0].after == {"t": None}  # was 00:00:00
    for bad in (
        dict(year=2020, month=1, day=1, hour=0, minute=1, second=2, millis=-1),
        dict(hour=0, minute=60, second=0),
        dict(year=2020, month=13, day=1),
        dict(year=2020, month=1, day=1, hour=24, minute=0, second=0),
        dict(year=2020, day=1),
        dict(year=2020, month=1, day=1, hour=1),
    ):
        with pytest.raises(Reject):
            dec.decode(avro_record([datetime_value(**bad)], TIME_FIELD), CTX)


def test_avro_timestamp_microseconds_out_of_range_is_a_reject():
    ts = (NS + "Timestamp", {"timestamp": 1606233662, "millis": 1_000_000})
    with pytest.raises(Reject, match="out of range"):
        get_decoder("dts_avro").decode(avro_record([ts], [{"name": "ts", "dataTypeNumber": 7}]), CTX)


# ---------------------------------------------------------------- smaller: only Reject, capped reasons


@pytest.mark.parametrize("zone", ["America", "Europe", "../../etc/passwd", "posixrules", "Nowhere/City"])
def test_time_zone_names_give_a_clean_reject(zone):
    with pytest.raises(Reject, match="unknown time zone") as info:
        canon_instant("2020-01-01 00:00:00", zone)  # the configured source_time_zone path
    assert "/" not in str(info.value).replace(zone, "")  # no interpreter path in the reason
    raw = canal(mysqlType={"id": "int", "ts": "timestamp"}, data=[{"id": "1", "ts": f"2020-11-25 00:01:02 {zone}"}])
    with pytest.raises(Reject):  # the zone written in the value
        get_decoder("dts_canal").decode(json.dumps(raw).encode(), CTX)
    with pytest.raises(Reject, match="unknown time zone"):
        get_decoder("drs_json_c").decode(
            json.dumps(raw).encode().replace(b" " + zone.encode(), b""),
            DecodeContext(options={"source_time_zone": zone}),
        )


def test_quarantine_reasons_are_capped():
    bronze = {"source": "s", "format": "f", "position": "p", "queue_pos": "q", "ingest_time": None, "value": b"x"}
    [row] = decoded_rows(bronze, None, "x" * 10_000_000)
    assert len(row["reason"]) < 2100 and "cut" in row["reason"]
    [row] = decoded_rows(bronze, None, "bad \ud800 op")
    row["reason"].encode("utf-8")  # a reason silver can store


def test_an_unknown_op_with_a_surrogate_still_gives_a_storable_quarantine_row():
    raw = b'{"type":"\\ud800","database":"shop","table":"t","id":1,"data":[{"id":"1"}]}'
    [row] = silver_rows([("dts_canal", raw)])
    assert row["kind"] == "quarantine" and "unknown op" in row["reason"]


# ---------------------------------------------------------------- smaller: configuration types

BASE = {"sources": [{"name": "s", "format": "oms_canal", "path": "/x"}]}
KAFKA = {"name": "k", "format": "oms_canal", "kafka": {"bootstrap_servers": "h:9092", "topics": ["t"]}}


@pytest.mark.parametrize(
    "doc, where",
    [
        (
            {"sources": [{**KAFKA, "kafka": {**KAFKA["kafka"], "fail_on_data_loss": "false"}}]},
            r"kafka\.fail_on_data_loss: must be true or false",
        ),
        ({**BASE, "tables": {"shop.t": {"target": 123}}}, r"tables\.shop\.t\.target: must be a non-empty string"),
        (
            {"sources": [{**KAFKA, "kafka": {"bootstrap_servers": "h:9092", "topics": 5}}]},
            r"kafka\.topics: expected a list",
        ),
        ({**BASE, "format_options": {"drs_avro": [1, 2]}}, r"format_options\.drs_avro: expected a mapping"),
        ({**BASE, "tables": {"shop.t": {"columns": {"a": "bignt"}}}}, r"columns\.a: unknown column type 'bignt'"),
        ({**BASE, "tables": {"shop.t": {"columns": {"a": "decimal(12,2"}}}}, r"unknown column type 'decimal\(12,2'"),
        ({**BASE, "processing_time": "soon"}, r"processing_time: must be a Spark trigger interval"),
        (
            {"sources": [{**KAFKA, "kafka": {**KAFKA["kafka"], "starting_offsets": "earlest"}}]},
            r"starting_offsets: must be earliest, latest, or JSON",
        ),
    ],
)
def test_configuration_types_are_checked(doc, where):
    with pytest.raises(ConfigError, match=where):
        parse_config(doc)


def test_configuration_accepts_what_it_should():
    cfg = parse_config(
        {
            "sources": [
                {
                    **KAFKA,
                    "kafka": {
                        **KAFKA["kafka"],
                        "starting_offsets": '{"t": {"0": 23, "1": -2}}',
                        "fail_on_data_loss": False,
                        "options": {"kafka.x": 5, "kafka.y": True},
                    },
                }
            ],
            "processing_time": "1 minute 30 seconds",
            "tables": {
                "shop.t": {
                    "columns": {
                        "a": "bigint unsigned",
                        "b": "decimal(12,2)",
                        "c": "varchar(64)",
                        "d": "timestamp(6) with time zone",
                        "e": "character varying",
                        "f": "uuid",
                        "g": "int8",
                        "h": "text[]",
                        "i": "enum('x','y')",
                    }
                }
            },
        }
    )
    kafka = cfg.sources[0].kafka
    assert kafka.fail_on_data_loss is False and kafka.options == {"kafka.x": "5", "kafka.y": "true"}


def test_all_errors_of_a_file_are_reported_at_once():
    doc = {
        "sources": [{**KAFKA, "kafka": {**KAFKA["kafka"], "fail_on_data_loss": "false"}}],
        "processing_time": "soon",
        "tables": {"shop.t": {"columns": {"a": "bignt"}}},
    }
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    text = str(info.value)
    assert "3 configuration errors" in text
    assert all(part in text for part in ("fail_on_data_loss", "processing_time", "bignt"))


def test_a_literal_secret_is_warned_about(caplog):
    doc = {
        "sources": [
            {
                **KAFKA,
                "kafka": {
                    **KAFKA["kafka"],
                    "security": {
                        "sasl.password": "hunter2",
                        "sasl.jaas.config": "${JAAS}",
                        "basic.auth.user.info": "u:p",
                        "sasl.oauthbearer.token.endpoint.url": "https://x",
                    },
                },
            }
        ]
    }
    with caplog.at_level(logging.WARNING, logger="pipelines.config"):
        parse_config(doc)
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "sasl.password" in warned and "basic.auth.user.info" in warned and "${VAR}" in warned
    assert "jaas" not in warned and "endpoint" not in warned and "hunter2" not in warned


# ---------------------------------------------------------------- 6. a mirror refuses another source table


def test_a_mirror_refuses_a_source_table_other_than_the_one_it_records():
    """Two source tables meet at one mirror only through configuration (two ``target`` names alike): the
    identity the mirror records (``lakecdc.source_identity``) refuses the second, compared exactly."""
    from pipelines.gold.identity import SOURCE_IDENTITY_PROPERTY, MirrorIdentity, identity_conflict
    from pipelines.warehouse import SourceTable

    def ident(db, schema, table, target="shared.t"):
        source = SourceTable.of(db, schema, table)
        parts = tuple(target.split("."))
        return MirrorIdentity(source.name, target, None, None, source_key=source.key, name_parts=parts)

    def recorded(holder):
        return {SOURCE_IDENTITY_PROPERTY: holder.source_key, "lakecdc.source_table": holder.source_table}

    public, audit = ident("pgdb", "public", "accounts"), ident("pgdb", "audit", "accounts")
    assert identity_conflict(public, None) is None  # no mirror yet: it is created
    assert identity_conflict(public, recorded(public)) is None  # its own mirror
    reason = identity_conflict(audit, recorded(public))
    assert reason and "'pgdb.public.accounts'" in reason and "'pgdb.audit.accounts'" in reason and "target" in reason
    # exact identities, not names that read alike: (a.b, c), (a, b.c), (a, b, c) read a.b.c; (A, b.c) differs in case
    alike = [ident("a.b", None, "c"), ident("a", None, "b.c"), ident("a", "b", "c"), ident("A", None, "b.c")]
    assert len({i.source_table.lower() for i in alike}) == 1
    for holder in alike:
        assert [identity_conflict(other, recorded(holder)) is None for other in alike] == [o is holder for o in alike]
    # a mirror written before identities were recorded is adopted by the table its recorded name names, only
    legacy = {"lakecdc.source_table": "pgdb.public.accounts"}
    assert identity_conflict(public, legacy) is None and identity_conflict(audit, legacy)


# ---------------------------------------------------------------- 11. invalid_values: null | quarantine


def test_invalid_values_policy_defaults_to_null_per_table_and_refuses_other_words(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "sources: [{name: s, format: oms_canal, path: /x}]\n"
        "tables:\n  shop.strict: {invalid_values: quarantine}\n  shop.plain: {key: [id]}\n"
    )
    cfg = load_config(path)
    assert cfg.invalid_values == "null"  # the default: the row applies with the column NULL
    assert cfg.tables["shop.strict"].invalid_values == "quarantine"
    assert cfg.tables["shop.plain"].invalid_values is None  # follows the top-level policy
    # YAML reads docs/configuration.md's unquoted `null` as nothing: it still means the policy null, also against the top level
    path.write_text(
        "sources: [{name: s, format: oms_canal, path: /x}]\n"
        "invalid_values: quarantine\n"
        "tables:\n  shop.t: {invalid_values: null}\n"
    )
    cfg = load_config(path)
    assert (cfg.invalid_values, cfg.tables["shop.t"].invalid_values) == ("quarantine", "null")
    for bad in ("drop", "ignore", 0):
        with pytest.raises(ConfigError, match=r"tables\.shop\.t\.invalid_values: must be one of null, quarantine"):
            parse_config({**BASE, "tables": {"shop.t": {"invalid_values": bad}}})


GOOD_CHANGE = dict(
    op="UPDATE",
    db="shop",
    table="tëst",
    key_columns=("id",),
    before={"id": "1", "name": "ä"},
    after={"id": "1", "name": None},
    changed=("name",),
    col_types={"id": "bigint", "name": "varchar(8)"},
    invalid={"d": "0000-00-00"},
    seq=(7, 0),
    event_time="2026-01-01T00:00:00Z",
)


@pytest.mark.parametrize(
    "bad",
    [
        {"op": "UPSERT"},
        {"table": 7},
        {"db": "s\ud800"},
        {"key_columns": ["id"]},
        {"key_columns": ("id", None)},
        {"changed": ("n\udfff",)},
        {"before": [("id", "1")]},
        {"before": {"id": 1}},
        {"after": {"id": "1", "name": "\udbff"}},
        {"after": {1: "1"}},
        {"col_types": {"id": "x" * 5000}},
        {"col_types": {"id": None}},
        {"invalid": {"d": "\ud800"}},
        {"seq": [7]},
        {"seq": (True,)},
        {"seq": (-1,)},
        {"seq": (10**20,)},
        {"seq": ("7",)},
    ],
    ids=repr,
)
def test_the_quick_check_of_a_change_lets_nothing_through_that_the_full_check_refuses(bad):
    """``check_changes`` first joins a change's texts (the common case, one encode); a change that fails
    that goes through the field-by-field check, which names the fault. Both must refuse the same changes."""
    from pipelines.formats.base import _check_change, _storable, check_changes

    good = Change(**GOOD_CHANGE)
    assert _storable(good) and check_changes([good]) == [good]
    change = Change(**{**GOOD_CHANGE, **bad})
    assert not _storable(change)
    with pytest.raises(Reject) as full:
        _check_change(change)
    with pytest.raises(Reject) as checked:
        check_changes([good, change])
    assert str(checked.value) == str(full.value)
