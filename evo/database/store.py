"""The durable store: one SQLite file in WAL mode, the source of truth of a run.

Tables: programs (one row per evaluated candidate, failure or copy), meta (key/value: the
config, the iteration counter), events (migrations, resets, evictions), and the loop's
journal: candidates (every policy sample, with its iteration, slot, status and policy name) and
evaluations (every result, before its iteration is inserted; evo/database/journal.py). Every write runs in
one transaction; a call returns only after its COMMIT, with synchronous=FULL so a committed row
survives a crash of the process (and of the machine).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import numpy as np

from evo.database.records import Program
from evo.errors import UserError
from evo.private import private_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS programs (
    id INTEGER PRIMARY KEY,
    code TEXT NOT NULL,
    hash TEXT NOT NULL,
    norm_hash TEXT NOT NULL,
    island INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    scores BLOB,
    scalar REAL,
    features TEXT NOT NULL,
    extras TEXT NOT NULL,
    parents TEXT NOT NULL,
    policy TEXT NOT NULL,
    seconds REAL NOT NULL,
    failure_kind TEXT,
    failure_message TEXT,
    origin TEXT NOT NULL,
    source INTEGER,
    removed INTEGER,
    CHECK ((scores IS NULL) = (failure_kind IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS programs_norm_hash ON programs (norm_hash);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    iteration INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS candidates (
    iteration INTEGER NOT NULL, slot INTEGER NOT NULL, island INTEGER NOT NULL,
    code TEXT NOT NULL, hash TEXT NOT NULL, parents TEXT NOT NULL,
    status TEXT NOT NULL, message TEXT NOT NULL, policy TEXT NOT NULL DEFAULT '',
    answer INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (iteration, slot));
CREATE TABLE IF NOT EXISTS evaluations (
    iteration INTEGER NOT NULL, slot INTEGER NOT NULL,
    scores TEXT, failure_kind TEXT, failure_message TEXT,
    extras TEXT NOT NULL, seconds REAL NOT NULL, output TEXT NOT NULL,
    PRIMARY KEY (iteration, slot));
"""
ADDED_COLUMNS = (  # (table, column, declaration): added to a store made before them, on open
    ("programs", "feedback", "TEXT NOT NULL DEFAULT ''"),
    ("programs", "stage", "INTEGER NOT NULL DEFAULT 1"),
    ("evaluations", "feedback", "TEXT NOT NULL DEFAULT ''"),
    ("evaluations", "stage", "INTEGER NOT NULL DEFAULT 1"),
    ("candidates", "policy", "TEXT NOT NULL DEFAULT ''"),  # empty for old rows: `evo show` counts them under the run's one policy
    ("candidates", "answer", "INTEGER NOT NULL DEFAULT 0"),  # old rows: one program per reply
)
COLUMNS = tuple(Program.__dataclass_fields__)


