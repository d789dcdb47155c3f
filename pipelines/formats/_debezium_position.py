"""Debezium's change positions: ``source`` → seq, per connector, and back (the encoder's ``source``).

* MySQL / MariaDB: (binlog file number, ``pos``, ``row``). The placeholder ``"file": ""`` (Flink CDC
  snapshot records, Debezium 1.9.7 test setups: ``"pos": 0``) means *no position*: seq ``()``. Only
  when ``file`` is absent altogether: the GTID's transaction number, else ``ts_ms``.
* PostgreSQL: ``sequence`` is the JSON text ``["<last commit LSN>","<LSN>"]`` (``SourceInfo.sequence()``):
  the LSN of the last transaction the connector saw commit, then the event's own. The WAL sender sends
  transactions in commit order and a change's LSN orders only within its transaction
  (``WalPositionLocator``), so seq is (last commit LSN, LSN): commit order, then the place in the
  transaction. Either may be null, and a null is *unknown*, never 0:

  - the last commit LSN is null until the connector has seen a commit (the snapshot's records, the
    first transaction after a start without stored offsets, a start whose offsets lack it): its
    stand-in is the event's own LSN, as the connector itself stands in the last processed LSN for a
    missing ``lsn_commit`` when it loads its offsets (``PostgresOffsetContext.Loader``). So the event
    sorts by where it is in the WAL: after the changes of the transactions that committed before it
    began. 0 would sort it before every positioned change: a DELETE after a restart would go before
    the UPDATE it follows, and the UPDATE would bring the row back;
  - the LSN is null: ``source.lsn`` stands in; without one, (last commit LSN,) orders the event with
    its transaction, ahead of that transaction's positioned changes; with neither, seq ``()``.

  Without ``sequence`` (Debezium before 1.5): (LSN, LSN).
* SQL Server: (``commit_lsn``, ``change_lsn``, ``event_serial_no``); each LSN ``"0000002d:00000620:0003"``
  is three hexadecimal parts, kept as three integers (an LSN is 80 bits: one integer would exceed the
  20 digits silver sorts), so seq has 7 components.
* Oracle: (``commit_scn``, ``scn``); MongoDB: (``sec`` or ``ts_ms`` / 1000, ``ord``).
* No usable position (none of these, or an unknown connector): seq ``()``, and queue order decides
  (Kafka keeps order per partition, and Debezium partitions by the record key).
"""

from __future__ import annotations

import re
from typing import Any

from pipelines.formats.base import Num, Reject, dumps_exact, loads_exact, seq_int

_GTID_TAIL = re.compile(r"[:-](\d+)$", re.ASCII)


def connector_of(source: dict[str, Any]) -> str:
    """``source.connector`` (lower case), or the connector the position fields belong to."""
    name = source.get("connector")
    if isinstance(name, str) and name:
        return name.lower()
    if "file" in source or "gtid" in source:
        return "mysql"
    if "commit_lsn" in source or "change_lsn" in source:
        return "sqlserver"
    if "lsn" in source or "sequence" in source:
        return "postgresql"
    if "scn" in source or "commit_scn" in source:
        return "oracle"
    if "ord" in source:
        return "mongodb"
    return ""


def ordering(source: dict[str, Any]) -> tuple[int, ...]:
    """seq of one event from its ``source`` block (see the module docstring)."""
    connector = connector_of(source)
    if connector in ("mysql", "mariadb"):
        return _mysql(source)
    if connector == "postgresql":
        return _postgres(source)
    if connector == "sqlserver":
        commit = source.get("commit_lsn")
        if commit is None:
            return ()
        change = source.get("change_lsn")
        return (
            *_lsn(commit, "commit_lsn"),
            *(_lsn(change, "change_lsn") if change is not None else (0, 0, 0)),
            seq_int(source.get("event_serial_no") or 0, "source.event_serial_no"),
        )
    if connector == "oracle":
        if source.get("scn") is None:
            return ()
        return (seq_int(source.get("commit_scn") or 0, "source.commit_scn"), seq_int(source["scn"], "source.scn"))
    if connector == "mongodb":
        if source.get("sec") is not None:
            secs = seq_int(source["sec"], "source.sec")
        elif source.get("ts_ms") is not None:
            secs = seq_int(source["ts_ms"], "source.ts_ms") // 1000
        else:
            return ()
        return (secs, seq_int(source.get("ord") or 0, "source.ord"))
    return ()


