"""A bounded, deterministic fuzz of every route of the HTTP API (issue 35): requests built from
the server's own OpenAPI schema, with hostile values (NUL bytes, lone surrogates, NaN and
infinities, huge numbers, over-long names, unknown fields, wrong types, broken JSON and
multipart), sent to a real uvicorn on loopback over one keep-alive client. No reply may be a
5xx, and none may close the connection.

``hypothesis`` drives it with ``derandomize=True`` (the same examples on every run) and a fixed
``max_examples``; ``deadline=None`` because a shared CPU makes per-example timing meaningless.
Random examples seldom get every other field right, so a deterministic sweep beside it gives
each field and path parameter each hostile value with the rest of the request valid (it found a
``~user`` video reference that reached a 500 past validation).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: examples over all routes together
EXAMPLES = 300

weird_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "a\x00b",
            "\ud800",
            "x" * 300,
            "../../etc/passwd",
            "/etc/passwd",
            "clip.mp4",
            "small",
            "dvd",
            "~",
            "~nosuchuser/x.mp4",
            "%00",
            "é" * 200,
            "structure",
            "caption",
        ]
    ),
)
weird_number = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, 10, 100, 101, 1000, 1001, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
)
#: strings that pass validation but may trip what comes after it
plausible = st.sampled_from(
    [
        "small",
        "clip.mp4",
        "dvd",
        "retrieval",
        "hello",
        "structure",
        "caption",
        "~nosuchuser/x.mp4",
        "~nosuchuser",
        "..",
        "a/b",
        "/etc/passwd",
        "/",
        "\\",
        "C:\\x.mp4",
        "é" * 100,
        "x" * 255,
        " ",
        "%00",
    ]
)
scalar = st.one_of(st.none(), st.booleans(), weird_number, weird_text)
anything = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(weird_text, inner, max_size=4)
    ),
    max_leaves=12,
)


def _value(schema: dict[str, Any], components: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly values of the schema's type (lists of up to 30 items, past the bounds), and now and
    then anything at all."""
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        return st.one_of(*(_value(s, components) for s in schema["anyOf"]))
    kind = schema.get("type")
    typed: st.SearchStrategy[Any]
    if kind == "string":
        typed = (
            st.sampled_from(schema["enum"])
            if "enum" in schema
            else st.one_of(plausible, plausible, plausible, weird_text)
        )
    elif kind == "integer":
        typed = st.one_of(st.integers(1, 20), weird_number)
    elif kind == "array":
        items = _value(schema.get("items", {}), components)
        typed = st.one_of(st.lists(items, max_size=2), st.lists(items, max_size=30))
    elif kind == "null":
        typed = st.none()
    else:
        typed = anything
    return st.one_of(typed, typed, typed, typed, typed, anything)


