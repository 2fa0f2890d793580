// The HTTP API as the pages use it: the token, JSON requests, media and event-stream URLs,
// and the small DOM and formatting helpers every page shares.

const TOKEN_KEY = "vidagent.token";

// A token given once as ?token=... is kept for the other pages in this tab; sessionStorage, so
// it goes when the tab closes and is never written to disk.
(function adoptTokenFromUrl() {
  const given = new URLSearchParams(location.search).get("token");
  if (given) sessionStorage.setItem(TOKEN_KEY, given);
})();

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// FastAPI says what went wrong in "detail": a string, or a list of field errors (422).
function describe(status, body) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
  }
  return `HTTP ${status}`;
}

export async function api(path, { method = "GET", json, form } = {}) {
  const headers = {};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form !== undefined) {
    body = form; // the browser sets the multipart boundary
  }
  const response = await fetch(path, { method, headers, body });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text };
  }
  if (!response.ok) {
    if (response.status === 401) showTokenPrompt();
    throw new ApiError(response.status, describe(response.status, data));
  }
  return data;
}

// GET URLs the browser fetches itself (<video src>, EventSource) cannot send a header.
export function url(path) {
  if (!token()) return path;
  const sep = path.includes("?") ? "&" : "?";
  return `${path}${sep}token=${encodeURIComponent(token())}`;
}

// The download of an answer's evidence (clips, frames, sheets, subtitles, timeline.md,
// index.json) as a zip: a plain link, so the browser saves it; the token rides in the URL.
export function exportLink(traceId) {
  return el("a", {
    href: url(`/api/traces/${encodeURIComponent(traceId)}/export`),
    id: "export-link",
    class: "button",
    download: `${traceId}-evidence.zip`,
    title: "Each cited span as a clip, frames, contact sheets, subtitles, timeline.md and index.json",
  }, "Download evidence (.zip)");
}

// Times written in text ("[01:05]", "0:01:05", "1:02:03.5") as links calling onTime(seconds);
// the rest stays text. A time past ``limit`` seconds is left as text.
const TIME_IN_TEXT = /\[?\b(?:(\d{1,3}):)?(\d{1,3}):([0-5]\d)(?:\.(\d+))?\b\]?/g;
export function linkTimes(text, onTime, limit = Infinity) {
  const out = [];
  let last = 0;
  for (const m of String(text ?? "").matchAll(TIME_IN_TEXT)) {
    const [whole, h, mi, s, frac] = m;
    const seconds = Number(h || 0) * 3600 + Number(mi) * 60 + Number(s) + Number(frac ? `0.${frac}` : 0);
    if (seconds > limit) continue;
    out.push(text.slice(last, m.index));
    out.push(el("a", {
      href: "#", class: "time-link", title: "Play from here", dataset: { t: seconds },
      onclick: (event) => { event.preventDefault(); onTime(seconds); },
    }, whole));
    last = m.index + whole.length;
  }
  out.push(String(text ?? "").slice(last));
  return out.filter((part) => part !== "");
}

export function mediaUrl(videoId) {
  return url(`/api/videos/${encodeURIComponent(videoId)}/media`);
}

// Every kind of event a job's stream may carry; EventSource delivers named events only to
// listeners registered for that name. Trace kinds are vidagent.trace's (and the names the
// API documentation uses for two of them).
export const TRACE_KINDS = [
  "run_started", "model_call", "agent_turn", "tool_called", "observed", "phase",
  "phase_changed", "child_started", "search_round", "format_error", "budget_exhausted",
  "answer", "answered", "run_finished",
];

// Streams a job's events: onEvent(kind, data) for each, onEnd(job) once. Returns a close().
export function streamJob(jobId, { onEvent, onEnd, kinds = TRACE_KINDS }) {
  const source = new EventSource(url(`/api/jobs/${encodeURIComponent(jobId)}/events`));
  let ended = false;
  const parse = (message) => {
    try {
      return JSON.parse(message.data);
    } catch {
      return message.data;
    }
  };
  for (const kind of ["progress", ...kinds]) {
    source.addEventListener(kind, (m) => onEvent(kind, parse(m)));
  }
  source.addEventListener("message", (m) => {
    const data = parse(m);
    onEvent((data && data.kind) || "message", data);
  });
  source.addEventListener("end", (m) => {
    ended = true;
    source.close();
    if (onEnd) onEnd(parse(m));
  });
  // The server closes the stream after "end"; an error before it means the connection broke.
  source.onerror = () => {
    if (ended) return;
    source.close();
    api(`/api/jobs/${encodeURIComponent(jobId)}`).then(
      (job) => onEnd && onEnd(job),
      (e) => onEnd && onEnd({ job_id: jobId, state: "failed", error: e.message }),
    );
  };
  return () => source.close();
}

// -- DOM and formatting -----------------------------------------------------------------------

// el("a", {href: "x", class: "y", onclick: f}, "text", child) builds an element.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(node.dataset, value);
    } else if (key === "style" && typeof value === "object") {
      Object.assign(node.style, value);
    } else {
      node.setAttribute(key, value === true ? "" : value);
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function clear(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}

// 75.5 -> "1:15.5"; 3725 -> "1:02:05".
export function clock(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(Number(seconds))) return "–";
  // in tenths first, so that 9.96 s reads 0:10 (not 0:010.0) and 59.97 s 1:00 (not 0:60.0)
  const tenths = Math.round(Number(seconds) * 10);
  const h = Math.floor(tenths / 36000);
  const m = Math.floor((tenths % 36000) / 600);
  const rest = (tenths % 600) / 10;
  const sec = Number.isInteger(rest) ? String(rest) : rest.toFixed(1);
  const padded = rest < 10 ? `0${sec}` : sec;
  return h ? `${h}:${String(m).padStart(2, "0")}:${padded}` : `${m}:${padded}`;
}

// When a video knows when its recording started (ISO-8601), t seconds into it as an ISO-8601
// wall-clock time in UTC ("2026-05-01T09:31:15.500Z", whole seconds without the fraction);
// "" when it does not.
export function wallClock(recordedAt, t) {
  const start = recordedAt ? Date.parse(recordedAt) : NaN;
  if (Number.isNaN(start)) return "";
  return new Date(start + Number(t) * 1000).toISOString().replace(/\.000Z$/, "Z");
}

export function span(t0, t1) {
  return `${clock(t0)}–${clock(t1)}`;
}

export function shorten(text, limit = 240) {
  const s = String(text ?? "");
  return s.length > limit ? `${s.slice(0, limit - 1)}…` : s;
}

export function param(name) {
  return new URLSearchParams(location.search).get(name);
}

export function showError(where, error) {
  const message = error instanceof Error ? error.message : String(error);
  clear(where, el("p", { class: "error", role: "alert" }, message));
}

// A bar above the page asking for the token after a 401.
function showTokenPrompt() {
  if (document.getElementById("token-prompt")) return;
  const input = el("input", { type: "password", placeholder: "API token", "aria-label": "API token" });
  const bar = el(
    "form",
    {
      id: "token-prompt",
      class: "token-prompt",
      onsubmit: (e) => {
        e.preventDefault();
        setToken(input.value.trim());
        location.reload();
      },
    },
    el("span", {}, "This server needs a token."),
    input,
    el("button", { type: "submit" }, "Use token"),
  );
  document.body.prepend(bar);
}

// The header's version label.
export async function showVersion() {
  const slot = document.getElementById("version");
  if (!slot) return;
  try {
    const health = await api("/api/health");
    slot.textContent = `v${health.version}`;
  } catch {
    slot.textContent = "";
  }
}
