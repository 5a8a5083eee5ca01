"""SQLite storage of runs, safe under concurrent writers and SIGKILL.

WAL journal, one short transaction per run, a busy timeout so two firedup
processes writing at once wait for each other instead of failing. The file
carries an application id and a schema version (``PRAGMA user_version``);
older schemas are migrated forward in one transaction; a file that is not a
firedup ledger is refused, never overwritten."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from .._exceptions import InputError, LedgerError

APPLICATION_ID = 0x46495244  # "FIRD"
BUSY_TIMEOUT_MS = 30_000

# Each entry moves the schema from version i to i + 1. Never edit one that has
# shipped: add the next.
MIGRATIONS = (
    # 1: the first schema
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        name TEXT,
        host TEXT,
        command TEXT NOT NULL DEFAULT '[]',
        server TEXT,
        version TEXT,
        config TEXT NOT NULL DEFAULT '{}',
        phases TEXT NOT NULL DEFAULT '{}',
        outcome TEXT NOT NULL,
        cause TEXT,
        evidence TEXT,
        log TEXT,
        started REAL NOT NULL,
        elapsed REAL
    );
    CREATE INDEX runs_started ON runs (started);
    """,
    # 2: environment snapshots and configuration fingerprints
    """
    ALTER TABLE runs ADD COLUMN environment TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN fingerprint TEXT;
    CREATE INDEX runs_fingerprint ON runs (fingerprint, started);
    """,
    # 3: benchmark runs: what was sent and what was measured
    """
    ALTER TABLE runs ADD COLUMN workload TEXT;
    ALTER TABLE runs ADD COLUMN metrics TEXT;
    """,
    # 4: a scheduler's job: id, partition, nodes, queue wait, the node logs
    """
    ALTER TABLE runs ADD COLUMN scheduler TEXT;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
JSON_COLUMNS = ("command", "config", "phases", "evidence", "environment", "workload", "metrics", "scheduler")
# What each JSON column holds, and what a run reads in its place when its text is damaged (not JSON, or JSON
# of another shape: a hand edit, another program's write): the columns that may be NULL read None.
SHAPES: dict[str, tuple[type, Any]] = {"command": (list, []), "config": (dict, {}), "phases": (dict, {}),
                                       "evidence": (dict, None), "environment": (dict, {}), "workload": (dict, None),
                                       "metrics": (dict, None), "scheduler": (dict, None)}


def ledger_path(explicit: str | os.PathLike | None = None) -> Path:
    if explicit is not None:
        if not str(explicit):
            raise LedgerError("--ledger needs a path (an empty one names no ledger)")
        return Path(explicit)
    if os.environ.get("FIREDUP_LEDGER"):
        return Path(os.environ["FIREDUP_LEDGER"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "firedup" / "ledger.db"


class Ledger:
    """The run ledger: every start-up, watch, diagnosis and benchmark firedup
    recorded, in one SQLite file (``path``, default FIREDUP_LEDGER or
    ~/.local/share/firedup/ledger.db)."""

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False):
        """``read_only``: only read (runs, show): the ledger must exist, and may be a file this user cannot
        write. Otherwise it is made if missing, and refused at once if it cannot be written, before the
        caller starts a server whose run would then go unrecorded."""
        self.path = ledger_path(path)
        self.unrecorded: list[str] = []  # writes that failed after it opened (a full disk), as their errors
        if read_only and not self.path.exists():
            raise LedgerError(f"there is no ledger at {self.path}: nothing was recorded there")
        if self.path.is_dir():
            raise LedgerError(f"the ledger {self.path} is a folder: give the ledger's file "
                              f"(e.g. {self.path / 'ledger.db'})")
        if self.path.exists() and not self.path.is_file():
            raise LedgerError(f"the ledger {self.path} is not a file (a device, a pipe): give a file's path")
        try:
            if not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._connect()
            except sqlite3.OperationalError as e:
                # SQLite cannot make the ledger's -wal and -shm files beside it (a read-only folder):
                # a read opens it read-only all the same, a write is refused below
                if not read_only or e.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY):
                    raise
                if hasattr(self, "db"):  # not when SQLite could not open the file at all
                    self.db.close()
                self._connect_read_only()
            if not read_only:
                self._check_writable()
        except sqlite3.DatabaseError as e:
            if e.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
                raise LedgerError(f"{self.path} is not a usable firedup ledger: {e}") from None
            raise LedgerError(f"cannot {'open' if read_only else 'write to'} the ledger {self.path}: "
                              f"{e}{self._folder_note()}") from None
        except OSError as e:  # its folder cannot be made
            raise LedgerError(f"cannot write to the ledger {self.path}: {e.strerror or e}") from None

    def _connect(self, uri: str | None = None) -> None:
        """Open the ledger (``uri``: read-only, as SQLite's file: URI says), brought up to this schema
        and in WAL mode unless read-only."""
        self.db = sqlite3.connect(uri or self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                  uri=uri is not None)
        self.db.row_factory = sqlite3.Row
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if uri is not None:
            self._check_and_migrate(migrate=False)
            return
        self._check_and_migrate()
        self._use_wal()
        self.db.execute("PRAGMA synchronous = NORMAL")

    def _connect_read_only(self) -> None:
        """A ledger in a folder SQLite cannot write: read with mode=ro, which needs the -wal and -shm
        files there already (a writer left them); without them, as immutable, which reads the main
        file alone: refused when a -wal file holds what the main file may not have yet."""
        where = self.path.resolve().as_uri()
        try:
            self._connect(f"{where}?mode=ro")
            return
        except sqlite3.OperationalError as e:
            self.db.close()
            if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN:
                raise
        wal = Path(f"{self.path}-wal")
        if wal.exists() and wal.stat().st_size:
            raise LedgerError(f"cannot open the ledger {self.path}: its folder {self.path.parent} is read-only, "
                              f"and its runs in {wal.name} cannot be read without the {self.path.name}-shm "
                              "file SQLite would make there: copy the ledger with its -wal file to a writable "
                              "folder")
        self._connect(f"{where}?immutable=1")

    def _folder_note(self) -> str:
        # The file may be fine: SQLite also needs to create its -wal and -shm files beside it.
        try:
            if shutil.disk_usage(self.path.parent).free == 0:
                return f" (the disk holding {self.path.parent} is full)"
        except OSError:
            pass
        if os.access(self.path.parent, os.W_OK):
            return ""
        return f" (its folder {self.path.parent} is read-only, and SQLite keeps the ledger's -wal and -shm files there)"

    def _check_writable(self) -> None:
        # SQLite opens a file it may not write (read-only, immutable) for reading
        # without a word, and refuses only the first write: try one, undone.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        finally:
            self.db.execute("ROLLBACK")

    def _check_and_migrate(self, migrate: bool = True) -> None:
        # Under the write lock, so that two firedup processes opening a new
        # ledger at once do not see each other's half-made schema; read-only,
        # an older schema is read as it is (the columns it lacks read empty).
        self.db.execute("BEGIN IMMEDIATE" if migrate else "BEGIN")
        try:
            app = self.db.execute("PRAGMA application_id").fetchone()[0]
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app != APPLICATION_ID and (tables or version):
                raise LedgerError(f"{self.path} is not a firedup ledger (another program's database): "
                                  "move it away or choose another path with --ledger / FIREDUP_LEDGER")
            if version > SCHEMA_VERSION:
                raise LedgerError(f"{self.path} was written by a newer firedup (schema {version}, "
                                  f"this one knows {SCHEMA_VERSION}): upgrade firedup")
            for step in MIGRATIONS[version:] if migrate else ():
                for statement in filter(str.strip, step.split(";")):
                    self.db.execute(statement)
            if version < SCHEMA_VERSION and migrate:
                self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _use_wal(self) -> None:
        # Moving a new ledger to WAL needs every other connection idle, and SQLite
        # answers "database is locked" at once instead of calling the busy handler:
        # several firedup processes opening a new ledger together (a watch of
        # several logs, a job array) wait here as the busy timeout promises.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if e.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs -------------------------------------------------------------------

    def record(self, **run: Any) -> int:
        """Store one run in one transaction; returns its id."""
        run.setdefault("started", time.time())
        for column in JSON_COLUMNS:
            if column in run:
                run[column] = json.dumps(run[column], default=str)
        columns = ", ".join(run)
        marks = ", ".join("?" for _ in run)
        try:
            cur = self.db.execute(f"INSERT INTO runs ({columns}) VALUES ({marks})", tuple(run.values()))
        except sqlite3.DatabaseError as e:
            raise LedgerError(f"cannot write to the ledger {self.path}: {e}") from None
        assert cur.lastrowid is not None
        return cur.lastrowid

    def get(self, run_id: int) -> dict[str, Any] | None:
        """Run ``run_id`` (None when there is none); a damaged one as ``find`` gives it, marked ``damaged``."""
        if not -(1 << 63) <= run_id < 1 << 63:  # past SQLite's integers (sqlite3 raises OverflowError): none
            return None
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _decode(row) if row else None

    def run(self, run_id: int) -> dict[str, Any]:
        """Run ``run_id``, for a person who named it: InputError when there is none, LedgerError when
        its row is damaged (it is left as it is)."""
        found = self.get(run_id)
        if found is None:
            raise InputError(f"no run {run_id} in the ledger (see firedup runs)")
        if "damaged" in found:
            raise LedgerError(f"run {run_id} is damaged in the ledger {self.path}: {damage(found)}; it is left "
                              "as it is, and the other runs read as before (firedup runs)")
        return found

    def find(self, *, name: str | None = None, server: str | None = None, since: float | None = None,
             fingerprint: str | None = None, outcome: str | None = None, kind: str | None = None,
             not_kind: str | None = None, limit: int | None = None, damaged: bool = False) -> list[dict]:
        """Runs, newest first. A run whose row is damaged is passed over, unless ``damaged``: then it is
        there, its damaged columns read empty and ``damaged`` says what is wrong with each."""
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("name", name), ("server", server), ("fingerprint", fingerprint),
                              ("outcome", outcome), ("kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if not_kind is not None:
            where.append("kind != ?")
            params.append(not_kind)
        if since is not None:
            where.append("started >= ?")
            params.append(since)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        runs = [_decode(row) for row in self.db.execute(sql, params)]
        return runs if damaged else [run for run in runs if "damaged" not in run]

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    """The run a row holds; a JSON column whose text is damaged reads empty, and ``damaged`` says why
    (column: what is wrong). Nothing is written back: the row stays as it is."""
    run = dict(row)
    run.setdefault("fingerprint", None)  # a ledger of an older schema, read where it cannot be migrated
    damaged = {}
    for column in JSON_COLUMNS:
        shape, empty = SHAPES[column]
        if run.get(column) is None:
            run.setdefault(column, empty)
            continue
        try:
            value = json.loads(run[column])
        except (TypeError, ValueError) as e:  # ValueError: not JSON; TypeError: a BLOB or a number stored there
            damaged[column] = f"not JSON ({e})"
            value = empty
        else:
            if not isinstance(value, shape) and not (value is None and empty is None):
                damaged[column] = f"{_kind(value)}, not {_kind(shape())}"
                value = empty
        run[column] = value
    if damaged:
        run["damaged"] = damaged
    return run


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def damage(run: dict[str, Any]) -> str:
    """What is wrong with a damaged run, for a person: "its metrics is not JSON (...)", columns damaged
    alike said once ("its config, phases are not JSON (...)")."""
    alike: dict[str, list[str]] = {}
    for column, why in run["damaged"].items():
        alike.setdefault(why, []).append(column)
    return "; ".join(f"its {', '.join(columns)} {'is' if len(columns) == 1 else 'are'} {why}"
                     for why, columns in alike.items())

