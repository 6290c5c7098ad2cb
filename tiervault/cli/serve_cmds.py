"""CLI: ``tiervault serve`` (the team server) and ``tiervault token create|list|revoke``.

Thin: the server lives in :mod:`tiervault.server`. Both commands find the
server's state directory the same way (``--state-dir``, else next to the
agent.yaml of ``--config``), so a token created with the same flags is the one
the server checks. ``token create`` prints the token once, on stdout; nothing
else ever prints it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from tiervault.cli.common import add_json, print_json, settings_from

__all__ = ["register"]


def _state_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", metavar="DIR",
                   help="server state (tokens.json, agents/): default <agent.yaml dir>/"
                        ".tiervault-server, or ~/.tiervault/server without a config file")


def register(sub: Any) -> None:
    from tiervault.server.limits import Limits

    d = Limits()
    p = sub.add_parser("serve", help="serve the vault over HTTP (JSON API, MCP streamable HTTP, "
                       "web page); needs `pip install 'tiervault[server]'`")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; another address needs a token first)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    _state_flag(p)
    p.add_argument("--ssl-certfile", metavar="PEM", help="TLS certificate (with --ssl-keyfile)")
    p.add_argument("--ssl-keyfile", metavar="PEM", help="TLS private key")
    p.add_argument("--max-body", type=int, default=d.max_body_bytes, metavar="BYTES",
                   help=f"largest request body (default {d.max_body_bytes})")
    p.add_argument("--max-query", type=int, default=d.max_query_chars, metavar="CHARS",
                   help=f"longest query (default {d.max_query_chars})")
    p.add_argument("--max-ids", type=int, default=d.max_ids, metavar="N",
                   help=f"ids per call (default {d.max_ids})")
    p.add_argument("--rate", type=float, default=d.rate_per_s, metavar="PER_S",
                   help=f"requests per second per token, 0 = unlimited (default {d.rate_per_s:g})")
    p.add_argument("--burst", type=int, default=d.burst, metavar="N",
                   help=f"burst above the rate per token (default {d.burst})")
    p.add_argument("--body-timeout", type=float, default=d.body_timeout_s, metavar="S",
                   help=f"seconds a client may take to send its body (default {d.body_timeout_s:g})")
    p.set_defaults(handler=cmd_serve)

    t = sub.add_parser("token", help="create, list or revoke the server's access tokens")
    tsub = t.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    c = tsub.add_parser("create", help="create a token (printed once)")
    c.add_argument("--agent", required=True, help="the agent id the token acts as")
    c.add_argument("--allow", default="", metavar="RIGHTS",
                   help="tier rights, e.g. team:rw,project:r (the agent's own tier is rw unless "
                        "named, e.g. agent:r)")
    c.add_argument("--expires", metavar="DURATION", help="lifetime, e.g. 90d, 12h, 2w")
    c.add_argument("--note", default="", help="a reminder of who holds it")
    _state_flag(c)
    add_json(c)
    c.set_defaults(handler=cmd_token_create)
    ls = tsub.add_parser("list", help="list tokens (keys, agents, rights, status; never secrets)")
    _state_flag(ls)
    add_json(ls)
    ls.set_defaults(handler=cmd_token_list)
    r = tsub.add_parser("revoke", help="revoke a token by its key (from `token list`)")
    r.add_argument("key", help="the token's key (or the token itself)")
    _state_flag(r)
    add_json(r)
    r.set_defaults(handler=cmd_token_revoke)


def _paths(args: argparse.Namespace) -> Any:
    from tiervault.server.app import ServerPaths

    return ServerPaths.resolve(settings_from(args), args.state_dir)


def _store(args: argparse.Namespace) -> Any:
    from tiervault.server.tokens import TokenStore

    paths = _paths(args)
    paths.ensure()
    return TokenStore(paths.tokens)


def cmd_serve(args: argparse.Namespace) -> int:
    from tiervault.server.app import serve
    from tiervault.server.limits import Limits

    logging.getLogger("tiervault").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    limits = Limits(max_body_bytes=args.max_body, max_query_chars=args.max_query,
                    max_ids=args.max_ids, rate_per_s=args.rate, burst=args.burst,
                    body_timeout_s=args.body_timeout)
    serve(settings_from(args), host=args.host, port=args.port, state_dir=args.state_dir,
          limits=limits, ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile)
    return 0


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts)) if ts else "-"


def cmd_token_create(args: argparse.Namespace) -> int:
    from tiervault.server.tokens import parse_allow, parse_duration

    rights = parse_allow(args.allow)
    expires = parse_duration(args.expires) if args.expires else None
    token, rec = _store(args).create(args.agent, rights, expires_in=expires, note=args.note)
    if args.json:
        print_json({"token": token, **rec.public()})
    else:
        print(token)
        print(f"key {rec.key}: agent {rec.agent}, rights "
              f"{','.join(f'{t}:{r}' for t, r in rec.rights.items())}, expires "
              f"{_when(rec.expires) if rec.expires else 'never'}. Shown once: store it now.",
              file=sys.stderr)
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    records = [r.public() for r in _store(args).records()]
    if args.json:
        print_json({"tokens": records})
        return 0
    if not records:
        print("no tokens; create one with `tiervault token create --agent ID --allow team:rw`")
    for r in records:
        rights = ",".join(f"{t}:{v}" for t, v in r["rights"].items())
        print(f"{r['key']}  {r['status']:<8} agent={r['agent']}  {rights}  created "
              f"{_when(r['created'])}  expires {_when(r['expires'])}  {r['note']}".rstrip())
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    rec = _store(args).revoke(args.key)
    if args.json:
        print_json(rec.public())
    else:
        print(f"revoked {rec.key} (agent {rec.agent})")
    return 0
