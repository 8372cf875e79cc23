"""Linux isolation primitives through ctypes (Python 3.11 has no os.unshare): namespaces,
mounts, resource limits, seccomp, privilege drop, killing whole process trees.

Only the standard library is imported here: the zygote calls `unshare` before anything
that might start threads (unshare of the mount namespace needs a single-threaded process).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import resource
import signal
import socket
import struct
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
PR_SET_KEEPCAPS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 8, 24, 47, 2
CAP_DAC_READ_SEARCH, _CAP_VERSION_3 = 2, 0x20080522
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
_LIMIT_CAP = 1 << 62  # larger rlimit values overflow
PRIVATE_ID_BASE, PRIVATE_ID_SPAN = 0x5E000000, 0x01000000  # far above real and container-mapped ids

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def unmount(target: str) -> None:
    _check(_libc.umount2(os.fsencode(target), 2), f"umount {target}")  # MNT_DETACH


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), "prctl")


def enter_namespaces() -> None:
    """New mount, network, IPC and PID namespaces (the PID one applies to our children)."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    _loopback_up()


def namespaces_available() -> bool:
    """Whether this process could enter the sandbox's namespaces (probed in a child)."""
    if os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:
        try:
            enter_namespaces()
            os._exit(0)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _loopback_up() -> None:
    """Bring up `lo` in the fresh network namespace (it has no other interface)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        import fcntl

        flags = 0x1 | 0x8 | 0x40  # IFF_UP | IFF_LOOPBACK | IFF_RUNNING
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH22x", b"lo", flags))  # SIOCSIFFLAGS


def mount_proc() -> None:
    """A /proc that shows only our PID namespace (call from inside it)."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def private_user(key: int, candidate: bool = False) -> tuple[int, int]:
    """A uid/gid of its own for one zygote's evaluations (no passwd entry needed), so that
    concurrent evaluations cannot signal each other, share RLIMIT_NPROC or read each other's
    files, not even without namespaces. `key` is the zygote's (host) pid; `candidate`: the
    one for the candidate's own process, which must not reach the scorer's either."""
    ident = PRIVATE_ID_BASE + (PRIVATE_ID_SPAN if candidate else 0) + key % PRIVATE_ID_SPAN
    return ident, ident


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


# (audit arch, socket, io_uring_setup, first x32 syscall or None, link syscalls) per machine
_MACHINE = os.uname().machine
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 41, 425, 0x40000000, (86, 88, 265, 266)),  # link symlink linkat symlinkat
                 "aarch64": (0xC00000B7, 198, 425, None, (37, 36))}  # linkat symlinkat


def seccomp_sockets(inet: bool, links: bool = False) -> bool:
    """seccomp: socket(AF_UNIX) fails with EACCES (no connect() to the host's Unix sockets;
    socketpair and pipes still work, so multiprocessing does), as do io_uring and every
    syscall of a foreign ABI; with `inet` (no network namespace) also AF_INET/AF_INET6; with
    `links` (a candidate's process) also symlink and link, so no file the scorer reads in the
    candidate's directory can lead elsewhere. Inherited by every process started afterwards.
    Needs PR_SET_NO_NEW_PRIVS first. False on a machine we have no syscall numbers for."""
    program = seccomp_program(inet, links)
    if program is None:
        return False
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(program), 0, 0), "seccomp")
    return True


@functools.lru_cache(maxsize=4)
def seccomp_program(inet: bool, links: bool = False) -> "_Program | None":
    """The filter of `seccomp_sockets`, built once (the zygote builds it before it forks)."""
    if _MACHINE not in _SECCOMP_ARCH:
        return None
    arch, socket_nr, uring_nr, x32, link_nrs = _SECCOMP_ARCH[_MACHINE]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    families = [socket.AF_UNIX] + ([socket.AF_INET, socket.AF_INET6] if inet else [])
    # rows as (code, jump-if-true target, jump-if-false target, k); targets "allow"/"deny"/None (next)
    rows = [(ld, None, None, 4), (jeq, None, "deny", arch), (ld, None, None, 0),
            (jge, "deny", None, x32 if x32 is not None else 0xFFFFFFFF), (jeq, "deny", None, uring_nr),
            *[(jeq, "deny", None, nr) for nr in (link_nrs if links else ())],
            (jeq, None, "allow", socket_nr), (ld, None, None, 16),
            *[(jeq, "deny", None, family) for family in families]]
    at = {"allow": len(rows), "deny": len(rows) + 1}
    code = [(op, at[t] - i - 1 if t else 0, at[f] - i - 1 if f else 0, k) for i, (op, t, f, k) in enumerate(rows)]
    code += [(ret, 0, 0, 0x7FFF0000), (ret, 0, 0, 0x00050000 | errno.EACCES)]
    filters = (_Filter * len(code))(*[_Filter(*row) for row in code])
    program = _Program(len(code), filters)
    program._keep = filters  # (the program points into it)
    return program


