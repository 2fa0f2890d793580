// The ask page: choose videos and a question, then watch the agent's steps stream in, the
// answer with its evidence on a timeline, and the trajectory as a tree.

import { api, clear, el, exportLink, param, showError, showVersion, streamJob } from "./api.js";
import { TraceView } from "./trajectory.js";

const form = document.getElementById("ask");
const videoChoice = document.getElementById("video-choice");
const jobState = document.getElementById("job-state");
const errorBox = document.getElementById("ask-error");
let closeStream = null;

async function loadVideos() {
  const wanted = param("video");
  try {
    const { videos } = await api("/api/videos");
    const legend = videoChoice.querySelector("legend");
    if (!videos.length) {
      clear(videoChoice, legend, el("p", { class: "empty" }, "The Library is empty: add a video first."));
      return;
    }
    clear(videoChoice, legend, videos.map((v) => el("label", { class: "video-option" },
      el("input", { type: "checkbox", name: "videos", value: v.video_id,
        checked: videos.length === 1 || v.video_id === wanted }),
      ` ${v.name}`)));
  } catch (e) {
    showError(videoChoice, e);
  }
}

// The strategies the server has (plugins included); the page's built-in list stays on failure.
async function loadStrategies() {
  try {
    const { strategies, default: chosen, notice } = await api("/api/strategies");
    clear(form.strategy, strategies.map((name) =>
      el("option", { value: name, selected: name === chosen }, name)));
    // without a model endpoint the default is retrieval: say so, and how to point at one
    clear(document.getElementById("strategy-notice"), notice || "");
  } catch (e) {
    // keep the static options
  }
}

// The notice of the strategy and task chosen (an agent on the embedded model: what it
// measured), as the answer will carry it; the last one asked for wins.
let noticeAsked = 0;
async function showNotice() {
  const asked = ++noticeAsked;
  const query = new URLSearchParams({ strategy: form.strategy.value, task: form.task.value });
  try {
    const { notice } = await api(`/api/strategies?${query}`);
    if (asked === noticeAsked) clear(document.getElementById("strategy-notice"), notice || "");
  } catch (e) {
    if (asked === noticeAsked) clear(document.getElementById("strategy-notice"));
  }
}
form.strategy.addEventListener("change", showNotice);
form.task.addEventListener("change", showNotice);

// A followed job's question back in the form (a reload mid-job, or a link to the job), so
// that it can be read, changed and asked again.
async function fillForm(jobId) {
  try {
    const { params } = await api(`/api/jobs/${encodeURIComponent(jobId)}`);
    if (!params || typeof params !== "object") return;
    const f = form.elements;
    if (typeof params.question === "string") f.question.value = params.question;
    if (Array.isArray(params.options)) f.options.value = params.options.join("\n");
    if (params.max_steps) f.max_steps.value = params.max_steps;
    if (params.task) f.task.value = params.task;
    if (params.strategy) f.strategy.value = params.strategy;
    const videos = new Set(params.videos || []);
    for (const box of form.querySelectorAll("input[name=videos]")) box.checked = videos.has(box.value);
    showNotice();
  } catch (e) {
    // the job is gone (or the server): the form stays as it is
  }
}

function newView() {
  for (const id of ["steps", "timelines"]) clear(document.getElementById(id));
  clear(document.getElementById("answer"), el("p", { class: "empty" }, "Waiting for the answer…"));
  const player = document.getElementById("evidence-player");
  player.hidden = true;
  player.removeAttribute("src");
  delete player.dataset.videoId;
  return new TraceView({
    steps: document.getElementById("steps"),
    answer: document.getElementById("answer"),
    timelines: document.getElementById("timelines"),
    tree: document.getElementById("tree"),
    player,
  });
}

// The API names a trace by id; a path's file name without ".jsonl" is that id.
function traceId(trace) {
  return String(trace).split("/").pop().replace(/\.jsonl$/, "");
}

function traceLink(trace) {
  if (!trace) return null;
  const id = traceId(trace);
  return [
    el("a", { href: `trace.html?id=${encodeURIComponent(id)}`, id: "trace-link" }, "open the saved trace"),
    " ",
    exportLink(id),
  ];
}

// Show job ``jobId``'s run in ``view`` as its events come (all of them again, from its start).
// While it runs, Stop cancels it: the run ends at its next check, or inside the model call under
// way where that can stop (a local model within a few seconds).
function follow(jobId, trace, view) {
  const submit = document.getElementById("submit");
  const stop = document.getElementById("stop");
  submit.disabled = true;
  stop.hidden = false;
  stop.disabled = false;
  stop.onclick = async () => {
    stop.disabled = true;
    clear(jobState, `job ${jobId}: stopping…`);
    try {
      await api(`/api/jobs/${encodeURIComponent(jobId)}`, { method: "DELETE" });
    } catch (e) {
      showError(errorBox, e);
    }
  };
  clear(jobState, `job ${jobId}: running`);
  closeStream = streamJob(jobId, {
    onEvent: (kind, data) => {
      if (data && typeof data === "object" && data.kind === undefined) data.kind = kind;
      if (kind !== "progress" && data && typeof data === "object") view.add(data);
    },
    onEnd: (job) => {
      submit.disabled = false;
      stop.hidden = true;
      closeStream = null;
      clear(jobState, `job ${jobId}: ${job.state} `, job.state === "done" ? traceLink(trace) : null);
      if (job.error) showError(errorBox, job.error);
      if (job.result && job.result.notice) {
        document.getElementById("answer").append(el("p", { class: "muted", id: "answer-notice" }, job.result.notice));
      }
      if (!view.answered) {
        clear(document.getElementById("answer"), el("p", { class: "empty" }, `No answer: the job is ${job.state}.`));
      }
    },
  });
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  clear(errorBox);
  const f = form.elements;
  const videos = [...form.querySelectorAll("input[name=videos]:checked")].map((i) => i.value);
  const options = f.options.value.split("\n").map((s) => s.trim()).filter(Boolean);
  const maxSteps = f.max_steps.value ? Number(f.max_steps.value) : null;
  const body = {
    videos, question: f.question.value.trim(), options, strategy: f.strategy.value,
    max_steps: maxSteps, task: f.task.value,
  };
  const refused = (error) => {
    showError(errorBox, error);
    // the question was refused: nothing will come, so say so where the answer would be
    clear(document.getElementById("answer"), el("p", { class: "empty" }, "No answer: the question was refused (above)."));
  };
  if (!videos.length) {  // the API's answer was its validator's: "body.videos: List should have…"
    refused(new Error("Choose at least one video to ask about."));
    return;
  }
  if (closeStream) closeStream();
  const view = newView();
  const submit = document.getElementById("submit");
  submit.disabled = true;
  try {
    const { job_id: jobId, trace } = await api("/api/ask", { method: "POST", json: body });
    // the job in the address: a reload (or the link) follows it again, its events replayed
    const here = new URL(location.href);
    here.searchParams.set("job", jobId);
    if (trace) here.searchParams.set("trace", traceId(trace));
    history.replaceState(null, "", here);
    follow(jobId, trace, view);
  } catch (e) {
    submit.disabled = false;
    refused(e);
  }
});

showVersion();
const loaded = Promise.all([loadVideos(), loadStrategies()]);
if (param("job")) {  // reloaded mid-job, or a link
  follow(param("job"), param("trace"), newView());
  loaded.then(() => fillForm(param("job")));
}
