// A run's trace drawn three ways, shared by the ask page (events as they stream) and the trace
// viewer (a saved trace): the steps in order, the answer with its evidence as marks on a
// timeline per video, and the trajectory as a tree.
//
// The tree is built only from ids every event carries (vidagent.trace): ``run`` groups events
// into runs, ``child_started`` links a child run to its ``parent`` (under the tool call its
// ``span`` names, when it has one), ``span`` puts a model call inside its tool call, and EEA's
// ``search_round`` nodes nest by their ``parent`` node ids. No strategy is special-cased.

import { clear, clock, el, mediaUrl, shorten, span, wallClock } from "./api.js";

// Both spellings: vidagent.trace's kinds and the names the API documentation uses.
const ANSWER = new Set(["answer", "answered"]);
const PHASE = new Set(["phase", "phase_changed"]);

function args(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value));
    } catch {
      return value;
    }
  }
  return JSON.stringify(value);
}

function dataSummary(data) {
  const entries = Object.entries(data || {});
  if (!entries.length) return "";
  return entries.map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ");
}

// What a step says, by kind; null leaves an event out of the step list (model calls: too many).
function stepBody(e) {
  switch (e.kind) {
    case "run_started":
      return [el("strong", {}, e.question),
        el("div", { class: "muted" }, `${e.strategy} · ${(e.videos || []).map((v) => v.name).join(", ")}`),
        (e.options || []).length ? el("div", {}, e.options.map((o, i) => `(${String.fromCharCode(65 + i)}) ${o}`).join("  ")) : null];
    case "agent_turn":
      return [e.thought ? el("div", { class: "thought" }, e.thought) : null,
        ...(e.tool_calls || []).map((c) => el("div", { class: "mono" }, `→ ${c.name}(${shorten(args(c.arguments), 300)})`))];
    case "tool_called":
      return [el("strong", { class: "tool" }, e.tool), " ", el("code", { class: "arguments" }, shorten(args(e.arguments), 400))];
    case "observed":
      return [el("strong", {}, e.tool), e.error ? el("span", { class: "error" }, " error") : null,
        (e.evidence || []).length ? el("span", { class: "muted" }, ` · ${e.evidence.length} evidence span(s)`) : null,
        e.frames ? el("span", { class: "muted" }, ` · ${e.frames} frames`) : null,
        el("pre", { class: "observation" }, shorten(e.text, 500))];
    case "phase":
    case "phase_changed":
      return [el("strong", {}, `phase: ${e.phase}`), " ", el("span", { class: "muted" }, shorten(dataSummary(e.data), 300))];
    case "child_started":
      return [el("strong", {}, `sub-run ${e.name}`), el("span", { class: "muted" }, ` ${e.child} under ${e.parent}`)];
    case "search_round":
      return [el("strong", {}, `search round ${e.round}`),
        el("span", { class: "muted" }, ` · expanded ${(e.expanded || []).map((n) => n.id).join(", ")}`
          + ` · ${(e.children || []).length} children · entropy ${e.entropy}`),
        e.choice && Object.keys(e.choice).length ? el("div", {}, `choice: ${JSON.stringify(e.choice)}`) : null];
    case "format_error":
      return [el("strong", {}, "format error"), " ", shorten(e.problem, 300)];
    case "budget_exhausted":
      return [el("strong", {}, `${e.budget} budget exhausted`), ` (${e.used} of ${e.limit})`];
    case "answer":
    case "answered":
      return [el("strong", {}, e.text), e.forced ? el("span", { class: "muted" }, ` (forced: ${e.reason}${e.note ? `, ${e.note}` : ""})`) : null];
    case "run_finished":
      return [`${e.steps} steps · ${e.frames} frames · ${e.model_calls} model calls · `
        + `${e.input_tokens + e.output_tokens} tokens · $${Number(e.cost_usd).toFixed(4)} · ${Number(e.seconds).toFixed(1)} s`];
    default:
      return null;
  }
}

