"""The test kit that ships with the package, as `trio.testing` does: a fake llama-server that
behaves like the real one on the wire (`FakeLlamaServer`, in process or on a TCP port),
recordings of the real server and their replay, and the shape of a response (what holds the
fake to the real server). `python -m boxmaker.testing` runs the fake on a TCP port.

The developer tools that make recordings, build the real server and measure (`bxdev/` at the
top of the repository) are not part of the package.
"""

from ._tcp import serve_tcp
from .fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing
from .fake_tools import FakeTools
from .recording import Exchange, Recording, RecordingError, dump_recording, load_recording
from .shape import Shape, response_shape
from .transport import CUT, Connected, FakeResponse, Handler, Refused

__all__ = [
    "CUT",
    "Connected",
    "Exchange",
    "FakeLlamaServer",
    "FakeResponse",
    "FakeTools",
    "Fault",
    "FaultKind",
    "Handler",
    "Recording",
    "RecordingError",
    "Refused",
    "Reply",
    "Shape",
    "Timing",
    "dump_recording",
    "load_recording",
    "response_shape",
    "serve_tcp",
]