def limit_sysv(max_bytes: int) -> None:
    """Small System V limits in this (fresh) IPC namespace: shared memory within `max_bytes`
    in all, few objects. Best effort: a kernel may not expose them."""
    page = os.sysconf("SC_PAGE_SIZE")
    for name, value in (("shmall", max(1, max_bytes // page)), ("shmmax", max_bytes), ("shmmni", 64),
                        ("msgmni", 64), ("msgmnb", 1 << 20)):
        try:
            fd = os.open(f"/proc/sys/kernel/{name}", os.O_WRONLY)
        except OSError:
            continue
        try:
            os.write(fd, str(value).encode())
        except OSError:
            pass
        finally:
            os.close(fd)


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def kill_user(uid: int, attempts: int = 50) -> None:
    """SIGKILL every process of a private evaluation uid (the fallback's last resort)."""
    for _ in range(attempts):
        pids = processes_of(uid)
        if not pids:
            return
        for pid in pids:
            _send(os.kill, pid)
        time.sleep(0.01)


def remove_owned(directory: str, owners: set[int] | None = None) -> None:
    """Remove the entries of `directory` that `owners` own (a fallback evaluation's files in
    the host's /dev/shm), or all of them."""
    import shutil

    for entry in os.scandir(directory):
        try:
            if owners is None or entry.stat(follow_symlinks=False).st_uid in owners:
                shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.unlink(entry.path)
        except OSError:
            pass


def own_process_count(uid: int) -> int:
    """Processes owned by `uid` right now (RLIMIT_NPROC counts them all)."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count


def set_limits(address_space: int, cpu_seconds: float, processes: int | None, file_bytes: int) -> None:
    cpu = max(1, int(min(cpu_seconds, 1 << 40) + 0.999))
    address_space, file_bytes = min(address_space, _LIMIT_CAP), min(file_bytes, _LIMIT_CAP)
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges(uid: int, gid: int, keep: int | None = CAP_DAC_READ_SEARCH) -> None:
    """Become `uid`/`gid` with an empty bounding set, keeping at most one capability `keep`
    (the trusted scorer's process keeps CAP_DAC_READ_SEARCH, read any file: the Python
    installation may live under a private home), also across exec (ambient); `keep=None`
    (a candidate's process): no capability at all, now or after any exec. Writing,
    signalling and everything else follow the unprivileged user's rights."""
    for cap in range(64):
        if cap != keep and _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # EINVAL: past the last capability this kernel knows
    os.setgroups([])
    if keep is None:
        os.setgid(gid)
        os.setuid(uid)  # without KEEPCAPS: every capability set is cleared
        return
    prctl(PR_SET_KEEPCAPS, 1)
    os.setgid(gid)
    os.setuid(uid)
    mask = 1 << keep
    data = (_CapData * 2)(_CapData(mask, mask, mask), _CapData(0, 0, 0))
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), data), "capset")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, keep, 0, 0), "ambient capability")
    prctl(PR_SET_KEEPCAPS, 0)


def _stat(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...); None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, found by scanning /proc (no CONFIG_PROC_CHILDREN needed)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(entry.name)) is not None and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def reap_all() -> bool:
    """Reap every exited child; True when no child is left at all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def signal_tree(group: int, in_namespace: bool) -> None:
    """SIGKILL everything an evaluation started. Inside our own PID namespace (we are its
    init) `kill(-1)` reaches every process in it; otherwise the process group, then every
    orphan re-parented to us (we are child subreaper)."""
    if in_namespace:
        _send(os.kill, -1)
        return
    _send(os.killpg, group)
    kill_children(os.getpid())


def kill_children(parent: int) -> list[int]:
    """SIGKILL each child of `parent` and its process group (every evaluation process is a
    group leader); the children it found."""
    children = children_of(parent)
    for child in children:
        _send(os.kill, child)
        _send(os.killpg, child)
    return children


def running(pid: int) -> bool:
    """Whether `pid` is alive: not gone, and not a zombie its parent has still to reap."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def wait_gone(pids: list[int], seconds: float = 2.0) -> bool:
    """Wait until none of `pids` runs (SIGKILL takes effect a moment after kill() returns);
    False when one still does after `seconds`."""
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def kill_tree(group: int, in_namespace: bool, attempts: int = 2000) -> None:
    """Signal and reap until we have no child left at all (then no descendant is left
    either: every orphan is re-parented to us, the init or subreaper)."""
    for _ in range(attempts):
        if reap_all():
            return
        signal_tree(group, in_namespace)
        time.sleep(0.0005)


def _send(kill: object, target: int) -> None:
    try:
        kill(target, signal.SIGKILL)  # type: ignore[operator]
    except (ProcessLookupError, PermissionError):
        pass