export class TraceView {
  /**
   * @param {object} slots elements: steps (<ol>), answer, timelines, tree, player (<video>).
   */
  constructor({ steps, answer, timelines, tree, player }) {
    Object.assign(this, { stepsBox: steps, answerBox: answer, timelinesBox: timelines, treeBox: tree, player });
    this.events = [];
    this.root = null; // the first run's id
    this.videos = new Map(); // video id -> {video_id, name, duration}
    this.runs = new Map(); // run id -> {id, name, parent, span, items: [], children: []}
    this.calls = new Map(); // call id -> tree item of a tool call
    this.nodes = new Map(); // search node id -> node (EEA)
    this.chosen = new Set();
    this.answered = null;
    this.stopAt = null;
    this.treeQueued = false;
  }

  addAll(events) {
    for (const e of events) this.add(e);
  }

  add(event) {
    const e = { ...event, kind: event.kind };
    this.events.push(e);
    this.record(e);
    const body = stepBody(e);
    if (body) this.appendStep(e, body);
    if (ANSWER.has(e.kind) && (e.run === this.root || !this.root)) this.showAnswer(e);
    this.queueTree();
  }

  run(id) {
    if (!this.runs.has(id)) this.runs.set(id, { id, name: "", parent: null, span: "", items: [], children: [] });
    return this.runs.get(id);
  }

  // Folds an event into the tree's model.
  record(e) {
    const id = e.run || "";
    if (e.kind === "run_started") {
      if (this.root === null) this.root = id;
      const run = this.run(id);
      run.name = run.name || e.strategy;
      for (const v of e.videos || []) this.videos.set(v.video_id, v);
    } else if (e.kind === "child_started") {
      if (this.root === null) this.root = id;
      const child = this.run(e.child);
      Object.assign(child, { name: e.name, parent: e.parent, span: e.span || "" });
      this.run(e.parent).children.push(e.child);
    } else if (e.kind === "tool_called") {
      const item = { type: "tool", event: e, observed: null, models: 0 };
      this.calls.set(e.call_id, item);
      this.run(id).items.push(item);
    } else if (e.kind === "observed") {
      const item = this.calls.get(e.call_id);
      if (item) item.observed = e;
    } else if (e.kind === "model_call" && e.span && this.calls.has(e.span)) {
      this.calls.get(e.span).models += 1;
    } else if (e.kind === "search_round") {
      for (const n of [...(e.expanded || []), ...(e.children || [])]) {
        this.nodes.set(n.id, { ...(this.nodes.get(n.id) || {}), ...n });
      }
      if (e.choice && e.choice.segment !== undefined) this.chosen.add(e.choice.segment);
      if (!this.run(id).items.some((i) => i.type === "search")) this.run(id).items.push({ type: "search" });
    } else if (PHASE.has(e.kind) || ANSWER.has(e.kind)) {
      this.run(id).items.push({ type: e.kind, event: e });
    }
    if (this.root === null && id) this.root = id;
  }

  appendStep(e, body) {
    const label = e.run && e.run !== this.root
      ? el("span", { class: "run-label" }, this.runs.get(e.run)?.name || e.run) : null;
    const failed = e.kind === "observed" && e.error ? " failed" : "";
    const kind = PHASE.has(e.kind) ? "phase" : ANSWER.has(e.kind) ? "answer" : e.kind;
    const step = el("li", { class: `step ${kind}${failed}`, dataset: { kind: e.kind, run: e.run || "" } },
      el("span", { class: "when" }, `${Number(e.t || 0).toFixed(1)} s`),
      label, el("span", { class: "kind" }, kind.replace("_", " ")), ...body);
    this.stepsBox.append(step);
    this.stepsBox.scrollTop = this.stepsBox.scrollHeight;
  }

  // -- the answer and its evidence ---------------------------------------------------------------

