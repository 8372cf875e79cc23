"""The filesystem a sandbox shows: the zygote's read-only remount of every mount (checked
afterwards, from the mount table), and the candidates' mount namespace that shows a Python
installation lying in a private home. Standard library only (see isolation.py)."""

from __future__ import annotations

import errno
import os
import re
import signal
import stat

from evo.sandbox.isolation import (
    CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT, mount, unshare,
)

_FLAG_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}


def unescape_mount_path(field: bytes) -> str:
    """A mountinfo path: the kernel writes space, tab, newline and backslash as octal
    escapes (\\040 ...); other bytes are raw (any encoding): decoded as the OS does."""
    return os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field))


def mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) from /proc/self/mountinfo, parents first."""
    with open("/proc/self/mountinfo", "rb") as lines:
        return [(unescape_mount_path(f[4]), set(f[5].decode().split(","))) for f in (line.split() for line in lines)]


def _stays_writable(point: str, writable: tuple[str, ...]) -> bool:
    return point in writable or point == "/proc" or point.startswith("/proc/")


def make_readonly(writable: str, size_mb: int, keep: tuple[str, ...] = ()) -> list[str]:
    """Remount every mount read-only except /proc and `keep` (bind mounts made here); put
    a fresh private tmpfs of `size_mb` on `writable` (the evaluations' directories) and a
    small one on /dev/shm. Returns the mount points still writable afterwards (read back
    from the mount table): the caller refuses to serve when there is any."""
    mount("tmpfs", writable, "tmpfs", MS_NOSUID | MS_NODEV, f"size={min(size_mb, 1 << 20)}m,mode=0711")
    for point in keep:
        mount(point, point, None, MS_BIND)
    exempt = (writable, *keep)
    for point, options in mounts():
        if _stays_writable(point, exempt):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        flags |= sum(bit for name, bit in _FLAG_OPTIONS.items() if name in options)
        try:
            mount(None, point, None, flags)
        except OSError:
            pass  # reported below
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
        exempt += ("/dev/shm",)
    return still_writable(mounts(), exempt)


def still_writable(table: list[tuple[str, set[str]]], exempt: tuple[str, ...]) -> list[str]:
    """The mount points in `table` (mountinfo order) a process can write through: of mounts
    stacked on one point only the last (top) one is reachable."""
    visible = dict(table)
    return [point for point, options in visible.items() if "ro" not in options and not _stays_writable(point, exempt)]


def python_paths() -> list[str]:
    """What a Python process needs to read: its installation and its import path."""
    import sys

    paths = {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}
    return sorted(paths | {p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)})


def needs_private_view(needed: list[str]) -> bool:
    return any(_blocked(needed))


def _blocked(needed: list[str]) -> dict[str, set[str]]:
    """{first ancestor others cannot enter: the entries in it on the way to `needed`}"""
    blocked: dict[str, set[str]] = {}
    for path in needed:
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            if not os.stat(ancestor).st_mode & 0o001:
                blocked.setdefault(ancestor, set()).add(parts[depth])
                break
    return blocked


def view_namespace(needed: list[str]) -> int:
    """An fd on a mount namespace made by `private_view` in a helper process (which exits):
    processes enter it with `setns`, at no cost per evaluation."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            private_view(needed)
            os.write(write, b"1")
        finally:
            os.close(write)
            signal.pause()
    os.close(write)
    try:
        if os.read(read, 1) != b"1":
            raise OSError(errno.EPERM, "cannot make a mount namespace for candidates")
        return os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    finally:
        os.close(read)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def private_view(needed: list[str]) -> None:
    """A mount namespace of this process's own in which every path in `needed` can be
    reached by anyone, without CAP_DAC_READ_SEARCH: the first ancestor of each that others
    cannot enter (a private home such as /root) is covered by a read-only tmpfs that holds
    only the entries leading to them, bind-mounted from the originals. Everything else in
    that ancestor disappears from view. Needs root; best effort beyond the first level."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we do here reaches the host
    blocked = _blocked(needed)
    for ancestor, names in sorted(blocked.items()):
        if any(ancestor.startswith(other + "/") for other in blocked):
            continue  # inside one covered already
        _cover(ancestor, names)


def _cover(ancestor: str, names: set[str]) -> None:
    originals = {name: os.open(os.path.join(ancestor, name), os.O_PATH) for name in names}
    mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    for name, fd in originals.items():
        target = os.path.join(ancestor, name)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.mkdir(target)
        else:
            open(target, "w").close()
        mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        os.close(fd)
    mount(None, ancestor, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
