"""Gold: apply each micro-batch of silver changes to one mirror Delta table per source table.

A micro-batch is profiled once for every table it touches (:mod:`~pipelines.gold.profile`: one
Spark job for columns and the types messages state, image shapes, keys, truncates). Then, per
table, the stages below (:mod:`~pipelines.gold.stage`); the MERGE per mirror is Delta's floor (one
commit per table), everything else is shared or metadata only.

1. **Shape** – :mod:`~pipelines.gold.schema`: the mirror's columns are the union of what
   messages carry, typed by configuration first, else by the types messages state. ADD COLUMN
   and Delta-allowed widening evolve the mirror; DROP, RENAME, narrowing and unrelated types
   follow the table's ``schema_changes`` policy (default ``fail``).
2. **Check** – :mod:`~pipelines.gold.validate`: canonical text must convert to the Delta type. A
   value that does not fit (overflow, too many decimal places, sub-microsecond time, bad Base64)
   sends its change to quarantine with the column and value named; it never becomes a silent
   NULL. So do changes a ``quarantine`` schema policy holds back, and those a ``drop``
   expectation rejects (the quality hooks in :mod:`~pipelines.gold.stage`).
3. **Truncate** – :mod:`~pipelines.gold.truncate`: empties the mirror as of its sequence; older
   changes are stale, in this batch and later ones (the sequence is kept as the table property
   ``lakecdc.truncated_seq``).
4. **Apply**, for a table with a key (or a vendor row id): :mod:`~pipelines.gold.keyed`.
   Order by the format's sequence, then queue position, then place in the message
   (:mod:`~pipelines.gold.order`); skip what is older than the mirror or its tombstones hold for
   that key (an equal sequence re-applies: that is what makes a retried batch idempotent); fold
   per key (:mod:`~pipelines.gold.fold`: INSERT/SNAPSHOT and full-image UPDATEs replace the row, a
   partial UPDATE overlays the columns it carries, a column carried as NULL becomes NULL, DELETE
   removes it, a key change also deletes the old key); one MERGE into the mirror (live rows only)
   and one into its tombstones; the SCD type 2 history where configured
   (:mod:`~pipelines.gold.history`).
   For a table without one: multiset semantics (:mod:`~pipelines.gold.multiset`).

Every MERGE and append is stamped with Delta ``txnAppId``/``txnVersion`` through one
:class:`~pipelines.gold.batch.BatchContext`, so a retried batch is applied once.

Modules, bottom to top: ``order``, ``schema`` → ``profile``, ``batch``, ``fold`` → ``validate``,
``truncate``, ``history`` → ``keyed``, ``multiset`` → ``stage`` (the entry points
:func:`~pipelines.gold.stage.apply_gold_batch` and :func:`~pipelines.gold.stage.start_gold`).
"""
