"""The operator projection's names in the store, without SQLAlchemy: its tables' prefix, the
layout version of its tables and its name in the tracking table. tables.py defines the tables
with them; ``status`` reads the rows through a plain DB-API connection (status_rows.py)."""
from __future__ import annotations

PREFIX = "schedfence_proj_"
# Bump on any change to tables.py: a stored projection of another version is rebuilt.
# v4: ``version`` and ``folded`` on key and schedule rows of the aggregates table, or (another
# v4, never released) the ``start_lag`` table; v5: both. v6 (never released): forward
# migrations' folded rows (kind ``forward``), their events indexed under their key; or
# ``job_id`` on migration rows and ``CreatedByMigration`` registered; v7: all of these; v8:
# ``job_id`` on a forward migration's aggregate row.
SCHEMA_VERSION = 8
PROJECTION = "schedfence_operator"  # FenceProjection.name: its tracking row's projection
