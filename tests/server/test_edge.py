"""Safe by default (issue 35): Host and Origin checks, bounded input, strong tokens, and errors
that stay 4xx and keep the connection open. A real uvicorn on loopback, driven over sockets
as a browser or an attacker's page would; fake models, a real indexed clip."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from clirun import vidagent

from vidagent.app.limits import MAX_BODY_BYTES, MAX_OPTIONS, check_options
from vidagent.config import Settings
from vidagent.exceptions import ConfigError, UserError
from vidagent.server.app import create_app
from vidagent.server.security import HostRule, check_token, redact_target

ATTACKER = "http://attacker.example"


def raw(base: str, requests: list[bytes]) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``requests`` one after another on ONE keep-alive connection; each reply's status,
    headers and body. Fails when the server closes the connection before the last reply."""
    host, port = base.removeprefix("http://").split(":")
    replies = []
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        stream = sock.makefile("rb")
        for request in requests:
            sock.sendall(request)
            status_line = stream.readline()
            assert status_line, "the server closed the connection"
            status = int(status_line.split()[1])
            headers: dict[str, str] = {}
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = stream.read(int(headers.get("content-length", "0")))
            replies.append((status, headers, body))
    return replies


def request(
    method: str,
    path: str,
    body: bytes = b"",
    host: str = "127.0.0.1",
    headers: dict[str, str] | None = None,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def post_json(path: str, text: str, **kw: Any) -> bytes:
    headers = {"Content-Type": "application/json", **kw.pop("headers", {})}
    return request("POST", path, text.encode("utf-8", "surrogatepass"), headers=headers, **kw)


# -- 1. cross-site and DNS-rebinding requests -------------------------------------------------


def test_a_rebinding_host_or_a_foreign_origin_is_refused(live_server: Any, media: Path) -> None:
    live = live_server()
    port = live.url.rsplit(":", 1)[1]
    # DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser sends its Host.
    r = httpx.get(f"{live.url}/api/videos", headers={"Host": f"attacker.example:{port}"})
    assert r.status_code == 421 and "Host" in r.json()["detail"]
    assert httpx.get(f"{live.url}/", headers={"Host": "attacker.example"}).status_code == 421
    # A page on another site posts a form (no preflight for multipart): nothing is written.
    files = {"file": ("x.mp4", (media / "clip.mp4").read_bytes(), "video/mp4")}
    r = httpx.post(f"{live.url}/api/videos/upload", files=files, headers={"Origin": ATTACKER})
    assert r.status_code == 403 and "cross-origin" in r.json()["detail"]
    assert not (media / "uploads").exists()
    assert httpx.get(f"{live.url}/api/jobs").json() == {"jobs": []}
    r = httpx.delete(f"{live.url}/api/videos/small", headers={"Origin": "null"})
    assert r.status_code == 403
    assert len(httpx.get(f"{live.url}/api/videos").json()["videos"]) == 1
    # The server's own pages (same origin) and names of loopback still work.
    own = {"Origin": live.url}
    assert httpx.post(f"{live.url}/api/search", json={"query": "x"}, headers=own).status_code == 200
    for name in ("localhost", "[::1]", "127.0.0.1"):
        assert httpx.get(f"{live.url}/api/health", headers={"Host": f"{name}:{port}"}).is_success


def test_cors_origins_and_allowed_hosts_are_let_in(live_server: Any) -> None:
    live = live_server(cors_origins=["http://ui.example:5173"], allowed_hosts=["vid.example"])
    ok = httpx.post(
        f"{live.url}/api/search", json={"query": "x"}, headers={"Origin": "http://ui.example:5173"}
    )
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "http://ui.example:5173"
    assert httpx.get(f"{live.url}/api/health", headers={"Host": "vid.example"}).is_success
    proxied = {"Host": "vid.example", "Origin": "https://vid.example"}  # TLS ends at the proxy
    assert httpx.post(f"{live.url}/api/search", json={"query": "x"}, headers=proxied).is_success
    other = {"Origin": "http://ui.example:5174"}
    assert (
        httpx.post(f"{live.url}/api/search", json={"query": "x"}, headers=other).status_code == 403
    )


def test_the_host_rule_follows_the_bind() -> None:
    loopback = HostRule("127.0.0.1")
    assert loopback.host_ok("localhost:8000") and loopback.host_ok("[::1]")
    assert not loopback.host_ok("192.168.1.5:8000") and not loopback.host_ok(None)
    assert not loopback.host_ok("127.0.0.1.attacker.example")
    everywhere = HostRule("0.0.0.0", allowed_hosts=["Vid.Example."])
    assert everywhere.host_ok("192.168.1.5:8000") and everywhere.host_ok("[fe80::1]:80")
    assert everywhere.host_ok(socket.gethostname()) and everywhere.host_ok("vid.example")
    assert not everywhere.host_ok("attacker.example")
    one = HostRule("192.168.1.5")
    assert one.host_ok("192.168.1.5:8000") and not one.host_ok("10.0.0.1")
    assert loopback.origin_ok(None, "127.0.0.1:8000")
    assert loopback.origin_ok("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert not loopback.origin_ok("http://127.0.0.1:9999", "127.0.0.1:8000")
    assert not loopback.origin_ok("null", "127.0.0.1:8000")


def test_vidagent_serve_refuses_a_rebinding_request(_isolated_home: Path) -> None:
    """As the README starts it: ``vidagent serve`` (loopback, no token), as a process."""
    import os
    import subprocess
    import sys
    import time

    from liveserver import free_port

    port = free_port()
    env = {**os.environ, "VIDAGENT_HOME": str(_isolated_home), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "vidagent", "serve", "--port", str(port)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                ok = httpx.get(f"http://127.0.0.1:{port}/api/health")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("vidagent serve did not start") from None
                time.sleep(0.2)
        assert ok.status_code == 200
        bad = {"Host": f"attacker.example:{port}"}
        assert httpx.get(f"http://127.0.0.1:{port}/api/videos", headers=bad).status_code == 421
        r = httpx.post(
            f"http://127.0.0.1:{port}/api/videos", json={"path": "x"}, headers={"Origin": ATTACKER}
        )
        assert r.status_code == 403
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


# -- 2. bounded, validated input; errors keep the connection ----------------------------------


def test_bad_input_is_4xx_and_the_connection_stays_usable(live_server: Any, media: Path) -> None:
    live = live_server()
    long_name = "x" * 300
    bad = [
        (post_json("/api/search", '{"query": "x", "top": NaN}'), 422),
        (post_json("/api/search", '{"query": "x", "top": Infinity}'), 422),
        (post_json("/api/search", '{"query": "\\ud800"}'), 422),
        (post_json("/api/search", json.dumps({"query": "x" * 2001})), 422),
        (post_json("/api/search", json.dumps({"query": "x", "top": 101})), 422),
        (post_json("/api/search", '{"query": "\xff"}'.replace("\xff", "\udcff")), 422),
        (post_json("/api/videos", json.dumps({"path": "clip\x00.mp4"})), 422),
        (post_json("/api/videos", json.dumps({"path": long_name + ".mp4"})), 422),
        (post_json("/api/videos", json.dumps({"path": "/x" * 2100})), 422),
        (request("GET", "/api/videos/%00"), 422),
        (request("GET", f"/api/videos/{long_name}"), 422),
        (request("GET", f"/api/traces/{long_name}/replay"), 422),
        (request("GET", "/api/jobs/a%00b"), 422),
        (
            post_json(
                "/api/ask",
                json.dumps({"videos": ["small"], "question": "q", "options": ["o"] * 27}),
            ),
            422,
        ),
        (post_json("/api/ask", json.dumps({"videos": ["small"], "question": "q" * 8001})), 422),
        (
            request(
                "POST",
                "/api/videos/upload",
                b"--b\r\nContent-Disposition: form-data; name=file\r\n\r\nabc",
                headers={"Content-Type": "multipart/form-data; boundary=b"},
            ),
            400,
        ),
        (
            request(
                "POST",
                "/api/videos/upload",
                b"no boundary here at all",
                headers={"Content-Type": "multipart/form-data; boundary=zz"},
            ),
            400,
        ),
        (post_json("/api/search", "{"), 422),
        (post_json("/api/ask", json.dumps({"videos": ["~nosuchuser"], "question": "q"})), 400),
        (post_json("/api/videos", json.dumps({"path": "~nosuchuser/x.mp4"})), 400),
        (post_json("/api/search", json.dumps({"query": "x" * MAX_BODY_BYTES})), 413),
    ]
    replies = raw(live.url, [r for r, _ in bad] + [request("GET", "/api/health")])
    for (sent, expected), (status, headers, body) in zip(bad, replies, strict=False):
        assert status == expected, (sent[:80], status, body[:200])
        assert headers["content-type"] == "application/json" and b"\n" not in body
        assert b"Traceback" not in body and long_name.encode() not in body
    assert replies[-1][0] == 200  # the same connection, after every error
    assert not (media / "uploads").exists() or list((media / "uploads").iterdir()) == []
    assert httpx.get(f"{live.url}/api/jobs").json() == {"jobs": []}


def test_a_body_over_the_limit_is_413_before_it_is_read(live_server: Any) -> None:
    live = live_server()
    huge = json.dumps({"query": "x" * (MAX_BODY_BYTES + 10)})
    r = httpx.post(
        f"{live.url}/api/search", content=huge, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and "limit of 1048576 bytes" in r.json()["detail"]

    def chunks() -> Any:  # no Content-Length: refused as it streams
        yield b'{"query": "'
        for _ in range(200):
            yield b"x" * 10_000
        yield b'"}'

    r = httpx.post(f"{live.url}/api/search", content=chunks())
    assert r.status_code == 413
    assert httpx.post(f"{live.url}/api/search", json={"query": "x"}).status_code == 200


def test_an_upload_that_is_not_a_video_is_refused_and_deleted(
    live_server: Any, media: Path
) -> None:
    live = live_server()
    files = {"file": ("notes.mp4", b"these are not frames" * 100, "video/mp4")}
    r = httpx.post(f"{live.url}/api/videos/upload", files=files)
    assert r.status_code == 415 and r.json()["detail"].startswith("notes.mp4: not a video")
    assert list((media / "uploads").iterdir()) == []
    assert httpx.get(f"{live.url}/api/jobs").json() == {"jobs": []}


def test_a_folder_is_not_a_missing_file_and_an_ambiguous_id_is_a_conflict(
    live_server: Any, media: Path
) -> None:
    from vidagent.exceptions import AmbiguousVideoError
    from vidagent.server.app import _status

    live = live_server()
    (media / "clips").mkdir()
    r = httpx.post(f"{live.url}/api/videos", json={"path": "clips"})
    assert (r.status_code, r.json()["detail"]) == (
        400,
        "clips is a folder; name each video file in it",
    )
    # "matches several videos (…); give more of the id": there, unlike a 404's
    assert _status(AmbiguousVideoError("'a' matches several videos")) == 409


def test_more_than_26_options_are_refused_in_one_line_everywhere(
    api_settings: Settings, _isolated_home: Path, small_video: Path
) -> None:
    assert MAX_OPTIONS == 26
    check_options([f"o{i}" for i in range(26)])
    with pytest.raises(ConfigError, match="27 options given; .* at most 26 \\(lettered A to Z\\)"):
        check_options(["o"] * 27)
    message = "27 options given; a multiple-choice question takes at most 26 (lettered A to Z)"
    api = create_app(api_settings)
    from fastapi.testclient import TestClient

    with TestClient(api, base_url="http://127.0.0.1") as web:
        body = {"videos": ["small"], "question": "which?", "options": ["o"] * 27}
        r = web.post("/api/ask", json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["msg"] == message
        assert (
            web.get("/openapi.json").json()["components"]["schemas"]["AskBody"]["properties"][
                "options"
            ]["maxItems"]
            == 26
        )
    options = [a for i in range(27) for a in ("-o", f"option {i}")]
    out = vidagent("ask", str(small_video), "which?", *options, home=_isolated_home)
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [f"error: {message}"]
    # a blank option was answered "(A) ": it names nothing
    with pytest.raises(ConfigError, match="option B is blank; every option needs its text"):
        check_options(["yes", "  "])
    with TestClient(api, base_url="http://127.0.0.1") as web:
        r = web.post("/api/ask", json={"videos": ["small"], "question": "?", "options": ["", "x"]})
        assert r.status_code == 422 and "option A is blank" in r.json()["detail"][0]["msg"]
    out = vidagent("ask", str(small_video), "which?", "-o", "", "-o", "x", home=_isolated_home)
    assert out.stderr.strip().splitlines() == [
        "error: option A is blank; every option needs its text"
    ]
    # one option is no choice: it was answered "(A)" whatever the video showed
    one = "one option given; a multiple-choice question takes two or more (none: an open question)"
    with pytest.raises(ConfigError, match=re.escape(one)):
        check_options(["yes"])
    with TestClient(api, base_url="http://127.0.0.1") as web:
        r = web.post("/api/ask", json={"videos": ["small"], "question": "?", "options": ["x"]})
        assert r.status_code == 422 and r.json()["detail"][0]["msg"] == one
    out = vidagent("ask", str(small_video), "which?", "-o", "x", home=_isolated_home)
    assert out.stderr.strip().splitlines() == [f"error: {one}"]
    # an option given twice: an answer naming it names both, and the question had no answer
    twice = "options A and C are both 'Thursday'; every option needs its own text"
    with pytest.raises(ConfigError, match=twice):
        check_options(["Thursday", "Friday", " thursday"])
    with TestClient(api, base_url="http://127.0.0.1") as web:
        body = {"videos": ["small"], "question": "?", "options": ["x", "X "]}
        r = web.post("/api/ask", json=body)
        assert (
            r.status_code == 422 and "options A and B are both 'x'" in r.json()["detail"][0]["msg"]
        )
    out = vidagent("ask", str(small_video), "when?", "-o", "Thursday", "-o", "Thursday",
                   home=_isolated_home)  # fmt: skip
    assert out.returncode == 1 and out.stderr.strip().splitlines() == [
        "error: options A and B are both 'Thursday'; every option needs its own text"
    ]


# -- 3. tokens ------------------------------------------------------------------------------


def test_weak_tokens_are_refused(api_settings: Settings, _isolated_home: Path) -> None:
    for host, token in [("127.0.0.1", " "), ("127.0.0.1", " padded "), ("0.0.0.0", "s3cret")]:
        with pytest.raises(UserError):
            check_token(host, token)
        with pytest.raises(UserError):
            create_app(api_settings, host=host, token=token)
    check_token("0.0.0.0", "a" * 16)
    check_token("127.0.0.1", "s3cret")  # loopback: any real secret
    out = vidagent("serve", "--token", " ", home=_isolated_home)
    assert out.returncode == 1 and out.stderr.strip().splitlines() == [
        "error: the token is blank: give a real secret with --token or VIDAGENT_TOKEN"
    ]
    out = vidagent("serve", "--host", "0.0.0.0", "--token", "short", home=_isolated_home)
    assert out.returncode == 1 and "at least 16 characters" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_token_in_a_query_is_redacted_however_it_is_written() -> None:
    secret = "s3cret-0123456789"
    assert redact_target(f"/api/x?token={secret}&a=1", secret) == "/api/x?token=***&a=1"
    assert redact_target(f"/api/x?%74oken={secret}", secret) == "/api/x?%74oken=***"
    assert redact_target(f"/api/x?%2574oken={secret}") == "/api/x?%2574oken=***"
    assert redact_target(f"/api/x?TOKEN={secret}") == "/api/x?TOKEN=***"
    assert redact_target("/api/x?q=s3cret%2D0123456789", secret) == "/api/x?q=***"
    assert redact_target(f"/api/{secret}/x", secret) == "/***"
    assert redact_target("/api/x?q=1&tokens=2") == "/api/x?q=1&tokens=2"
