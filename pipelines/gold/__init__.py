"""Gold: apply each micro-batch of silver changes to one mirror Delta table per source table.

A source is a whole database: hundreds of tables in one topic. So a batch is not a loop over its tables.
Anything that can be decided for all tables at once is, in one pass; what stays per table is the one write
of each mirror that is due, with every decision already made (:mod:`~pipelines.gold.stage`)::

    silver changes of a batch ──► batch pass (all tables at once)             ──► table pass (per due mirror)
                                  checks, keys, staleness, counts, the change       one MERGE, or an append where
                                  checks, the fold, against key state shared        no key is in the mirror yet
                                  by all mirrors; one write of that state
                                            │
                                            └─► due: merged now (hot tables, a run until caught up) or
                                                waiting in ``pending`` within its freshness budget

1. **Plan** – :mod:`~pipelines.gold.profile` (one Spark job: columns and the types messages state, image
   shapes, keys, truncates per table) and :mod:`~pipelines.gold.plan`: each table's mirror, key and shape.
   :mod:`~pipelines.gold.schema` follows the source's schema: ADD COLUMN and Delta-allowed widening evolve
   the mirror; DROP, RENAME, narrowing and unrelated types follow the table's ``schema_changes`` policy.
2. **Decide** – :mod:`~pipelines.gold.decide`, with each table's types as lookups
   (:mod:`~pipelines.gold.lookups`): a value that does not fit its column sends its change to quarantine
   with the column and value named (never a silent NULL); a change older than key state's sequence for its
   key, or than a TRUNCATE, is stale (an equal sequence re-applies: a retried batch is idempotent); the
   change checks are counted; the fresh changes fold per key (:mod:`~pipelines.gold.fold`: a partial UPDATE
   overlays the columns it carries, DELETE removes the row, a key change also deletes the old key).
3. **Choose** – :mod:`~pipelines.gold.due`: the mirrors to write now.
4. **Write** – key state, pending changes and quarantine, once for the batch (:mod:`~pipelines.gold.state`);
   per due mirror, its write (:mod:`~pipelines.gold.keyed`; :mod:`~pipelines.gold.multiset` for a table
   without a key; :mod:`~pipelines.gold.truncate`; the SCD type 2 history, :mod:`~pipelines.gold.history`),
   side by side (:mod:`~pipelines.gold.parallel`); the batch's ``dq_results`` rows in one append.

Every write is idempotent (:mod:`~pipelines.gold.batch`): a mirror's MERGE carries a Delta
``txnAppId``/``txnVersion`` stamp, an append a commit marker looked for where the batch may be a retry, and
the state tables are read as of before the batch, so a retry decides as its first attempt did.

Modules, bottom to top: ``order``, ``identity``, ``lookups``, ``schema`` → ``profile``, ``batch``, ``fold``,
``state``, ``due``, ``truncate`` → ``plan``, ``history``, ``keyed``, ``multiset`` → ``decide`` → ``stage``
(the entry points :func:`~pipelines.gold.stage.apply_gold_batch` and :func:`~pipelines.gold.stage.start_gold`).
"""
