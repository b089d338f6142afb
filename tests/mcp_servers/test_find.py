"""`find_tool` over a registry of more than 300 tools: BM25 over names and descriptions puts
the right tool first for each request written down in `catalog.QUERIES` (issue 30, item 2)."""

from __future__ import annotations

import pytest

from boxmaker.brokerd import find_text
from boxmaker.brokerd.registry import MOST_FOUND
from boxmaker.brokerd.tool_search import ToolIndex

from .catalog import QUERIES, WITHIN_FOUND, catalog

REGISTRY = catalog()


def test_the_catalog_is_big_enough() -> None:
    assert len(REGISTRY.entries) >= 300


@pytest.mark.parametrize(("query", "tool"), QUERIES)
def test_the_right_tool_comes_first(query: str, tool: str) -> None:
    found, _more = REGISTRY.find(query)
    assert [schema.name for schema in found][:1] == [tool]


@pytest.mark.parametrize(("query", "tool"), WITHIN_FOUND)
def test_a_request_by_sense_alone_still_finds_it_among_those_given(query: str, tool: str) -> None:
    found, _more = REGISTRY.find(query)
    assert tool in [schema.name for schema in found]


def test_at_most_the_best_few_are_given_and_the_rest_counted() -> None:
    found, more = REGISTRY.find("delete")
    deletes = [e for e in REGISTRY.entries if e.schema.name.split(".")[-1].startswith("delete")]
    assert len(found) == MOST_FOUND
    assert more == len(deletes) - MOST_FOUND
    text = find_text(REGISTRY, "delete").content
    assert f"{more} more tools match: ask with other words to see them." in text


def test_words_of_no_tool_find_nothing() -> None:
    assert REGISTRY.find("xylophone") == ([], 0)
    assert REGISTRY.find("the of a") == ([], 0)  # only the commonest words: nothing asked
    assert find_text(REGISTRY, "xylophone").content == "No tool matches."


def test_a_query_cannot_speak_fts5s_syntax() -> None:
    index = ToolIndex([("read_file", "Read a file."), ("shell", "Run a command.")])
    for query in ['"', 'read OR NOT "', "NEAR(read file)", "read*", "col:read", "^read", "\0"]:
        index.search(query, 5)  # never an sqlite3 error
    assert index.search('file" OR shell', 5)[0] == [0, 1]


def test_names_weigh_more_than_descriptions() -> None:
    index = ToolIndex([("notes.append", "Add text; unlike export it keeps the note."),
                       ("notes.export", "Write a note out.")])  # fmt: skip
    assert index.search("export", 5)[0] == [1, 0]
