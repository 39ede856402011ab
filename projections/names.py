"""The operator projection's names in the store, without SQLAlchemy: its tables' prefix, the
layout version of its tables and its name in the tracking table. tables.py defines the tables
with them; ``status`` reads the rows through a plain DB-API connection (status_rows.py)."""
from __future__ import annotations

PREFIX = "schedfence_proj_"
# Bump on any change to tables.py: a stored projection of another version is rebuilt.
# v4: ``version`` and ``folded`` on key and schedule rows of the aggregates table, or (another
# v4, never released) the ``start_lag`` table; v5: both; v6: ``job_id`` on migration rows,
# and the incarnations a forward migration created (``CreatedByMigration``) registered.
SCHEMA_VERSION = 6
PROJECTION = "schedfence_operator"  # FenceProjection.name: its tracking row's projection