def _mysql(source: dict[str, Any]) -> tuple[int, ...]:
    file_name = source.get("file")
    if isinstance(file_name, str) and file_name:
        digits = file_name.rpartition(".")[2]
        return (
            seq_int(digits, "source.file"),
            seq_int(source.get("pos") or 0, "source.pos"),
            seq_int(source.get("row") or 0, "source.row"),
        )
    if file_name is not None:
        return ()  # "file": "" – a snapshot record outside the binlog (Flink CDC, Debezium 1.9.7 tests)
    gtid = source.get("gtid")
    if isinstance(gtid, str) and (m := _GTID_TAIL.search(gtid)):
        return (seq_int(m.group(1), "source.gtid"),)
    ts_ms = source.get("ts_ms")
    if ts_ms is not None and str(ts_ms) not in ("0", ""):
        return (seq_int(ts_ms, "source.ts_ms"),)
    return ()


def _postgres(source: dict[str, Any]) -> tuple[int, ...]:
    """(last commit LSN, LSN) from ``sequence``; see the module docstring for a null in it."""
    sequence = source.get("sequence")
    lsn = source.get("lsn")
    if isinstance(sequence, str) and sequence:
        parts = loads_exact(sequence)
        if not isinstance(parts, list) or len(parts) != 2:
            raise Reject(f"source.sequence should be a JSON array of two LSNs, got {sequence[:60]!r}")
        last_commit, current = parts
        lsn = current if current is not None else lsn
        if lsn is not None:
            lsn_int = seq_int(lsn, "source.sequence")
            commit = seq_int(last_commit, "source.sequence") if last_commit is not None else lsn_int
            return (commit, lsn_int)
        return (seq_int(last_commit, "source.sequence"),) if last_commit is not None else ()
    if lsn is None:
        return ()
    lsn_int = seq_int(lsn, "source.lsn")
    return (lsn_int, lsn_int)


def _lsn(value: Any, name: str) -> tuple[int, int, int]:
    """SQL Server LSN ``"0000002d:00000620:0003"`` (VLF : block : slot, hexadecimal) → three integers."""
    parts = str(value).split(":")
    if len(parts) != 3 or not all(p and len(p) <= 8 and all(c in "0123456789abcdefABCDEF" for c in p) for p in parts):
        raise Reject(f"source.{name} is not an LSN 'xxxxxxxx:xxxxxxxx:xxxx': {str(value)[:40]!r}")
    return (int(parts[0], 16), int(parts[1], 16), int(parts[2], 16))


def encode_position(connector: str, seq: tuple[int, ...]) -> dict[str, Any]:
    """The ``source`` fields that carry ``seq`` for a connector (inverse of :func:`ordering`)."""
    if connector == "mysql":
        if len(seq) == 3:
            return {"file": f"mysql-bin.{seq[0]:06d}", "pos": Num(str(seq[1])), "row": Num(str(seq[2]))}
        return {"file": "", "pos": Num("0"), "row": Num("0")}
    if connector == "postgresql" and len(seq) == 2:
        return {"lsn": Num(str(seq[1])), "sequence": dumps_exact([str(seq[0]), str(seq[1])])}
    if connector == "sqlserver" and len(seq) == 7:
        lsn = [f"{seq[i]:08x}:{seq[i + 1]:08x}:{seq[i + 2]:04x}" for i in (0, 3)]
        return {"commit_lsn": lsn[0], "change_lsn": lsn[1], "event_serial_no": Num(str(seq[6]))}
    if connector == "oracle" and len(seq) == 2:
        return {"commit_scn": str(seq[0]), "scn": str(seq[1])}
    if connector == "mongodb" and len(seq) == 2:
        return {"sec": Num(str(seq[0])), "ord": Num(str(seq[1]))}
    if not seq:
        return {}
    raise ValueError(f"{connector} cannot carry seq {seq}")
