// The streams page: live and growing sources being watched (/api/streams), a form to start
// one, stop buttons, and for ?id=VIDEO_ID the stream's alerts as they arrive (its watch job's
// event stream) and its timeline growing window by window, in stream and wall-clock time.

import {
  api, clear, clock, el, param, showError, showVersion, span, streamJob, wallClock,
} from "./api.js";

const WATCH_KINDS = ["window", "alert", "source_down", "outage", "summary", "retention", "alert-post-failed"];
const LIST_EVERY_MS = 2000;

const listBody = document.querySelector("#streams tbody");
const startStatus = document.getElementById("start-status");
const chosen = param("id");

// -- the list ---------------------------------------------------------------------------------

function liveEdge(stream) {
  const wall = wallClock(stream.recorded_at, stream.live_edge);
  return [clock(stream.live_edge), wall ? el("div", { class: "muted mono" }, wall) : null];
}

function streamRow(stream) {
  const stop = stream.running
    ? el("button", { class: "danger", onclick: () => stopStream(stream.video_id) }, "stop")
    : null;
  const state = stream.running ? "running" : { ended: "done", stopped: "done" }[stream.state] || stream.state;
  return el(
    "tr",
    { dataset: { videoId: stream.video_id, state: stream.state } },
    el("td", {},
      el("a", { href: `streams.html?id=${encodeURIComponent(stream.video_id)}` }, stream.name || stream.video_id),
      el("div", { class: "muted mono" }, stream.source)),
    el("td", {}, el("span", { class: `badge ${state}` }, stream.state)),
    el("td", { class: "time live-edge" }, liveEdge(stream)),
    el("td", { class: "alert-count" }, String(stream.alert_count)),
    el("td", {}, String((stream.outages || []).length)),
    el("td", {}, stop),
  );
}

async function loadList() {
  try {
    const { streams } = await api("/api/streams");
    if (!streams.length) {
      clear(listBody, el("tr", {}, el("td", { colspan: 6, class: "empty" }, "No streams yet: watch one below.")));
      return;
    }
    clear(listBody, streams.map(streamRow));
  } catch (e) {
    clear(listBody, el("tr", {}, el("td", { colspan: 6, class: "error" }, e.message)));
  }
}

async function stopStream(videoId) {
  try {
    await api(`/api/streams/${encodeURIComponent(videoId)}/stop`, { method: "POST" });
    clear(startStatus, el("p", { class: "muted" }, `Stopping ${videoId} after the window being read.`));
  } catch (e) {
    showError(startStatus, e);
  }
  loadList();
}

document.getElementById("start-stream").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target.elements;
  const body = { source: form.source.value.trim() };
  body.alerts = form.alerts.value.split("\n").map((a) => a.trim()).filter(Boolean);
  if (form.window.value.trim()) body.window = form.window.value.trim();
  try {
    const started = await api("/api/streams", { method: "POST", json: body });
    location.href = `streams.html?id=${encodeURIComponent(started.video_id)}`;
  } catch (e) {
    showError(startStatus, e);
  }
});

// -- one stream -------------------------------------------------------------------------------

const detail = {
  stream: null, // the details as last fetched, with the windows and alerts seen since
  windows: [],
  alerts: [],
  outages: [],
  down: null, // the source_down event of an outage under way
};

function alertItem(alert) {
  const wall = alert.at ? ` (${alert.at})` : "";
  return el("li", { class: "alert", dataset: { t0: alert.t0, text: alert.text } },
    el("strong", {}, alert.text), " ",
    el("span", { class: "time" }, `${span(alert.t0, alert.t1)}${wall}`), " · ",
    el("span", { class: "muted" }, `${alert.source}: “${alert.quote}”`));
}

function renderAlerts() {
  const box = document.getElementById("alerts");
  if (!detail.alerts.length) {
    clear(box, el("li", { class: "empty" }, "No alerts yet."));
    return;
  }
  clear(box, [...detail.alerts].reverse().map(alertItem));
}

function renderTimeline() {
  const stream = detail.stream;
  const edge = Math.max(Number(stream.live_edge) || 0, ...detail.windows.map((w) => w.t1), 0.001);
  const bar = el("div", { class: "timeline stream-timeline", dataset: { edge } });
  const at = (t0, t1) => ({ left: `${(100 * t0) / edge}%`, width: `${(100 * Math.max(0, t1 - t0)) / edge}%` });
  for (const w of detail.windows) {
    bar.append(el("div", { class: "window", title: `window ${w.index}: ${span(w.t0, w.t1)}`, style: at(w.t0, w.t1) }));
  }
  for (const o of detail.outages) {
    const t1 = o.at + (o.lost || 0);
    bar.append(el("div", { class: "outage", title: `outage: ${o.reason}`, style: at(o.at, Math.max(t1, o.at + edge / 200)) }));
  }
  for (const a of detail.alerts) {
    bar.append(el("div", { class: "mark", title: `${a.text}: ${span(a.t0, a.t1)}`, style: at(a.t0, a.t1) }));
  }
  const wall = wallClock(stream.recorded_at, edge);
  clear(document.getElementById("stream-timeline"),
    el("div", { class: "timeline-row" },
      el("div", { class: "label" },
        el("span", {}, `0:00${stream.recorded_at ? ` (${wallClock(stream.recorded_at, 0)})` : ""}`),
        el("span", { id: "live-edge" }, `live edge ${clock(edge)}${wall ? ` (${wall})` : ""}`)),
      bar));
}

