// The library page: videos with their stages, registering and uploading, ingest progress.

import { api, clear, clock, el, showError, showVersion, streamJob } from "./api.js";

const videosBody = document.querySelector("#videos tbody");
const jobsBox = document.getElementById("jobs");
const addStatus = document.getElementById("add-status");
const streams = new Map(); // job id -> close()
const jobs = new Map(); // job id -> job JSON, as last seen

function stageBadges(stages) {
  const names = Object.keys(stages || {});
  if (!names.length) return el("span", { class: "muted" }, "none");
  return names.map((name) => {
    const info = stages[name] || {};
    const title = [info.model, info.note, info.at].filter(Boolean).join(" · ");
    return el("span", { class: "badge done", title }, name);
  });
}

function videoRow(video) {
  const size = video.width && video.height ? `${video.width}×${video.height}` : "";
  const remove = el("button", { class: "danger", title: "Remove from the Library" }, "remove");
  remove.addEventListener("click", async () => {
    if (!confirm(`Remove ${video.name} from the Library?`)) return;
    try {
      await api(`/api/videos/${encodeURIComponent(video.video_id)}`, { method: "DELETE" });
      await loadVideos();
    } catch (e) {
      showError(addStatus, e);
    }
  });
  return el(
    "tr",
    { dataset: { videoId: video.video_id } },
    el("td", {}, el("a", { href: `video.html?id=${encodeURIComponent(video.video_id)}` }, video.name),
      el("div", { class: "muted mono" }, video.video_id)),
    el("td", { class: "time" }, clock(video.duration)),
    el("td", {}, size),
    el("td", {}, stageBadges(video.stages)),
    el("td", {}, remove),
  );
}

async function loadVideos() {
  try {
    const { videos } = await api("/api/videos");
    if (!videos.length) {
      clear(videosBody, el("tr", {}, el("td", { colspan: 5, class: "empty" },
        "No videos yet: add one below.")));
      return;
    }
    clear(videosBody, videos.map(videoRow));
  } catch (e) {
    clear(videosBody, el("tr", {}, el("td", { colspan: 5, class: "error" }, e.message)));
  }
}

// -- jobs -----------------------------------------------------------------------------------

// An index job's progress: {stage, done, total}, the stage it is at and how many of all its
// stages are done.
function progressBar(p) {
  if (!p || typeof p !== "object" || !("total" in p)) return null;
  const pct = p.total ? Math.min(100, (100 * p.done) / p.total) : 0;
  return el("div", { class: "stage-progress", dataset: { stage: p.stage } },
    // the stages under way, once any is (it named the last stage to end: "structure: 1 / 3"
    // while transcription ran for minutes)
    el("div", { class: "stage" }, p.running && p.running.length
      ? `running ${p.running.join(", ")} (${p.done} / ${p.total} stages done)`
      : `${p.stage}: ${p.done} / ${p.total} stages`),
    el("div", { class: "progress", role: "progressbar", "aria-valuenow": Math.round(pct),
      "aria-valuemin": 0, "aria-valuemax": 100 },
    el("div", { style: { width: `${pct}%` } })));
}

function jobTitle(job) {
  const done = job.result && typeof job.result === "object" ? job.result : {};
  const path = (job.params && job.params.path) || job.path || "";
  return done.name || path.split("/").pop() || job.job_id;
}

function jobView(job) {
  const cancel = ["queued", "running"].includes(job.state)
    ? el("button", { class: "danger", onclick: () => cancelJob(job.job_id) }, "cancel")
    : null;
  return el(
    "div",
    { class: "job", dataset: { jobId: job.job_id, state: job.state } },
    el("div", { class: "head" },
      el("span", { class: `badge ${job.state}` }, job.state),
      el("strong", {}, jobTitle(job)),
      el("span", { class: "muted mono" }, job.job_id),
      cancel),
    progressBar(job.progress),
    job.error ? el("p", { class: "error" }, job.error) : null,
  );
}

// Newest first: by when each was made (ISO times sort as strings), a job started here (no time
// yet) first. The map's order alone read oldest first after a load, which lists newest first.
function renderJobs() {
  const shown = [...jobs.values()].filter((j) => j.kind === "index")
    .map((job, at) => ({ job, at }))
    .sort((x, y) => (y.job.created || "~").localeCompare(x.job.created || "~") || y.at - x.at)
    .map(({ job }) => job);
  if (!shown.length) {
    clear(jobsBox, el("p", { class: "empty" }, "No jobs yet."));
    return;
  }
  clear(jobsBox, shown.map(jobView));
}

function follow(jobId) {
  if (streams.has(jobId)) return;
  const close = streamJob(jobId, {
    kinds: [],
    onEvent: (kind, data) => {
      if (kind !== "progress") return;
      const job = jobs.get(jobId) || { job_id: jobId, kind: "index" };
      jobs.set(jobId, { ...job, state: "running", progress: data });
      renderJobs();
    },
    onEnd: (job) => {
      streams.delete(jobId);
      const seen = jobs.get(jobId) || {};
      jobs.set(jobId, { ...seen, ...job, progress: job.progress || seen.progress });
      renderJobs();
      loadVideos();
    },
  });
  streams.set(jobId, close);
}

async function loadJobs() {
  try {
    const list = await api("/api/jobs");
    for (const job of list.jobs) {
      jobs.set(job.job_id, job);
      if (job.kind === "index" && ["queued", "running"].includes(job.state)) follow(job.job_id);
    }
    renderJobs();
  } catch (e) {
    showError(jobsBox, e);
  }
}

async function cancelJob(jobId) {
  try {
    await api(`/api/jobs/${encodeURIComponent(jobId)}`, { method: "DELETE" });
  } catch (e) {
    showError(addStatus, e);
  }
}

function started(job) {
  jobs.set(job.job_id, { job_id: job.job_id, kind: "index", state: "queued", ...job });
  renderJobs();
  follow(job.job_id);
  clear(addStatus, el("p", { class: "muted" }, `Started job ${job.job_id}.`));
}

function chosenStages() {
  const named = document.getElementById("stages").value.split(",").map((s) => s.trim()).filter(Boolean);
  return named.length ? named : null; // " , ," is no stage: the default ones
}

document.getElementById("register").addEventListener("submit", async (event) => {
  event.preventDefault();
  const path = event.target.elements.path.value.trim();
  try {
    const body = { path };
    const stages = chosenStages();
    if (stages) body.stages = stages;
    const job = await api("/api/videos", { method: "POST", json: body });
    started({ ...job, path });
    event.target.reset();
  } catch (e) {
    showError(addStatus, e);
  }
});

document.getElementById("upload").addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = event.target.elements.file.files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  const stages = chosenStages(); // in the query: the body is the file alone
  const query = stages ? `?stages=${encodeURIComponent(stages.join(","))}` : "";
  clear(addStatus, el("p", { class: "muted" }, `Uploading ${file.name}…`));
  try {
    const job = await api(`/api/videos/upload${query}`, { method: "POST", form });
    started({ ...job, path: file.name });
    event.target.reset();
  } catch (e) {
    showError(addStatus, e);
  }
});

showVersion();
loadVideos();
loadJobs();
