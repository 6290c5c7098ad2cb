"""The curator app over HTTP (in-process ASGI client): sign-in, CSRF, headers, rights, errors,
edit validation, review lists. The browser flows are in test_web_browser.py."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest
from starlette.testclient import TestClient

from tiervault.brain import Brain
from tiervault.config import load_settings
from tiervault.server.principal import Principal
from tiervault.vault.entry import Entry
from tiervault.web import CSP, LocalAccess, create_web_app, local_principal
from tiervault.web.catalog import title_key
from tiervault.web.editing import apply_form, form_values

BASE = "http://127.0.0.1"


@pytest.fixture
def brain(tmp_path):
    config = tmp_path / "agent.yaml"
    config.write_text("agent_id: me\ntiers:\n  agent: ./agent.db\n  team: ./team.db\n")
    b = Brain.open(load_settings(str(config)))
    m = b.manager
    m.capture(Entry.create(title="Use JWT key rotation", description="Rotate keys.", tags=["jwt"]), "agent")
    m.capture(Entry.create(title="JWT key rotation: use it", description="Rotate keys often."), "team")
    m.capture(Entry.create(id="twin-a", title="Twin", description="Same words."), "agent")
    m.capture(Entry.create(id="twin-b", title="Twin", description="Same words."), "agent")
    yield b
    b.close()


def _client(brain, rights=None, token="t0k"):
    settings_rights = rights or {"agent": "rw", "team": "rw"}
    access = LocalAccess(Principal("me", settings_rights), token)
    client = TestClient(create_web_app(lambda p: brain, access), base_url=BASE)
    client.cookies.set("tiervault_token", token)
    return client


def _csrf(client, path="/"):
    return re.search(r'name="csrf" value="([0-9a-f]{64})"', client.get(path).text).group(1)


def test_every_response_carries_the_security_headers(brain):
    c = _client(brain)
    for path in ["/", "/health", "/nope", "/static/style.css", "/entry/missing"]:
        r = c.get(path)
        assert r.headers["content-security-policy"] == CSP, path
        assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
    html = c.get("/nope", headers={"accept": "text/html,application/xhtml+xml"})
    assert html.status_code == 404 and "No such page" in html.text
    api = c.get("/api/v9/nope", headers={"accept": "application/json"})
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
    anonymous = TestClient(create_web_app(lambda p: brain, LocalAccess(Principal("me", {}), "x")),
                           base_url=BASE)
    r = anonymous.get("/browse")
    assert r.status_code == 401 and "Sign in" in r.text and r.headers["content-security-policy"] == CSP


def test_login_form_sets_the_cookie_and_a_wrong_token_is_refused(brain):
    access = LocalAccess(Principal("me", {"agent": "rw"}), "right")
    c = TestClient(create_web_app(lambda p: brain, access), base_url=BASE)
    page = c.get("/")
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text).group(1)
    assert c.post("/login", data={"token": "right"}).status_code == 403  # no CSRF token
    r = c.post("/login", data={"token": "wrong", "csrf": csrf}, follow_redirects=True)
    assert r.status_code == 401 and "not accepted" in r.text
    r = c.post("/login", data={"token": "right", "csrf": csrf}, follow_redirects=True)
    assert r.status_code == 200 and "log out" in r.text


def test_posts_need_the_csrf_token_of_this_browser_and_origin(brain):
    c = _client(brain)
    csrf = _csrf(c)
    form = {"tier": "agent", "confirm": "twin-a"}
    assert c.post("/entry/twin-a/delete", data=form).status_code == 403
    assert c.post("/entry/twin-a/delete", data={**form, "csrf": "0" * 64}).status_code == 403
    r = c.post("/entry/twin-a/delete", data={**form, "csrf": csrf},
               headers={"origin": "http://evil.example"})
    assert r.status_code == 403
    other = _client(brain)  # another browser: its own browser cookie, so its own token
    assert other.post("/entry/twin-a/delete", data={**form, "csrf": csrf}).status_code == 403
    assert brain.manager.store("agent").get("twin-a") is not None
    r = c.post("/entry/twin-a/delete", data={**form, "csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and brain.manager.store("agent").get("twin-a") is None


def test_rights_limit_what_is_read_and_written(brain):
    c = _client(brain, {"agent": "r"})
    page = c.get("/?q=jwt+rotation")
    assert "Use JWT key rotation" in page.text and "JWT key rotation: use it" not in page.text
    assert c.get("/entry/jwt-key-rotation-use-it?tier=team").status_code == 403
    assert c.get("/entry/jwt-key-rotation-use-it").status_code == 404  # not in a readable tier
    assert c.get("/?q=jwt&tier=team").status_code == 403
    entry = c.get("/entry/use-jwt-key-rotation?q=jwt")
    assert 'id="edit"' not in entry.text and 'id="accept"' not in entry.text
    csrf = _csrf(c)
    r = c.post("/feedback", data={"csrf": csrf, "entry_id": "use-jwt-key-rotation", "q": "jwt",
                                  "action": "accepted", "tier": "agent"})
    assert r.status_code == 403 and brain.feedback_counts()["accepted"] == 0


def test_edit_reports_every_bad_field_and_refuses_a_stale_form(brain):
    c = _client(brain)
    page = c.get("/entry/use-jwt-key-rotation/edit?tier=agent").text
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page).group(1)
    version = re.search(r'name="version" value="([^"]*)"', page).group(1)
    original = brain.manager.store("agent").get("use-jwt-key-rotation")
    form = {**form_values(original), "csrf": csrf, "tier": "agent", "version": version}
    r = c.post("/entry/use-jwt-key-rotation/edit",
               data={**form, "title": "", "type": "nonsense", "valid_from": "yesterday"})
    assert r.status_code == 400
    errors = dict(re.findall(r'id="error-(\w+)">([^<]*)<', r.text))
    assert set(errors) == {"title", "type", "valid_from"}
    assert brain.manager.store("agent").get("use-jwt-key-rotation") == original
    r = c.post("/entry/use-jwt-key-rotation/edit",
               data={**form, "valid_from": "2026-02-01T00:00:00Z", "valid_until": "2026-01-01T00:00:00Z"})
    assert "must be later than valid_from" in r.text and r.status_code == 400
    r = c.post("/entry/use-jwt-key-rotation/edit", data=form, follow_redirects=True)
    assert "Nothing changed" in r.text  # the same values: nothing is written
    assert brain.manager.store("agent").get("use-jwt-key-rotation").updated_at == original.updated_at
    r = c.post("/entry/use-jwt-key-rotation/edit", data={**form, "version": "1.0"})
    assert r.status_code == 400 and "changed this entry after you opened" in r.text
    r = c.post("/entry/use-jwt-key-rotation/edit",
               data={**form, "tags": "JWT, keys", "severity": "critical"}, follow_redirects=True)
    assert r.status_code == 200 and "Saved." in r.text
    saved = brain.manager.store("agent").get("use-jwt-key-rotation")
    assert saved.tags == ("jwt", "keys") and saved.severity == "critical"
    assert saved.created_at == original.created_at and saved.origin == original.origin


def test_apply_form_keeps_id_origin_and_creation_time():
    original = Entry.create(id="x1", title="T", description="D", origin="user", created_at=100.0)
    result = apply_form(original, {**form_values(original), "title": "T2", "id": "hijack"})
    assert result.errors == {} and result.entry is not None
    assert (result.entry.id, result.entry.origin, result.entry.created_at) == ("x1", "user", 100.0)
    assert result.entry.title == "T2"


def test_review_lists_same_content_and_similar_titles(brain):
    c = _client(brain)
    text = c.get("/review").text
    assert "same content" in text and "twin-a" in text and "twin-b" in text
    assert "similar title" not in text  # the two JWT titles live in different tiers
    assert title_key("Use JWT key rotation") == title_key("JWT key rotation: use it")
    assert title_key("Use JWT key rotation") != title_key("JWT key rotation")
    brain.manager.capture(Entry.create(title="Rotation of JWT keys, use", description="x"), "agent")
    assert "similar title" in c.get("/review").text


def test_server_errors_show_no_traceback(brain):
    def broken(principal):
        raise RuntimeError("secret internals /etc/passwd")

    c = TestClient(create_web_app(broken, LocalAccess(Principal("me", {"agent": "rw"}), "t")),
                   base_url=BASE, raise_server_exceptions=False)
    c.cookies.set("tiervault_token", "t")
    r = c.get("/health")
    assert r.status_code == 500
    assert "Traceback" not in r.text and "secret internals" not in r.text
    assert "Something went wrong" in r.text


def test_bad_filters_and_pages_are_explained_not_crashed(brain):
    c = _client(brain)
    r = c.get("/?q=jwt&severity=huge")
    assert r.status_code == 400 and "huge" in r.text and "is not one of" in r.text
    assert c.get("/browse?page=abc").status_code == 400
    assert c.get("/browse?severity=nope").status_code == 400
    assert c.get("/browse?tier=agent&page=99").status_code == 200


def test_tiervault_ui_listens_on_loopback_with_a_fresh_token(tmp_path):
    config = tmp_path / "agent.yaml"
    config.write_text("agent_id: me\ntiers:\n  agent: ./agent.db\n")
    urls = []
    for _ in range(2):
        proc = subprocess.Popen([sys.executable, "-m", "tiervault", "--config", str(config), "ui"],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            url = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]{20,})", line)
            assert url, line
            urls.append(url.group(2))
            base = f"http://127.0.0.1:{url.group(1)}"
            assert httpx.get(base + "/").status_code == 401
            assert httpx.get(base + "/?token=wrong").status_code == 401
            r = httpx.get(url.group(0))
            assert r.status_code == 303 and "tiervault_token=" in r.headers["set-cookie"]
            assert httpx.get(base + "/health", cookies={"tiervault_token": url.group(2)}).status_code == 200
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert urls[0] != urls[1]
    principal = local_principal(load_settings(str(config)))
    assert principal.can_write("agent") and principal.agent_id == "me"


def test_tiervault_ui_on_a_taken_port_says_so_without_a_traceback(tmp_path):
    import socket

    config = tmp_path / "agent.yaml"
    config.write_text("agent_id: me\ntiers:\n  agent: ./agent.db\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "tiervault", "--config", str(config), "ui",
                            "--port", str(port)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_a_malformed_post_is_a_400_page_and_changes_nothing(brain):
    c = _client(brain)
    csrf = _csrf(c)
    r = c.post("/entry/twin-a/delete", content=f"csrf={csrf}&tier=agent&confirm=twin-a",
               headers={"content-type": "application/x-www-form-urlencoded",
                        "content-length": "many"})
    assert r.status_code == 400 and "Content-Length" in r.text and "Traceback" not in r.text
    r = c.post("/entry/twin-a/delete", content=b"--x\r\nbroken",
               headers={"content-type": "multipart/form-data"})  # no boundary
    assert r.status_code == 400 and "could not be read" in r.text
    assert brain.manager.store("agent").get("twin-a") is not None