function renderWindows() {
  const stream = detail.stream;
  const rows = [
    ...detail.windows.map((w) => ({ t: w.t0, t1: w.t1, what: `window ${w.index}: ${w.clips} clips, indexed in ${w.seconds} s`, kind: "window" })),
    ...detail.outages.map((o) => ({ t: o.at, t1: o.at + (o.lost || 0), what: `outage: ${o.reason} for ${Math.round(o.seconds || 0)} s${o.lost ? `, ${o.lost} s lost` : ""}`, kind: "outage" })),
  ].sort((a, b) => b.t - a.t);
  clear(document.querySelector("#windows tbody"), rows.map((r) =>
    el("tr", { class: r.kind },
      el("td", { class: "time" }, span(r.t, r.t1)),
      el("td", { class: "mono" }, wallClock(stream.recorded_at, r.t)),
      el("td", {}, r.what))));
}

function renderMeta() {
  const s = detail.stream;
  const edge = Math.max(Number(s.live_edge) || 0, ...detail.windows.map((w) => w.t1));
  // an outage under way (the source_down event; over at the next window or outage event)
  const down = s.running && detail.down
    ? el("p", { class: "error", id: "source-down" },
      `Source down since ${clock(detail.down.at)} of the stream (${detail.down.reason}): `
      + `reconnecting, giving up after ${clock(detail.down.give_up_seconds)}.`)
    : null;
  clear(document.getElementById("stream-meta"),
    el("span", { class: `badge ${s.running ? "running" : "done"}`, id: "stream-state" }, s.state), " ",
    `${s.source} · live edge ${clock(edge)} · ${detail.alerts.length} alerts · ${detail.outages.length} outages`,
    down,
    s.error ? el("p", { class: "error" }, s.error) : null);
}

function render() {
  renderMeta();
  renderTimeline();
  renderWindows();
  renderAlerts();
}

// The fetched items, then those seen only on the event stream, in stream time.
function merge(fetched, seen, key) {
  const out = [...(fetched || [])];
  const known = new Set(out.map(key));
  for (const item of seen) if (!known.has(key(item))) out.push(item);
  return out.sort((a, b) => (a.t0 ?? a.at) - (b.t0 ?? b.at));
}

async function loadStream() {
  const stream = await api(`/api/streams/${encodeURIComponent(chosen)}`);
  detail.stream = stream;
  // what the event stream brought while this was fetched stays
  detail.windows = merge(stream.recent_windows, detail.windows, (w) => w.index);
  detail.alerts = merge(stream.alerts, detail.alerts, (a) => `${a.text}@${a.t0}`);
  detail.outages = merge(stream.outages, detail.outages, (o) => `${o.at}@${o.began}`);
  document.getElementById("stream-title").textContent = stream.name || stream.video_id;
  render();
  return stream;
}

let reloading = false;

async function followStream() {
  const box = document.getElementById("stream");
  box.hidden = false;
  try {
    const stream = await loadStream();
    if (!stream.running || !stream.job_id) return;
    // The job's event stream replays what it emitted so far: windows and alerts already
    // shown are matched by their index and start, not drawn twice.
    streamJob(stream.job_id, {
      kinds: WATCH_KINDS,
      onEvent: (kind, data) => {
        if (kind === "window" && !detail.stream.recorded_at && !reloading) {
          // the first window made the Library's record: its name and wall clock come with it
          reloading = true;
          loadStream().catch((e) => showError(box, e)).finally(() => { reloading = false; });
        }
        if (kind === "source_down") {
          detail.down = data;
        } else if (kind === "window") {
          // a window read before the source went down (indexed after it, on a busy machine)
          // does not end the outage: the windows from the event's `window` on do
          if (detail.down && data.index >= detail.down.window) detail.down = null;
          detail.windows = merge(detail.windows, [data], (w) => w.index);
          detail.stream.live_edge = Math.max(detail.stream.live_edge, data.t1);
        } else if (kind === "alert") {
          detail.alerts = merge(detail.alerts, [data], (a) => `${a.text}@${a.t0}`);
        } else if (kind === "outage") {
          detail.down = null;
          detail.outages = merge(detail.outages, [data], (o) => `${o.at}@${o.began}`);
        } else {
          return;
        }
        render();
      },
      onEnd: () => loadStream().catch((e) => showError(box, e)),
    });
  } catch (e) {
    showError(document.getElementById("stream-meta"), e);
  }
}

showVersion();
loadList();
setInterval(loadList, LIST_EVERY_MS);
if (chosen) followStream();
