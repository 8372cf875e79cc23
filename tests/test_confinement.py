"""What one evaluation can reach, with real processes, in both isolation modes (namespaces
as root, and the rlimits fallback): host Unix sockets, System V memory (its size and its
visibility to the next evaluation), memory summed over processes (cgroup, and the polling
fallback), capabilities, environment, read-only mounts at escaped paths."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from evo import spec
from evo.sandbox import Sandbox, mounts
from evo.sandbox.isolation import namespaces_available

ROOT = Path(__file__).resolve().parents[1]
SCORER = f"{ROOT / 'tests' / 'hostile' / 'scorer.py'}:evaluate"
LIMITS = spec.SandboxLimits(workers=1, timeout=10.0, memory_mb=64, max_processes=64, output_bytes=4096, env=("EVO_DECLARED",))
MODES = [pytest.param("on", id="namespaces"), pytest.param("off", id="rlimits")]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def box(mode: str, **options) -> Sandbox:
    if mode == "on" and not namespaces_available():
        pytest.skip("namespaces need root (and a kernel that allows them)")
    return Sandbox(SCORER, ("a", "b"), LIMITS, required=("key",), namespaces=mode, **options)


@pytest.mark.parametrize("isolation_mode", ["process", "shared"])
@pytest.mark.parametrize("mode", MODES)
def test_a_host_unix_socket_refuses_the_candidate(tmp_path, mode, isolation_mode):
    path = Path(f"/tmp/evo-{uuid.uuid4().hex[:8]}.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        os.chmod(path, 0o777)
        server.listen()
        server.setblocking(False)
        try:
            limits = spec.SandboxLimits(workers=1, timeout=5.0, memory_mb=64, isolation=isolation_mode)
            if mode == "on" and not namespaces_available():
                pytest.skip("namespaces need root")
            with Sandbox(SCORER, ("a", "b"), limits, required=("key",), namespaces=mode) as sandbox:
                connect = f"import socket\nsocket.socket(socket.AF_UNIX).connect({str(path)!r})\n"
                evaluation = sandbox.evaluate(connect)
                pair = sandbox.evaluate("import socket\na, b = socket.socketpair()\na.send(b'x')\nassert b.recv(1) == b'x'\n")
            assert evaluation.failure.kind == "exception" and "Permission denied" in evaluation.failure.message
            assert pair.ok, pair.failure  # socketpair (multiprocessing) still works
            with pytest.raises(BlockingIOError):
                server.accept()
        finally:
            path.unlink()


SYSV = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def bonus():
    found = libc.shmget(0x5EED, 0, 0)  # left by an earlier evaluation?
    made = [libc.shmget(0x5EED + i, 50 << 20, 0o1000 | 0o600) for i in range(6)]
    return 0.5 if found < 0 and made[0] >= 0 and min(made[1:]) < 0 else 0.0
"""


@pytest.mark.parametrize("mode", MODES)
def test_system_v_memory_is_capped_and_gone_for_the_next_evaluation(mode):
    if os.geteuid() != 0:
        pytest.skip("a fresh IPC namespace per evaluation needs root")
    with box(mode) as sandbox:
        first, second = sandbox.evaluate(SYSV), sandbox.evaluate(SYSV)
    assert first.scores.tolist() == [1.0, 0.5] and second.scores.tolist() == [1.0, 0.5], (first, second)


FORKS = """
import os, time
for _ in range(8):
    if os.fork() == 0:
        x = b'1' * (55 << 20)
        time.sleep(2)
        os._exit(0)
time.sleep(0.6)
"""


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "polling"])
@pytest.mark.parametrize("mode", MODES)
def test_memory_is_limited_over_all_processes_of_an_evaluation(mode, cgroup):
    with box(mode, memory_cgroup=cgroup) as sandbox:
        if cgroup and sandbox._workers[0].cgroup is None:
            pytest.skip("no writable memory cgroup on this machine")
        evaluation = sandbox.evaluate(FORKS)  # 8 x 55 MB, each under the per-process cap of 64 MB
        assert evaluation.failure.kind == "memory", evaluation.failure
        assert sandbox.evaluate("x = b'1' * (30 << 20)").ok