def _inserted(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just made."""
    if cursor.lastrowid is None:
        raise sqlite3.DatabaseError("an INSERT returned no row id")
    return cursor.lastrowid


def _row(program: Program) -> tuple:
    scores = None if program.scores is None else np.asarray(program.scores, dtype=np.float64).tobytes()
    return (
        program.code, program.hash, program.norm_hash, program.island, program.iteration, scores, program.scalar,
        json.dumps(list(program.features)), json.dumps(program.extras, sort_keys=True), json.dumps(list(program.parents)),
        program.policy, program.seconds, program.failure_kind, program.failure_message, program.origin, program.source,
        program.removed, program.feedback, program.stage,
    )


def _program(row: sqlite3.Row) -> Program:
    values = dict(row)
    values["scores"] = None if row["scores"] is None else np.frombuffer(row["scores"], dtype=np.float64).copy()
    values["features"] = tuple(json.loads(row["features"]))
    values["extras"] = json.loads(row["extras"])
    values["parents"] = tuple(json.loads(row["parents"]))
    return Program(**values)


def add_columns(connection: sqlite3.Connection) -> None:
    """Bring a store made by an older version up to date: the ADDED_COLUMNS it lacks (old
    rows get the declared default)."""
    for table, column, declaration in ADDED_COLUMNS:
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            try:
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            except sqlite3.OperationalError:  # another process added it first
                if column not in {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}:
                    raise


def _read_only_view(connection: sqlite3.Connection) -> None:
    """A store made by an older version, read without writing to it: a table it lacks is an
    empty TEMP table, a table lacking some ADDED_COLUMNS is shadowed by a TEMP view that adds
    them with their defaults (TEMP objects live in memory, never in the file)."""
    present = {name for (name,) in connection.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
    for statement in SCHEMA.split(";"):
        words = statement.split()
        if words[:5] == ["CREATE", "TABLE", "IF", "NOT", "EXISTS"] and words[5] not in present:
            connection.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
    missing: dict[str, list[tuple[str, str]]] = {}
    for table, column, declaration in ADDED_COLUMNS:
        if table not in present:
            if column not in {row[1] for row in connection.execute(f"PRAGMA temp.table_info({table})")}:
                connection.execute(f"ALTER TABLE temp.{table} ADD COLUMN {column} {declaration}")
        elif column not in {row[1] for row in connection.execute(f"PRAGMA main.table_info({table})")}:
            missing.setdefault(table, []).append((column, declaration.rsplit("DEFAULT", 1)[1].strip()))
    for table, columns in missing.items():
        added = ", ".join(f"{default} AS {column}" for column, default in columns)
        connection.execute(f"CREATE TEMP VIEW {table} AS SELECT *, {added} FROM main.{table}")


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open without writing anything, even where the directory is read-only. Without a WAL file
    no connection is open and every commit is in the file: `immutable=1` (no -wal or -shm is
    made). With one (a live run, or a killed one): `mode=ro`, which reads its commits, else
    `immutable=1` (read-only media where no -shm can be made; the WAL's commits unread)."""
    if not path.is_file():
        raise sqlite3.OperationalError("no such file")
    quoted = urllib.parse.quote(str(path.resolve()))
    live = Path(f"{path}-wal").exists()
    for query in ("mode=ro", "mode=ro&immutable=1") if live else ("mode=ro&immutable=1",):
        connection = sqlite3.connect(f"file:{quoted}?{query}", uri=True, isolation_level=None, check_same_thread=False,
                                     timeout=30.0)
        try:
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return connection
        except sqlite3.OperationalError:
            connection.close()
    raise sqlite3.OperationalError("unable to open database file, even read-only")


def copy_store(source: Path, target: Path) -> str:
    """Copy the store at `source` (the commits in its WAL included) into `target`, reading the
    source without writing to it; '' when done, else why it could not be (then `target` may
    hold a partial file, for the caller to remove)."""
    try:
        with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as reader, \
                closing(sqlite3.connect(private_file(target))) as writer:
            reader.backup(writer)
    except sqlite3.DatabaseError as error:
        return str(error)
    return ""


class Store:
    def __init__(self, path: Path | str, *, read_only: bool = False):
        """`read_only`: read a run (`evo show`, `evo report`) without writing to it or its directory."""
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            try:
                self.connection = _connect_read_only(self.path)
                self.connection.row_factory = sqlite3.Row
                _read_only_view(self.connection)
            except sqlite3.DatabaseError as error:
                raise UserError(f"{self.path}: not a readable program database ({error})") from None
            self._lock = threading.RLock()
            self._depth = 0
            self.after_rollback: Callable[[], None] | None = None
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            private_file(self.path)
            self.connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self.connection.row_factory = sqlite3.Row
            if self.connection.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
                raise UserError(f"{self.path}: SQLite could not switch to WAL mode (is it on a network filesystem?)")
            self.connection.execute("PRAGMA synchronous=FULL")
            self.connection.executescript(SCHEMA)
            add_columns(self.connection)
        except sqlite3.DatabaseError as error:
            raise UserError(f"{self.path}: not a usable program database ({error})") from None
        except OSError as error:
            raise UserError(f"{self.path}: cannot open the program database ({error.strerror}); "
                            "check the file's owner and permissions") from None
        self._lock = threading.RLock()
        self._depth = 0
        self.after_rollback = None  # e.g. rebuild an in-memory view

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic, durable write; nested uses join the outer transaction.

        When the outermost transaction fails (its COMMIT included), it is rolled back and
        `after_rollback` runs.
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self.connection.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
                self.connection.execute("COMMIT")
            except BaseException:
                if self.connection.in_transaction:
                    self.connection.execute("ROLLBACK")
                if self.after_rollback is not None:
                    self.after_rollback()
                raise
            finally:
                self._depth = 0

    def insert(self, programs: Iterable[Program]) -> list[int]:
        """Insert rows (their `id` is ignored) and return the new ids, in order."""
        placeholders = ", ".join("?" * (len(COLUMNS) - 1))
        sql = f"INSERT INTO programs ({', '.join(COLUMNS[1:])}) VALUES ({placeholders})"
        with self.transaction():
            return [_inserted(self.connection.execute(sql, _row(p))) for p in programs]

    def mark_removed(self, ids: Iterable[int], iteration: int) -> None:
        with self.transaction():
            self.connection.executemany("UPDATE programs SET removed = ? WHERE id = ?", [(iteration, i) for i in ids])

    def programs(self) -> Iterator[Program]:
        for row in self.connection.execute(f"SELECT {', '.join(COLUMNS)} FROM programs ORDER BY id"):
            yield _program(row)

    def scores_before(self, iteration: int) -> list[np.ndarray]:
        """The score vectors of the evaluated programs (no failures, no copies) that the search
        held once the iterations before `iteration` were inserted: the initial programs (stored
        under the policy "initial" with no parents) and those of iterations < `iteration`."""
        rows = self.connection.execute(
            "SELECT scores FROM programs WHERE failure_kind IS NULL AND origin = 'evaluated' "
            "AND (iteration < ? OR (policy = 'initial' AND parents = '[]')) ORDER BY id", (iteration,))
        return [np.frombuffer(scores, dtype=np.float64).copy() for (scores,) in rows]

    def event(self, iteration: int, kind: str, data: dict) -> None:
        with self.transaction():
            self.connection.execute(
                "INSERT INTO events (iteration, kind, data, time) VALUES (?, ?, ?, ?)",
                (iteration, kind, json.dumps(data, sort_keys=True), time.time()),
            )

    def events(self) -> list[dict]:
        rows = self.connection.execute("SELECT iteration, kind, data, time FROM events ORDER BY id").fetchall()
        return [{"iteration": r[0], "kind": r[1], "data": json.loads(r[2]), "time": r[3]} for r in rows]

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self.connection.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def close(self) -> None:
        with self._lock:
            self.connection.close()
