"""Test support that ships with the package: the fake llama-server (`fake_server`),
recordings (`recording`), the recorder, and the real server's build and launcher.

Nothing is imported here, so `python -m boxmaker.testing.fake_server` runs one copy of it.
"""