  showAnswer(e) {
    this.answered = e;
    const letter = e.choice !== null && e.choice !== undefined ? `(${String.fromCharCode(65 + e.choice)}) ` : "";
    const text = letter && !String(e.text).trim().startsWith("(") ? `${letter}${e.text}` : e.text;
    clear(this.answerBox,
      el("p", { class: "answer-text", id: "answer-text" }, text),
      e.forced ? el("p", { class: "muted" }, `Forced: ${e.reason}${e.note ? ` (${e.note})` : ""}`) : null,
      e.confidence !== null && e.confidence !== undefined ? el("p", { class: "muted" }, `confidence ${e.confidence}`) : null,
      e.abstained ? el("p", { class: "abstained" }, `Abstained (${e.abstain_policy}): ${e.abstain_reason}`) : null);
    // Checked citations (label, tightened time) when the trace has them; else the raw spans.
    const cited = (e.citations || []).map((c) => [c.video_id, c.t0, c.t1, c]);
    this.drawTimelines(cited.length ? cited : e.evidence || []);
  }

  drawTimelines(evidence) {
    if (!evidence.length) {
      clear(this.timelinesBox, el("p", { class: "empty" }, "The answer cites no evidence."));
      return;
    }
    const byVideo = new Map();
    for (const [videoId, t0, t1, citation] of evidence) {
      if (!byVideo.has(videoId)) byVideo.set(videoId, []);
      byVideo.get(videoId).push([Number(t0), Number(t1), citation]);
    }
    clear(this.timelinesBox, [...byVideo].map(([videoId, spans]) => this.timeline(videoId, spans)));
  }

  timeline(videoId, spans) {
    const video = this.videos.get(videoId) || { video_id: videoId, name: videoId };
    // Without a known duration the last cited second ends the bar.
    const duration = Number(video.duration) || Math.max(...spans.map(([, t1]) => t1));
    const bar = el("div", { class: "timeline", dataset: { videoId, duration } });
    for (const [t0, t1, citation] of spans) {
      // A checked citation is coloured by its label and says what supports it.
      const label = citation ? ` ${citation.label}` : "";
      const who = citation && citation.speaker ? ` (${citation.speaker})` : "";
      const said = citation && citation.source ? ` · ${citation.source}${who}: "${citation.text}"` : "";
      const wall = wallClock(video.recorded_at, t0);
      const mark = el("div", {
        class: `mark${label}`,
        title: `${citation ? `${citation.label} · ` : ""}${span(t0, t1)}${wall ? ` (${wall})` : ""}${said} · click to play`,
        role: "button", tabindex: 0,
        dataset: { videoId, t0, t1, label: citation ? citation.label : "", wall },
        style: { left: `${(100 * t0) / duration}%`, width: `${(100 * (t1 - t0)) / duration}%` },
      });
      const play = () => {
        for (const m of this.timelinesBox.querySelectorAll(".mark.playing")) m.classList.remove("playing");
        mark.classList.add("playing");
        this.playSpan(videoId, t0, t1);
      };
      mark.addEventListener("click", play);
      mark.addEventListener("keydown", (k) => (k.key === "Enter" || k.key === " ") && play());
      bar.append(mark);
    }
    return el("div", { class: "timeline-row" },
      el("div", { class: "label" },
        el("span", {}, video.name, " ", el("span", { class: "muted" }, spans.map(([a, b]) => span(a, b)).join(", "))),
        el("span", { class: "muted" }, clock(duration))),
      bar);
  }

