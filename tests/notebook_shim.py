"""Run a Databricks source-format notebook (``notebooks/*.py``) as plain Python on local Spark.

Databricks gives a notebook the globals ``spark``, ``dbutils``, ``display`` and ``displayHTML``, and
reads cells separated by ``# COMMAND ----------``, with ``# MAGIC %md`` (markdown), ``# MAGIC %sql``
and ``# MAGIC %run ./other`` cells (the source format Databricks exports; see "Export and import
Databricks notebooks" in the Databricks documentation). This module gives the same globals:

* ``dbutils.widgets``: ``text``, ``dropdown``, ``combobox``, ``multiselect``, ``get``, ``getArgument``,
  ``remove``, ``removeAll``. Values passed to :func:`run_notebook` win over the defaults, and a
  dropdown refuses a value not among its choices, as on Databricks.
* ``dbutils.fs.ls``: local directories as ``FileInfo(path, name, size, modificationTime)``, directory
  names ending in ``/`` as on Databricks.
* ``display`` really renders: a Spark DataFrame through ``.limit(n).toPandas()``, a pandas frame as is,
  a matplotlib figure as PNG bytes. Each is kept in :attr:`NotebookRun.displays` for the test to assert on.

``%md`` cells are skipped, ``%sql`` cells run through ``spark.sql`` (each statement; the last result is
displayed), ``%run`` executes the named notebook in the same namespace. Any other magic fails the run.
An error names the notebook and cell, and its traceback shows the cell's own lines.
"""

from __future__ import annotations

import datetime as dt
import io
import linecache
import os
import re
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
DISPLAY_ROWS = 1000

FileInfo = namedtuple("FileInfo", "path name size modificationTime")


@dataclass
class Displayed:
    """What one ``display`` call showed: a frame (``kind`` "table"), PNG bytes ("figure") or HTML."""

    notebook: str
    cell: int
    kind: str
    value: Any

    @property
    def columns(self) -> list[str]:
        return list(self.value.columns) if self.kind == "table" else []


@dataclass
class NotebookRun:
    notebook: str
    displays: list[Displayed] = field(default_factory=list)
    printed: list[str] = field(default_factory=list)
    namespace: dict = field(default_factory=dict)
    started: dt.datetime | None = None  # local wall-clock time, as Spark's collected timestamps are
    finished: dt.datetime | None = None

    def tables(self) -> list[Displayed]:
        return [d for d in self.displays if d.kind == "table"]

    def figures(self) -> list[Displayed]:
        return [d for d in self.displays if d.kind == "figure"]

    def table_with(self, *columns: str):
        """The one displayed table whose columns include ``columns`` (a pandas frame)."""
        found = [d.value for d in self.tables() if set(columns) <= set(d.columns)]
        assert len(found) == 1, f"{self.notebook}: {len(found)} displayed tables with columns {columns}"
        return found[0]


class NotebookError(RuntimeError):
    pass


class _Widgets:
    def __init__(self, values: dict[str, str]) -> None:
        self._given = dict(values)
        self._values: dict[str, str] = {}

    def _define(self, name: str, default: str, choices: list[str] | None = None) -> None:
        if name in self._values:  # Databricks keeps a widget's current value when the cell runs again
            return
        value = self._given.get(name, default)
        if choices is not None and value not in choices:
            raise ValueError(f"widget {name!r}: {value!r} is not one of {choices}")
        self._values[name] = value

    def text(self, name: str, defaultValue: str = "", label: str | None = None) -> None:  # noqa: N803
        self._define(name, defaultValue)

    def dropdown(self, name: str, defaultValue: str, choices: list[str], label: str | None = None) -> None:  # noqa: N803
        if defaultValue not in choices:
            raise ValueError(f"widget {name!r}: default {defaultValue!r} is not one of {choices}")
        self._define(name, defaultValue, list(choices))

    def combobox(self, name: str, defaultValue: str, choices: list[str], label: str | None = None) -> None:  # noqa: N803
        self._define(name, defaultValue)

    def multiselect(self, name: str, defaultValue: str, choices: list[str], label: str | None = None) -> None:  # noqa: N803
        self._define(name, defaultValue)

    def get(self, name: str) -> str:
        if name not in self._values:
            raise KeyError(f"InputWidgetNotDefined: no widget named {name!r}")
        return self._values[name]

    getArgument = get  # noqa: N815

    def remove(self, name: str) -> None:
        self._values.pop(name, None)

    def removeAll(self) -> None:  # noqa: N802
        self._values.clear()


class _Fs:
    def ls(self, path: str) -> list[FileInfo]:
        local = path.removeprefix("file:")
        if not os.path.exists(local):
            raise FileNotFoundError(f"java.io.FileNotFoundException: File {path} does not exist.")
        if os.path.isfile(local):
            st = os.stat(local)
            return [FileInfo(path, os.path.basename(local), st.st_size, int(st.st_mtime * 1000))]
        out = []
        for name in sorted(os.listdir(local)):
            full = os.path.join(local, name)
            is_dir = os.path.isdir(full)
            st = os.stat(full)
            out.append(
                FileInfo(
                    f"{path.rstrip('/')}/{name}" + ("/" if is_dir else ""),
                    name + ("/" if is_dir else ""),
                    0 if is_dir else st.st_size,
                    int(st.st_mtime * 1000),
                )
            )
        return out


