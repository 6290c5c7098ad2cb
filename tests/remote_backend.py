"""The ``remote`` entry of tests/backends.py: a tier of a real `tiervault serve` process.

One server per test session (started on first use, stopped at exit). A storage
area ``where`` and a tier ``name`` map to an agent id of their own, and the tier
opened is that agent's agent tier on the server, through the remote-tier client:
a fresh (where, name) is a fresh empty tier; the same pair again is another
handle on the same tier; ``read_only`` gets a token with the ``agent:r`` right.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from pathlib import Path

from serve_process import ServeProcess
from tiervault.server.tokens import TokenStore
from tiervault.vault.remote import RemoteTier
from tiervault.vault.remote_transport import RemoteOptions

__all__ = ["remote_backend"]

_server: dict[str, object] = {}


def _shared_server() -> tuple[ServeProcess, TokenStore]:
    if not _server:
        root = Path(tempfile.mkdtemp(prefix="tv-remote-contract-"))
        (root / "home").mkdir()
        (root / "agent.yaml").write_text("tiers:\n  team: team.db\n")
        tokens = TokenStore(root / ".tiervault-server" / "tokens.json")
        # atexit runs last-registered first: the server stops, then its directory goes.
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        srv = ServeProcess(root, "--rate", "0", "--max-body", "16000000").start()
        atexit.register(srv.stop)
        _server.update(srv=srv, tokens=tokens)
    return _server["srv"], _server["tokens"]  # type: ignore[return-value]


def remote_backend(*args: object, name: str = "agent", read_only: bool = False) -> RemoteTier:
    """``(where, ...)`` or ``(request, where, ...)``: the registry's factory signature."""
    where = args[-1]
    srv, tokens = _shared_server()
    agent = "t" + hashlib.sha256(f"{where}\0{name}".encode()).hexdigest()[:24]
    token, _ = tokens.create(agent, {"agent": "r" if read_only else "rw"})
    # The contract is not about timeouts (tests/test_remote_tier.py is): the default 5 s
    # read timeout failed a contract test on a machine at load 7.
    return RemoteTier(name, f"{srv.url}/tiers/agent", token, read_only=read_only,
                      options=RemoteOptions(read_timeout=60.0))
