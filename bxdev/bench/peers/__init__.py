"""Row 8 of `make bench`, the peers side by side (`row.run`): loopd against pydantic-ai, the
OpenAI Agents SDK and `llm`, each in a virtual environment the row makes (`venvs`, pinned by
`requirements/*.txt`), driven by `drive.py` in that environment, seen through a recording
proxy (`proxy.py`), read by `checks` and written by `report`.

`drive.py` and `proxy.py` run as scripts (`python -P FILE`), `drive.py` under a peer's own
Python: they import nothing from here, and this package imports neither.
"""