PROBE = """
import os
def bonus():
    caps = [line.split()[1] for line in open('/proc/self/status') if line.startswith(('CapEff', 'CapPrm', 'CapBnd', 'CapAmb'))]
    readable = []
    for path in ('/etc/shadow', SECRET_PATH):
        try:
            open(path).read()
            readable.append(path)
        except OSError:
            pass
    env = set(os.environ)
    ok = caps == ['0' * 16] * 4 and not readable and 'EVO_SECRET_KEY' not in env and 'EVO_DECLARED' in env
    return 0.5 if ok else 0.0
"""


@pytest.mark.parametrize("mode", MODES)
def test_the_candidate_has_no_capability_and_a_minimal_environment(tmp_path, mode, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root (to have a capability to lose)")
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    secret.chmod(0o600)
    tmp_path.chmod(0o755)
    monkeypatch.setenv("EVO_SECRET_KEY", "sk-123")
    monkeypatch.setenv("EVO_DECLARED", "yes")
    with box(mode) as sandbox:
        evaluation = sandbox.evaluate(PROBE.replace("SECRET_PATH", repr(str(secret))))
    assert evaluation.ok and evaluation.scores.tolist() == [1.0, 0.5], (evaluation.failure, evaluation.output)


def test_mount_table_paths_are_decoded_from_octal_escapes():
    assert mounts.unescape_mount_path(rb"/mnt/a\040b\011c\134d") == "/mnt/a b\tc\\d"
    assert mounts.unescape_mount_path("/mnt/données".encode()) == "/mnt/données"
    assert mounts.unescape_mount_path(b"/mnt/\xff") == os.fsdecode(b"/mnt/\xff")


ODD_MOUNT = """
import os, sys
from evo import spec
from evo.sandbox import Sandbox, isolation
isolation.unshare(isolation.CLONE_NEWNS)
isolation.mount(None, "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
point = sys.argv[1]
os.makedirs(point)
isolation.mount("tmpfs", point, "tmpfs", 0, "size=1m,mode=1777")
code = f"def bonus():\\n    try:\\n        open({point + '/x'!r}, 'w').write('x')\\n        return 0.0\\n    except OSError:\\n        return 0.5\\n"
with Sandbox(sys.argv[2], ("a", "b"), spec.SandboxLimits(workers=1), required=("key",), namespaces="on") as box:
    print(box.evaluate(code).scores.tolist())
"""


@pytest.mark.skipif(not namespaces_available(), reason="namespaces need root")
def test_a_mount_at_an_escaped_non_ascii_path_is_read_only(tmp_path):
    point = str(tmp_path / "a dir\twith é")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(ODD_MOUNT), point, SCORER], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[1.0, 0.5]"


def test_a_mount_left_writable_is_found_in_the_mount_table():
    table = [("/", {"ro"}), ("/dev/pts", {"rw"}), ("/dev/pts", {"ro"}), ("/data b", {"rw", "nosuid"}),
             ("/proc", {"rw"}), ("/proc/sys", {"rw"}), ("/scratch", {"rw"})]
    assert mounts.still_writable(table, ("/scratch",)) == ["/data b"]  # (the covered /dev/pts is unreachable)
    assert mounts.still_writable(table[:3], ()) == []


SHM_FILE = """
import os
def bonus():
    left = [name for name in os.listdir('/dev/shm') if name.startswith('evo-test-')]
    with open(f'/dev/shm/evo-test-{os.getpid()}', 'wb') as file:
        file.write(b'1' * (1 << 20))
    return 0.0 if left else 0.5
"""


@pytest.mark.parametrize("mode", MODES)
def test_dev_shm_files_are_gone_for_the_next_evaluation(mode):
    if os.geteuid() != 0:
        pytest.skip("without root the evaluation has no uid of its own to clean up after")
    with box(mode) as sandbox:
        first, second = sandbox.evaluate(SHM_FILE), sandbox.evaluate(SHM_FILE)
    assert first.scores.tolist() == [1.0, 0.5] and second.scores.tolist() == [1.0, 0.5], (first, second)
    assert not [name for name in os.listdir("/dev/shm") if name.startswith("evo-test-")]