  // Loads the video if another is showing, seeks to t0, plays, and pauses at t1.
  playSpan(videoId, t0, t1) {
    const player = this.player;
    if (!player) return;
    player.hidden = false;
    if (this.stopAt) player.removeEventListener("timeupdate", this.stopAt);
    this.stopAt = () => {
      if (player.currentTime >= t1) {
        player.pause();
        player.removeEventListener("timeupdate", this.stopAt);
        this.stopAt = null;
      }
    };
    const go = () => {
      player.currentTime = t0;
      player.addEventListener("timeupdate", this.stopAt);
      player.play().catch(() => {}); // autoplay may be refused; the seek still stands
    };
    if (player.dataset.videoId !== videoId) {
      player.dataset.videoId = videoId;
      player.src = mediaUrl(videoId);
      player.addEventListener("loadedmetadata", go, { once: true });
    } else if (player.readyState >= 1) {
      go();
    } else {
      player.addEventListener("loadedmetadata", go, { once: true });
    }
  }

  // -- the tree -----------------------------------------------------------------------------------

  queueTree() {
    if (this.treeQueued) return;
    this.treeQueued = true;
    requestAnimationFrame(() => {
      this.treeQueued = false;
      this.drawTree();
    });
  }

  drawTree() {
    if (!this.treeBox) return;
    const roots = [...this.runs.values()].filter((r) => !r.parent || !this.runs.has(r.parent));
    clear(this.treeBox, roots.length
      ? el("ul", { class: "tree" }, roots.map((r) => this.runNode(r)))
      : el("p", { class: "empty" }, "No steps yet."));
  }

  runNode(run) {
    // Children opened inside a tool call hang under that call; the others under the run.
    const nested = new Set();
    const items = run.items.map((item) => {
      if (item.type !== "tool") return this.itemNode(item);
      const inside = run.children.filter((c) => this.runs.get(c)?.span === item.event.call_id);
      inside.forEach((c) => nested.add(c));
      return this.toolNode(item, inside);
    });
    const loose = run.children.filter((c) => !nested.has(c)).map((c) => this.runNode(this.runs.get(c)));
    return el("li", { dataset: { run: run.id } },
      el("span", { class: "node-run" }, run.name || "run"), " ", el("span", { class: "muted mono" }, run.id),
      items.length || loose.length ? el("ul", {}, items, loose) : null);
  }

  toolNode(item, childRuns) {
    const e = item.event;
    const o = item.observed;
    const result = o ? ` → ${shorten(o.text.replace(/\s+/g, " "), 110)}` : " …";
    return el("li", { class: "tool-node" },
      el("span", { class: "node-tool" }, e.tool),
      el("span", { class: "mono" }, `(${shorten(args(e.arguments), 80)})`),
      el("span", { class: "muted" }, result),
      item.models ? el("span", { class: "muted" }, ` · ${item.models} model call(s)`) : null,
      childRuns.length ? el("ul", {}, childRuns.map((c) => this.runNode(this.runs.get(c)))) : null);
  }

  itemNode(item) {
    if (item.type === "search") return this.searchTree();
    const e = item.event;
    if (PHASE.has(e.kind)) return el("li", {}, el("strong", {}, `phase: ${e.phase}`));
    return el("li", {}, el("strong", {}, "answer: "), shorten(e.text, 120));
  }

  // EEA's segments: nodes nest by parent id; the policy's choices are marked.
  searchTree() {
    const kids = new Map();
    for (const n of this.nodes.values()) {
      const p = n.parent ?? null;
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(n);
    }
    const node = (n) => {
      const [a, b] = n.span || [];
      const video = this.videos.get(n.video_id)?.name || n.video_id;
      const label = `#${n.id} ${video} [${a}, ${b}] r=${n.r} u=${n.u} h=${n.h}`;
      const below = kids.get(n.id) || [];
      return el("li", {},
        el("span", { class: `node-segment${this.chosen.has(n.id) ? " chosen" : ""}`, title: n.explanation || "" }, label),
        below.length ? el("ul", {}, below.map(node)) : null);
    };
    const tops = [...this.nodes.values()].filter((n) => n.parent === null || n.parent === undefined || !this.nodes.has(n.parent));
    return el("li", {}, el("strong", {}, "search tree"), el("ul", {}, tops.map(node)));
  }
}
