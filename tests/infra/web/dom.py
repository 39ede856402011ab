"""A page as a tree of elements (the standard library's HTML parser), with the little CSS the
overview tests select by: ``tag``, ``#id`` and ``.class`` parts, joined by descendant spaces."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = {"br", "input", "meta", "link", "img", "hr"}
_BREAKS = {"td", "th", "tr", "li", "div", "p", "br", "dt", "dd", "h1", "h2", "h3", "table",
           "summary", "details", "option", "label", "title", "header", "main", "nav"}
_PART = re.compile(r"([#.]?)([\w-]+)")


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    # -- reading ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        return " ".join(self._raw().split())

    def _raw(self) -> str:
        inner = "".join(c if isinstance(c, str) else c._raw() for c in self.children)
        return f" {inner} " if self.tag in _BREAKS else inner

    def _matches(self, simple: str) -> bool:
        classes = self.attrs.get("class", "").split()
        for kind, name in _PART.findall(simple):
            if (kind == "" and self.tag != name) or (kind == "#" and self.attrs.get("id") != name) \
                    or (kind == "." and name not in classes):
                return False
        return True

    def _descendants(self) -> list[Node]:
        out = []
        for c in self.children:
            if isinstance(c, Node):
                out.append(c)
                out += c._descendants()
        return out

    def select(self, css: str) -> list[Node]:
        found = [self]
        for simple in css.split():
            found = list({id(n): n for f in found for n in f._descendants()
                          if n._matches(simple)}.values())
        return found

    def one(self, css: str) -> Node:
        [node] = self.select(css)
        return node

    # -- what the tests read ---------------------------------------------------------------
    def text_of(self, css: str) -> str:
        return self.one(css).text

    def rows(self, table: str) -> list[Node]:
        """The body rows of the tables ``table`` selects that carry data attributes."""
        return [r for r in self.select(f"{table} tbody tr")
                if any(k.startswith("data-") for k in r.attrs)]

    def cell(self, cls: str) -> str:
        return self.one(f"td.{cls}").text

    def texts(self) -> list[str]:
        return [c.text for c in self.select("td")]

    def links(self, css: str = "") -> dict[str, str]:
        """Text -> href of the links under ``css`` (the whole page without it)."""
        return {a.text: a.attrs.get("href", "") for a in self.select(f"{css} a".strip())}

    def all_links(self, css: str) -> list[tuple[str, str]]:
        return [(a.text, a.attrs.get("href", "")) for a in self.select(f"{css} a")]

    def row_links(self, table: str, key: str) -> dict[str, str]:
        [row] = [r for r in self.rows(table) if r.attrs.get("data-key") == key]
        return row.links()

    def counts(self) -> dict[str, dict[str, int]]:
        """Each counts table (by its id): row label -> number."""
        return {t.attrs["id"]: {r.one("th").text: int(r.one("td.n").text)
                                for r in t.select("tbody tr")}
                for t in self.select("table.counts")}

    def table_classes(self, css: str) -> list[str]:
        return [t.attrs.get("class", "") for t in self.select(css)]

    def header_cells(self, table: str) -> list[str]:
        return [th.text for th in self.select(f"{table} thead th")]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("document")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):  # close up to the matching open tag
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root
