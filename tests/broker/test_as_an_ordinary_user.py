"""The walls hold whoever runs brokerd: run as root (as CI runs), this test runs every test
marked `walls` (the sandbox's, the roots', brokerd's hands) again as an ordinary user, dropped
to with `setpriv --reuid/--regid/--clear-groups`. No user is added to the machine: the uid has
no account. That user cannot reach root's own folders (the venv's Python lives there, and the
checkout may), so the run happens in a mount namespace of its own: the checkout bound at
`/mnt/repo`, run by the system's Python of the same version with the venv's packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ORDINARY = 65532  # a uid with no account, not the sandbox's own (65533)
STAGED = "/mnt"


def test_the_walls_hold_for_an_ordinary_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("these tests run as an ordinary user already")
    python = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    missing = [tool for tool in ("unshare", "setpriv", "mount") if shutil.which(tool) is None]
    if not python.exists() or missing:
        message = f"needs {python} and {', '.join(missing) or 'util-linux'}"
        if os.environ.get("BOXMAKER_REQUIRE_SANDBOX"):
            pytest.fail(message)
        pytest.skip(message)
    home = Path(tempfile.mkdtemp(prefix="bx-ordinary-", dir="/tmp"))
    try:
        os.chown(home, ORDINARY, ORDINARY)
        repo = f"{STAGED}/repo"
        packages = [p for p in sys.path if p.endswith("site-packages") and p.startswith(str(REPO))]
        path = ":".join([f"{repo}/src", repo, *(p.replace(str(REPO), repo) for p in packages)])
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "PYTHONPATH": path,
            "PYTHONDONTWRITEBYTECODE": "1",
            "BOXMAKER_REQUIRE_SANDBOX": os.environ.get("BOXMAKER_REQUIRE_SANDBOX", ""),
        }
        stage = ('mount -t tmpfs -o mode=0755 bx-repo "$1" && mkdir "$1/repo" && '
                 'mount --bind "$2" "$1/repo" && cd "$1/repo" && shift 2 && exec "$@"')  # fmt: skip
        command = [
            "unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", stage, "sh", STAGED, str(REPO),
            "setpriv", f"--reuid={ORDINARY}", f"--regid={ORDINARY}", "--clear-groups", "--",
            str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "walls",
            f"--basetemp={home}/tmp", "tests/broker",
        ]  # fmt: skip
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900,
                              check=False)  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)
    summary = done.stdout.strip().splitlines()[-1:] or [done.stderr[-2000:]]
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary[0], summary
    assert "skipped" not in summary[0], summary
