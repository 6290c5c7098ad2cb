"""Transport of `tiervault serve`: a client that sends its body slowly holds nothing
(another client writes meanwhile, the slow one gets 408), and TLS with
--ssl-certfile/--ssl-keyfile (a self-signed certificate made by openssl)."""

from __future__ import annotations

import socket
import ssl
import subprocess

import httpx

from serve_process import ServeProcess, create_token, error_of


def test_slow_body_holds_no_lock_and_times_out(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text("tiers:\n  team: team.db\n")
    token = create_token(tmp_path, "slow", "team:rw")
    with ServeProcess(tmp_path, "--body-timeout", "3") as srv:
        slow = socket.create_connection(("127.0.0.1", srv.port))
        head = (f"POST /api/v1/entries HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                f"{token}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n")
        slow.sendall(head.encode() + b'{"tier": "team", "entries": [')  # ... and stalls
        # Another client writes and reads while the slow body is pending; a vault lock held
        # for the slow client would make this time out (the client allows 2 s, the body 3 s).
        with srv.client(token, timeout=2) as c:
            r = c.post("/api/v1/entries", json={"tier": "team", "entries": [
                {"id": "fast-one", "title": "Fast writer", "description": "Not blocked."}]})
            assert r.status_code == 201
            assert c.get("/api/v1/entries/fast-one").status_code == 200
        slow.settimeout(30)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = slow.recv(4096)
            if not chunk:
                break
            answer += chunk
        slow.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_tls_with_certificate_and_key(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "agent.yaml").write_text("tiers:\n  team: team.db\n")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    token = create_token(tmp_path, "tls", "team:r")
    srv = ServeProcess(tmp_path, "--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    srv.url = srv.url.replace("http://", "https://")
    trust = ssl.create_default_context(cafile=str(cert))
    srv.health_verify = trust
    with srv:
        with httpx.Client(base_url=srv.url, verify=trust, timeout=30) as c:
            assert c.get("/healthz").json()["status"] == "ok"
            r = c.get("/api/v1/stats", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200 and r.json()["agent"] == "tls"
            assert error_of(c.get("/api/v1/stats"))["code"] == "unauthorized"
        with httpx.Client(timeout=10) as plain:  # TLS only: plain HTTP gets no answer
            try:
                plain.get(srv.url.replace("https://", "http://") + "/healthz")
                answered = True
            except httpx.HTTPError:
                answered = False
            assert not answered
