"""Serve the curator pages for a principal with given rights (what ``tiervault serve`` does
with its tokens): ``python web_server.py CONFIG TOKEN RIGHTS_JSON``. Prints the URL, then serves
on 127.0.0.1 until killed. Used by the browser tests for a read-only principal."""

from __future__ import annotations

import hmac
import json
import sys

import uvicorn

from tiervault.brain import Brain
from tiervault.config import load_settings
from tiervault.server.principal import Principal
from tiervault.web import create_web_app, request_token
from tiervault.web.local import bind_local


def main() -> None:
    config, token, rights = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    settings = load_settings(config)
    brain = Brain.open(settings)
    principal = Principal(settings.agent_id, rights)

    def authenticate(request):
        given = request_token(request)
        return principal if given and hmac.compare_digest(given, token) else None

    app = create_web_app(lambda p: brain, authenticate)
    sock = bind_local(0)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                  lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    main()
