"""The CLI's tables: drawn by hand for printable ASCII cells, byte for byte what rich draws
(infra/cli/table.py), and by rich itself for any other cell."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from schedfence.infra.cli.table import rich_drawn, table

ASCII = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=12)
ANY = st.text(min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(ASCII, min_size=n, max_size=n),
    st.lists(st.lists(st.one_of(ASCII, st.integers(), st.booleans(), st.none()),
                      min_size=n, max_size=n), max_size=5))))
@example((["A", "B"], [["x ", " y"], [None, True]]))  # spaces kept inside, stripped at the end
def test_ascii_tables_are_drawn_as_rich_draws_them(table_: tuple) -> None:
    headers, rows = table_
    from schedfence.infra.application.display import show
    assert table(headers, rows) == rich_drawn(headers, [[show(c) for c in r] for r in rows])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(ANY, min_size=2, max_size=2), min_size=1, max_size=4))
def test_any_other_cell_is_drawn_by_rich(rows: list) -> None:
    from schedfence.infra.application.display import show
    assert table(["H1", "H2"], rows) == rich_drawn(["H1", "H2"],
                                                   [[show(c) for c in r] for r in rows])


def test_a_wide_character_is_measured_as_a_terminal_shows_it() -> None:
    lines = table(["NAME", "X"], [["日本", "1"], ["ab", "2"]])
    assert lines[2] == "日本   1" and lines[3] == "ab     2"
