"""The keys of the configuration file, declared once: every section's keys with their type, default and
a one-line description. The validator allows exactly these keys (its "unknown field" checks), and
:func:`reference_markdown` renders them as the configuration reference.

A default is the YAML value a missing key stands for, or, in parentheses, what it means when it is
not a plain value (``(required)``, ``(the top-level `schema_changes`)``).

Longer than 400 lines because it is a table, not logic: one declaration per key of the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.config.model import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_GOLD_MAX_DELAY,
    DEFAULT_GOLD_MAX_PENDING,
    DEFAULT_GOLD_PARALLELISM,
    DEFAULT_INVALID_VALUE_POLICY,
    DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    DEFAULT_NEW_MIRRORS_PER_BATCH,
    DEFAULT_SCHEMA_POLICY,
    DEFAULT_TABLE_FEATURES,
    DELETE_MODES,
    INVALID_VALUE_POLICIES,
    MAX_CLUSTER_COLUMNS,
    MAX_GOLD_PARALLELISM,
    SCHEMA_POLICIES,
    TABLE_FEATURES,
    TYPE_MAPPINGS,
)
from pipelines.formats.base import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_WIDTH,
)
from pipelines.layout import LAYERS
from pipelines.quality.rules import DEFAULT_FRESHNESS_TEXT


@dataclass(frozen=True)
class Field:
    """One key: its name, the type of its value as people read it, its default, what it does."""

    name: str
    type_text: str
    default: str
    doc: str


@dataclass(frozen=True)
class Section:
    """The keys of one mapping of the file; ``name`` is where it sits (``""``: the top level)."""

    name: str
    doc: str
    fields: tuple[Field, ...]

    def names(self) -> set[str]:
        return {f.name for f in self.fields}


_SCHEMA_POLICY_TYPE = " | ".join(SCHEMA_POLICIES)
_INVALID_VALUE_TYPE = " | ".join(INVALID_VALUE_POLICIES)
_LIMIT_TYPE = "positive integer"
_TABLE_PATTERNS = "list of table names or glob patterns (`db.table`, `shop.*`)"

TOP_LEVEL = Section(
    "",
    "The file is one mapping; `sources` is the only key without a default.",
    (
        Field("warehouse", "string (a directory)", "./warehouse", "Directory the tables live in (without `catalog`)."),
        Field(
            "catalog",
            "string",
            "null",
            "Unity Catalog catalog of the tables; then every layer needs a schema, and `checkpoints` is required.",
        ),
        Field("schema", "string", "null", "Schema of the tables of every layer in the catalog."),
        Field(
            "metrics_file",
            "string (a file path)",
            "(none: no file)",
            "A running pipeline writes its metrics there after every gold batch (Prometheus text format, "
            "atomically), for a node-exporter textfile collector (docs/operations.md).",
        ),
        Field("schemas", "mapping (see `schemas`)", "{}", "A layer's own schema in the catalog, over `schema`."),
        Field(
            "checkpoints",
            "string (a path)",
            "(`<warehouse>/_checkpoints`; required with catalog)",
            "Where the streams keep their checkpoints: a durable path such as a Unity Catalog volume.",
        ),
        Field(
            "trigger",
            "available_now | continuous",
            "available_now",
            "available_now: each stage runs until caught up, then stops; continuous: all stages run together.",
        ),
        Field(
            "processing_time",
            "string (a Spark trigger interval)",
            "10 seconds",
            "With `trigger: continuous` (and no `--once`), a micro-batch this often (`10 seconds`, `1 minute`).",
        ),
        Field(
            "queries",
            "per_stage | one",
            "per_stage",
            "per_stage: bronze, silver and gold are three streaming queries; one: a single query lands, decodes "
            "and applies each batch of the sources (one trigger between a message and its mirror). A warehouse "
            "keeps the shape it was first run with.",
        ),
        Field("limits", "mapping (see `limits`)", "{}", "Sizes past which a message is quarantined."),
        Field(
            "sources",
            "list of sources (see `sources[]`)",
            "(required)",
            "One entry per Kafka topic list or landing directory: at least one, names unique.",
        ),
        Field(
            "tables",
            "mapping: `<db>.<table>` → table (see `tables.<name>`)",
            "{}",
            "Per source table as the messages name it: key, column types, mirror name, policies, expectations.",
        ),
        Field(
            "default_table",
            "string (`<db>.<table>`)",
            "null",
            "The table of the messages of a format whose messages name none (oms_debezium_smt).",
        ),
        Field(
            "format_options",
            "mapping: format id → mapping",
            "{}",
            "A format's decoder options, e.g. `drs_avro: {schema: <.avsc file>}`, `source_time_zone`, "
            "a schema registry's settings.",
        ),
        Field(
            "quality_checks",
            "true | false",
            "true",
            "Run the built-in CDC checks and write Data Docs after each gold run.",
        ),
        Field(
            "schema_changes",
            _SCHEMA_POLICY_TYPE,
            DEFAULT_SCHEMA_POLICY,
            "What DROP COLUMN, RENAME, narrowing and unrelated type changes do to the mirrors.",
        ),
        Field(
            "invalid_values",
            _INVALID_VALUE_TYPE,
            DEFAULT_INVALID_VALUE_POLICY,
            "A value the source holds as invalid (a zero date): NULL and a check result, or the change quarantined.",
        ),
        Field("status", "mapping (see `status`)", "{}", "When `lakecdc status` exits 1."),
        Field("gold", "mapping (see `gold`)", "{}", "How gold applies a micro-batch."),
        Field(
            "type_mapping",
            "list of: " + " | ".join(TYPE_MAPPINGS),
            "[]",
            "Trade exact types for a schema that never breaks: to-string (every column STRING, each value's "
            "exact canonical text), bigint-unsigned-to-bigint (values above 2^63-1 quarantined); "
            "tinyint1-not-bool and char-to-string are how lakecdc reads those types anyway (docs/row-options.md).",
        ),
        Field(
            "include",
            _TABLE_PATTERNS,
            "[]",
            "The source tables kept, of every source (empty: every table); the others are counted as skipped.",
        ),
        Field(
            "exclude",
            _TABLE_PATTERNS,
            "[]",
            "Source tables skipped, of every source: counted in `silver.skipped`, never in a mirror or quarantine.",
        ),
    ),
)

GOLD = Section(
    "gold",
    "How gold applies the mirrors a micro-batch touches.",
    (
        Field(
            "parallelism",
            f"positive integer, at most {MAX_GOLD_PARALLELISM}",
            str(DEFAULT_GOLD_PARALLELISM),
            "Tables applied at a time (threads, each with its own Spark session); 1: one after another.",
        ),
        Field(
            "max_delay",
            "duration",
            f"{DEFAULT_GOLD_MAX_DELAY / 60:g} minutes",
            "Continuous runs: a mirror is merged at the latest when its oldest waiting change is this old "
            "(a table's own `max_delay` overrides it). Runs until caught up merge every mirror.",
        ),
        Field(
            "max_pending",
            "positive integer",
            str(DEFAULT_GOLD_MAX_PENDING),
            "Continuous runs: a mirror is merged as soon as this many of its changes wait (a hot table: every batch).",
        ),
        Field("naming", "mapping (see `gold.naming`)", "{}", "How a mirror is named after its source table."),
        Field(
            "table_features",
            " | ".join(TABLE_FEATURES),
            DEFAULT_TABLE_FEATURES,
            "Delta features of a mirror gold creates. `full`: deletion vectors, column mapping, type widening, "
            "documents as VARIANT. `compatible`: none of them, documents as exact JSON text, for readers "
            "without them (docs/readers.md); a mirror keeps what it was created with.",
        ),
    ),
)

NAMING = Section(
    "gold.naming",
    "A mirror's name: the template's parts joined by `__`, between a prefix and a suffix. A name the template "
    "cannot keep plain and unambiguous is hashed (`<slug>___<hash>`); a configured `target` wins.",
    (
        Field(
            "template",
            "`{db}`, `{schema}` and `{table}` joined by `__`; `{db}` and `{table}` required",
            "{db}__{schema}__{table}",
            "The default names mirrors as before; without `{schema}`, OMS's `tenant.database` is two parts "
            "(`{db}__{table}`: `demo_tenant__shop__customers`).",
        ),
        Field(
            "prefix", "lowercase letters, digits, single `_`", "(none)", "Text before every mirror's name, e.g. `ods_`."
        ),
        Field(
            "suffix", "lowercase letters, digits, single `_`", "(none)", "Text after every mirror's name, e.g. `_v2`."
        ),
    ),
)

LIMITS = Section(
    "limits",
    "Bounds. A message past any of the first four is quarantined, not decoded; new tables past the fifth wait; "
    "the last bounds a batch.",
    (
        Field("max_message_bytes", _LIMIT_TYPE, str(DEFAULT_MAX_MESSAGE_BYTES), "Bytes of one message."),
        Field("max_depth", _LIMIT_TYPE, str(DEFAULT_MAX_DEPTH), "Nesting depth of one JSON message."),
        Field("max_width", _LIMIT_TYPE, str(DEFAULT_MAX_WIDTH), "Elements of one JSON array or object."),
        Field("max_elements", _LIMIT_TYPE, str(DEFAULT_MAX_ELEMENTS), "Elements of one message, all levels."),
        Field(
            "new_mirrors_per_batch",
            _LIMIT_TYPE,
            str(DEFAULT_NEW_MIRRORS_PER_BATCH),
            "Mirrors gold creates in one batch; the changes of further new tables wait, durably, for the next "
            "batch (a run until caught up goes on until every one has its mirror).",
        ),
        Field(
            "batch_bytes",
            _LIMIT_TYPE,
            str(DEFAULT_BATCH_BYTES),
            "Bytes of Delta files one silver or gold micro-batch reads at most (Delta's `maxBytesPerTrigger`; a "
            "batch reads at least one file): a backlog catches up in batches the driver holds.",
        ),
    ),
)

STATUS = Section(
    "status",
    "Thresholds of `lakecdc status` (null: not checked; `--max-lag-seconds` overrides it). Staleness is judged "
    "by each source's `freshness`, the setting the `cdc_freshness` check reads too.",
    (
        Field(
            "max_lag_seconds",
            "positive number of seconds",
            "null",
            "Exit 1 when the oldest message or landing file bronze has not read yet is older.",
        ),
        Field(
            "max_staleness_seconds",
            "positive number of seconds",
            "null",
            "The `freshness` of every source that sets none, in seconds (`status` and `cdc_freshness` alike); "
            "`--max-staleness-seconds` stands for every source's `freshness` in one `status` call.",
        ),
    ),
)

SCHEMAS = Section(
    "schemas",
    "With `catalog`: a layer's own schema; a layer not named here uses `schema`.",
    tuple(
        Field(layer, "string", "(the top-level `schema`)", f"Schema of the {layer} tables (it must exist).")
        for layer in LAYERS
    ),
)

SOURCE = Section(
    "sources[]",
    "One queue or landing directory: give exactly one of `path` and `kafka`.",
    (
        Field("name", "string: letters, digits, `_ . -`", "(required)", "The source's name, unique in the file."),
        Field("format", "a format id (`lakecdc formats`) or auto", "(required)", "How its messages are written."),
        Field(
            "path",
            "string (a directory)",
            "null",
            "Landing directory of JSON-lines files, one message per line.",
        ),
        Field("kafka", "mapping (see `sources[].kafka`)", "null", "Read Kafka topics instead of a directory."),
        Field(
            "freshness",
            "string (a duration)",
            DEFAULT_FRESHNESS_TEXT,
            "Stale when the source's newest change or heartbeat (source commit time) is older: `lakecdc status` "
            "exits 1 and the `cdc_freshness` check of its mirrors fails (one setting for both).",
        ),
        Field("include", _TABLE_PATTERNS, "[]", "The tables kept of this source (empty: every table)."),
        Field("exclude", _TABLE_PATTERNS, "[]", "Tables of this source skipped (counted in `silver.skipped`)."),
        Field(
            "type_mapping",
            "list of: " + " | ".join(TYPE_MAPPINGS),
            "(the top-level `type_mapping`)",
            "This source's tables' type mappings, over the top level's (docs/row-options.md).",
        ),
        Field(
            "ignore_null_updates",
            "true | false",
            "false",
            "A NULL in this source's UPDATE images means the column did not change (a table's own setting wins).",
        ),
    ),
)

KAFKA = Section(
    "sources[].kafka",
    "A Kafka source: give exactly one of `topics` and `topic_pattern`.",
    (
        Field("bootstrap_servers", "string (host:port, ...)", "(required)", "The brokers to connect to."),
        Field("topics", "list of strings (or one string)", "[]", "The topics to read."),
        Field("topic_pattern", "string (a regular expression)", "null", "Read every topic whose name matches."),
        Field(
            "starting_offsets",
            "earliest | latest | JSON offsets per partition",
            "earliest",
            'Where a stream with no checkpoint starts, e.g. `{"topic": {"0": 23, "1": -2}}`.',
        ),
        Field(
            "max_offsets_per_trigger",
            "positive integer",
            str(DEFAULT_MAX_OFFSETS_PER_TRIGGER),
            "At most this many messages per micro-batch: a backlog catches up in batches the driver holds.",
        ),
        Field(
            "fail_on_data_loss",
            "true | false",
            "true",
            "Stop loudly when messages were aged out of the topic before they were read.",
        ),
        Field(
            "security",
            "mapping: setting → string",
            "{}",
            "kafka.* security settings (SASL, SSL); a value `${VAR}` is read from the environment.",
        ),
        Field("options", "mapping: setting → string", "{}", "Other kafka.* client options."),
    ),
)

TABLE = Section(
    "tables.<name>",
    "A source table, named `<db>.<table>` as its messages name it.",
    (
        Field(
            "key",
            "list of column names (or `a, b`)",
            "[]",
            "The primary key, used where messages carry none; its columns must be among `columns`.",
        ),
        Field(
            "columns",
            "mapping: column → type",
            "{}",
            "Column types as the source database names them (bigint, decimal(12,2), varchar(64), datetime, "
            "...); they win over the messages' own.",
        ),
        Field(
            "target",
            "string",
            "(the name `gold.naming` gives the source table)",
            "The mirror's name; in a catalog `<table>` or `<schema>.<table>`.",
        ),
        Field(
            "expectations",
            "list of rules",
            "[]",
            "Great Expectations rules: name, expect, column ..., or name, sql (a boolean over the mirror's "
            "columns); action warn | drop | fail.",
        ),
        Field(
            "columns_include",
            "list of column names",
            "(every column)",
            "The only columns kept: silver drops the others, so no mirror, history, quarantine or check sees them.",
        ),
        Field(
            "columns_exclude",
            "list of column names",
            "[]",
            "Columns silver drops (not with `columns_include`; never a key column); bronze keeps the raw message.",
        ),
        Field(
            "cluster_by",
            f"list of at most {MAX_CLUSTER_COLUMNS} column names",
            "[]",
            "Delta liquid clustering columns of the mirror (none: not clustered).",
        ),
        Field(
            "from",
            "list of regular expressions (Python `re`) over `db.table`",
            "[]",
            "Every source table whose whole name matches feeds this one mirror (shards), its name in the column "
            "`_source_table`; a table matching two entries is refused (docs/row-options.md).",
        ),
        Field(
            "deletes",
            " | ".join(DELETE_MODES),
            "hard",
            "soft: a DELETE keeps the row with `_deleted` true and `_deleted_at` its event time, a TRUNCATE marks "
            "every row, a later INSERT revives it; needs a key (docs/row-options.md).",
        ),
        Field(
            "type_mapping",
            "list of: " + " | ".join(TYPE_MAPPINGS),
            "(the source's, else the top-level `type_mapping`)",
            "This table's type mappings (docs/row-options.md).",
        ),
        Field(
            "computed",
            "mapping: column → Spark SQL expression",
            "{}",
            "Columns gold adds to the mirror, each an expression over the row's typed columns, evaluated at apply; "
            "a row it fails on is quarantined (docs/row-options.md).",
        ),
        Field(
            "partition_by",
            "list of column names (or computed columns)",
            "[]",
            "Delta partition columns of the mirror, set when gold creates it (not with `cluster_by`).",
        ),
        Field(
            "where",
            "string (a Spark SQL boolean over the row's columns)",
            "null",
            "Only rows that match are in the mirror: other changes are counted `skipped`, an UPDATE that leaves "
            "the filter deletes the row, one that enters it inserts it (docs/row-options.md).",
        ),
        Field(
            "ignore_null_updates",
            "true | false",
            "(the source's `ignore_null_updates`)",
            "A NULL in an UPDATE image means the column did not change (sources that send NULL for unchanged).",
        ),
        Field(
            "schema_changes",
            _SCHEMA_POLICY_TYPE,
            "(the top-level `schema_changes`)",
            "This table's policy for DROP COLUMN, RENAME, narrowing and unrelated type changes.",
        ),
        Field(
            "history",
            "true | false | mapping (see `tables.<name>.history`)",
            "false",
            "Also keep an SCD type 2 history (valid from/to) of the mirror; a mapping chooses the columns tracked.",
        ),
        Field(
            "max_delay",
            "duration",
            "(`gold.max_delay`)",
            "Continuous runs: the longest this table's changes wait before its mirror is merged.",
        ),
        Field(
            "invalid_values",
            _INVALID_VALUE_TYPE,
            "(the top-level `invalid_values`)",
            "This table's policy for a value the source holds as invalid.",
        ),
    ),
)

HISTORY = Section(
    "tables.<name>.history",
    "The history of chosen columns: give exactly one key. `history: true` tracks every column.",
    (
        Field(
            "columns",
            "list of column names",
            "(every column)",
            "A new version only when one of these columns changes; a change of the others updates the current "
            "version in place (AUTO CDC's `track_history_column_list`).",
        ),
        Field(
            "except_columns",
            "list of column names",
            "[]",
            "A change of only these columns updates the current version in place, no new version (not a key column).",
        ),
    ),
)

#: Every section, in the order of the reference.
SECTIONS = (TOP_LEVEL, SOURCE, KAFKA, TABLE, HISTORY, SCHEMAS, LIMITS, STATUS, GOLD, NAMING)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    """The configuration reference as Markdown: per section a heading, a line and a table of its keys."""
    lines: list[str] = []
    for section in SECTIONS:
        lines += [f"## `{section.name}`" if section.name else "## Top level", "", section.doc, ""]
        lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        for f in section.fields:
            default = f.default[1:-1] if f.default.startswith("(") else f"`{f.default}`"
            lines.append(f"| `{f.name}` | {_cell(f.type_text)} | {_cell(default)} | {_cell(f.doc)} |")
        lines.append("")
    return "\n".join(lines)