class DBUtils:
    def __init__(self, widgets: dict[str, str]) -> None:
        self.widgets = _Widgets(widgets)
        self.fs = _Fs()


def split_cells(source: str) -> list[str]:
    if not source.startswith(HEADER):
        raise NotebookError(f"not a Databricks source notebook (first line must be {HEADER!r})")
    return [cell.strip("\n") for cell in source[len(HEADER) :].split(SEPARATOR)]


def _magic(cell: str) -> tuple[str, str] | None:
    """(command, body) of a ``# MAGIC %cmd`` cell; None for a Python cell."""
    lines = [ln for ln in cell.splitlines() if ln.strip()]
    if not lines or not all(ln.startswith(MAGIC) for ln in lines):
        if any(ln.startswith(MAGIC) for ln in lines):
            raise NotebookError("a cell mixes MAGIC lines with Python")
        return None
    text = "\n".join(ln[len(MAGIC) :].removeprefix(" ") for ln in cell.splitlines() if ln.startswith(MAGIC))
    m = re.match(r"\s*%(\w+)\s?(.*)", text, re.S)
    if not m:
        raise NotebookError(f"MAGIC cell without a %command: {text[:60]!r}")
    return m.group(1), m.group(2)


def _sql_statements(body: str) -> list[str]:
    """Split on ``;`` outside quotes and backticks (enough for notebook SQL)."""
    out, buf, quote = [], [], None
    for ch in body:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == ";":
            out.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    out.append("".join(buf))
    return [
        s.strip() for s in out if s.strip() and not all(ln.strip().startswith("--") for ln in s.strip().splitlines())
    ]


def _render(value: Any, limit: int) -> tuple[str, Any]:
    from pyspark.sql import DataFrame

    try:
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    except ImportError:  # pragma: no cover - Spark Connect not installed
        ConnectDataFrame = DataFrame  # noqa: N806
    if isinstance(value, (DataFrame, ConnectDataFrame)):
        return "table", value.limit(limit).toPandas()
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        return "table", value.head(limit).copy()
    from matplotlib.figure import Figure

    if isinstance(value, Figure):
        buf = io.BytesIO()
        value.savefig(buf, format="png")
        return "figure", buf.getvalue()
    raise TypeError(f"display() of {type(value).__name__} is not supported")


def run_notebook(path: Path | str, spark: Any, widgets: dict[str, str] | None = None) -> NotebookRun:
    """Execute every cell of a Databricks source notebook; raise :class:`NotebookError` on the first failure."""
    import matplotlib

    matplotlib.use("Agg")
    path = Path(path)
    run = NotebookRun(path.name)
    current = {"cell": 0, "notebook": path.name}

    def display(value: Any, *args: Any, **kwargs: Any) -> None:
        kind, shown = _render(value, DISPLAY_ROWS)
        run.displays.append(Displayed(current["notebook"], current["cell"], kind, shown))

    def display_html(html: str) -> None:
        run.displays.append(Displayed(current["notebook"], current["cell"], "html", html))

    def capture_print(*args: Any, **kwargs: Any) -> None:
        buf = io.StringIO()
        print(*args, **{**kwargs, "file": buf})
        run.printed.append(buf.getvalue())
        print(*args, **kwargs)

    ns: dict[str, Any] = {
        "__name__": "__main__",
        "spark": spark,
        "dbutils": DBUtils(widgets or {}),
        "display": display,
        "displayHTML": display_html,
        "print": capture_print,
    }
    run.namespace = ns
    run.started = dt.datetime.now()
    _execute(path, ns, current, spark, display)
    run.finished = dt.datetime.now()
    return run


def _execute(path: Path, ns: dict, current: dict, spark: Any, display: Any) -> None:
    saved = dict(current)
    current["notebook"] = path.name
    for number, cell in enumerate(split_cells(path.read_text(encoding="utf-8")), start=1):
        current["cell"] = number
        where = f"{path.name} cell {number}"
        magic = _magic(cell)
        try:
            if magic is None:
                filename = f"<notebook {path.name} cell {number}>"
                linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
                exec(compile(cell, filename, "exec"), ns)  # noqa: S102 - running the notebook is the point
            elif magic[0] == "md":
                continue
            elif magic[0] == "sql":
                result = None
                for statement in _sql_statements(magic[1]):
                    result = spark.sql(statement)
                if result is not None and result.columns:
                    display(result)
            elif magic[0] == "run":
                target = (path.parent / magic[1].strip()).with_suffix(".py")
                _execute(target, ns, current, spark, display)
            else:
                raise NotebookError(f"%{magic[0]} cells are not supported by the test shim")
        except NotebookError:
            raise
        except Exception as exc:
            raise NotebookError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
    current.update(saved)