def _body(schema: dict[str, Any], components: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    fields = schema.get("properties", {})
    required = set(schema.get("required", ()))
    values = {name: _value(s, components) for name, s in fields.items()}
    # Well-formed (the required fields, some others) to reach the route's logic; loose (any
    # field may be missing, an unknown one may come); or anything at all.
    formed = st.fixed_dictionaries(
        {k: v for k, v in values.items() if k in required},
        optional={k: v for k, v in values.items() if k not in required},
    )
    loose = st.fixed_dictionaries({}, optional=values | {"unknown_field": anything})
    return st.one_of(formed, formed, formed, loose, anything)


def _encode(body: Any, broken: int) -> bytes:
    text = json.dumps(body, allow_nan=True, ensure_ascii=bool(broken % 2))
    if broken == 3:
        return text[: len(text) // 2].encode()  # cut short
    if broken == 4:
        return text.encode("utf-8", "surrogatepass") + b"\xff"  # not UTF-8
    return text.encode("utf-8", "surrogatepass")


multipart_bodies = st.one_of(
    st.binary(max_size=200),
    st.builds(
        lambda name, data, end: (
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="'
            + name.encode("utf-8", "surrogatepass")
            + b'"\r\n\r\n'
            + data
            + (b"\r\n--b--\r\n" if end else b"")
        ),
        weird_text,
        st.binary(max_size=200),
        st.booleans(),
    ),
)


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    ops = []
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            ops.append((method.upper(), path, op))
    return ops


@st.composite
def _requests(draw: Any, schema: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    components = schema.get("components", {}).get("schemas", {})
    method, path, op = draw(st.sampled_from(_operations(schema)))
    for param in op.get("parameters", []):
        if param["in"] == "path":
            value = draw(weird_text.filter(lambda s: s not in ("", ".", "..")))
            safe = quote(value.encode("utf-8", "surrogatepass"), safe="")
            path = path.replace("{" + param["name"] + "}", safe)
    kwargs: dict[str, Any] = {}
    if path == "/api/videos/upload":
        kwargs["content"] = draw(multipart_bodies)
        kwargs["headers"] = {
            "content-type": draw(
                st.sampled_from(
                    ["multipart/form-data; boundary=b", "multipart/form-data", "text/plain"]
                )
            )
        }
    elif "requestBody" in op:
        body_schema = op["requestBody"]["content"]["application/json"]["schema"]
        body = draw(_body(body_schema, components))
        kwargs["content"] = _encode(body, draw(st.integers(0, 9)))
        kwargs["headers"] = {"content-type": "application/json"}
    return method, path, kwargs


def _check(web: httpx.Client, method: str, path: str, **kwargs: Any) -> int:
    """Send one request; fail on a 5xx or a closed connection; the status."""
    with web.stream(method, path, **kwargs) as r:
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            r.read()  # (a job's live events: the status is what is tested)
    assert r.status_code < 500, (method, path, kwargs.get("content", b"")[:200], r.text)
    assert r.headers.get("connection") != "close", (method, path, r.status_code)
    return r.status_code


#: a body each JSON route accepts, which the sweep changes one field at a time
VALID = {
    "RegisterBody": {"path": "clip.mp4"},
    "SearchBody": {"query": "hello"},
    "AskBody": {"videos": ["small"], "question": "hello", "strategy": "retrieval"},
    # a watch of the (finished) clip that ends a second after its last packet
    "StreamBody": {"source": "clip.mp4", "window": "6", "stall": "0.5", "give_up": "1"},
}
#: the values every field and path parameter is given in turn
HOSTILE: list[Any] = [
    "",
    "\x00",
    "\ud800",
    "x" * 300,
    "x" * 5000,
    "~nosuchuser",
    "~nosuchuser/x.mp4",
    "..",
    "../../etc/passwd",
    "/etc/passwd",
    "/",
    "a/b",
    "C:\\x",
    "%00",
    "é" * 200,
    " ",
    None,
    True,
    -1,
    0,
    10**30,
    1.5,
    math.nan,
    math.inf,
    [],
    ["x"] * 65,
    ["\x00"],
    ["~nosuchuser"],
    [".."],
    {},
    {"a": 1},
]


def test_every_field_and_parameter_takes_hostile_values(live_server: Any, media: Path) -> None:
    """A deterministic sweep beside the fuzz: each field of each JSON body (the others valid) and
    each path parameter, given each of :data:`HOSTILE` in turn."""
    live = live_server()
    with httpx.Client(base_url=live.url, timeout=60) as web:
        schema = web.get("/openapi.json").json()
        components = schema["components"]["schemas"]
        codes: set[int] = set()
        for method, path, op in _operations(schema):
            names = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
            for name in names:
                for value in HOSTILE:
                    if not isinstance(value, str) or value in ("", "..", "/"):
                        continue  # not a path segment
                    safe = quote(value.encode("utf-8", "surrogatepass"), safe="")
                    codes.add(_check(web, method, path.replace("{" + name + "}", safe)))
            if "requestBody" not in op or names:
                continue
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            model = ref.rsplit("/", 1)[1]
            for field in components[model]["properties"]:
                for value in HOSTILE:
                    body = VALID[model] | {field: value}
                    content = json.dumps(body, allow_nan=True).encode()
                    headers = {"content-type": "application/json"}
                    codes.add(_check(web, method, path, content=content, headers=headers))
    assert {202, 400, 403, 404, 422} <= codes


def test_no_route_answers_a_5xx_or_drops_the_connection(live_server: Any, media: Path) -> None:
    live = live_server()
    web = httpx.Client(base_url=live.url, timeout=60)
    schema = web.get("/openapi.json").json()
    seen: set[tuple[str, int]] = set()

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(_requests(schema))
    def one(sent: tuple[str, str, dict[str, Any]]) -> None:
        method, path, kwargs = sent
        with web.stream(method, path, **kwargs) as r:
            seen.add((path.split("/")[2], r.status_code))
            if r.headers.get("content-type", "").startswith("text/event-stream"):
                return  # a job's live events: the status is what is tested
            r.read()
        assert r.status_code < 500, (method, path, kwargs.get("content", b"")[:200], r.text)
        assert r.headers.get("connection") != "close", (method, path, r.status_code)

    try:
        one()
    finally:
        web.close()
    codes = {code for _, code in seen}
    # The fuzz reached the routes' logic, not only their validation.
    assert {200, 404, 422} <= codes and any(400 <= c < 500 and c != 422 for c in codes)
