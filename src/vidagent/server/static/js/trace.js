// The trace viewer: the saved traces, or one of them drawn as the ask page draws a live run.

import { api, clear, el, exportLink, param, shorten, showError, showVersion } from "./api.js";
import { TraceView } from "./trajectory.js";

async function list() {
  document.getElementById("trace-list").hidden = false;
  const body = document.querySelector("#traces tbody");
  try {
    const { traces } = await api("/api/traces");
    if (!traces.length) {
      clear(body, el("tr", {}, el("td", { colspan: 4, class: "empty" }, "No saved traces yet.")));
      return;
    }
    clear(body, traces.map((t) => el("tr", {},
      el("td", { class: "time" }, el("a", { href: `trace.html?id=${encodeURIComponent(t.id)}` }, t.started_at || t.id)),
      el("td", {}, t.strategy || ""),
      el("td", {}, shorten(t.question, 140)),
      el("td", {}, shorten(t.answer ?? "", 80)))));
  } catch (e) {
    clear(body, el("tr", {}, el("td", { colspan: 4, class: "error" }, e.message)));
  }
}

async function show(id) {
  const box = document.getElementById("trace-view");
  box.hidden = false;
  try {
    const { events } = await api(`/api/traces/${encodeURIComponent(id)}`);
    const view = new TraceView({
      steps: document.getElementById("steps"),
      answer: document.getElementById("answer"),
      timelines: document.getElementById("timelines"),
      tree: document.getElementById("tree"),
      player: document.getElementById("evidence-player"),
    });
    view.addAll(events);
    const started = events.find((e) => e.kind === "run_started");
    if (started) {
      document.getElementById("question").textContent = started.question;
      document.title = `vidagent · ${shorten(started.question, 60)}`;
      document.getElementById("trace-meta").textContent =
        [started.strategy, started.started_at, id].filter(Boolean).join(" · ");
    }
    if (events.some((e) => e.kind === "answer")) {
      document.getElementById("trace-meta").after(el("p", {}, exportLink(id)));
    }
  } catch (e) {
    showError(box, e);
  }
}

showVersion();
const id = param("id");
if (id) show(id);
else list();
