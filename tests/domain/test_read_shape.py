"""One read shape of a migration: the projection's row, the service's view and their JSON
documents carry the same names, made in one place (domain.migration.read_shape)."""
from __future__ import annotations

import dataclasses

from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.read_shape import READ_FIELDS, read_shape
from schedfence.infra.application.views import MigrationView
from schedfence.projections import tables
from schedfence.projections.records import MigrationRow


def _state():
    m = Migration.assign_request_id(
        "00000000-0000-0000-0000-000000000001", namespace="ns", schedule_id="s",
        source_id="00000000-0000-0000-0000-000000000002", incarnation=1, workflow_id="wf",
        request_id="R", origin="caller", pre_paused=False, pre_notes="", claim_armed=True)
    return m.state


def test_the_read_shape_names_are_the_declared_ones():
    assert tuple(read_shape(_state())) == READ_FIELDS


def test_view_row_and_table_all_carry_the_read_shape():
    for shape in (MigrationView, MigrationRow):
        assert set(READ_FIELDS) <= {f.name for f in dataclasses.fields(shape)}, shape
    columns = set(tables.migrations.c.keys())
    assert set(READ_FIELDS) <= columns


def test_the_view_is_the_read_shape_of_the_state():
    state = _state()
    doc = MigrationView.of(state, 1).to_dict()
    assert {k: doc[k] for k in READ_FIELDS} == read_shape(state)
    assert (doc["state"], doc["request_id_origin"], doc["destination_first_run_id"]) == \
        ("pending", "caller", None)
