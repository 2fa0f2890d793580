// The video page: the player, the clip table, and search results that seek the player.

import { api, clear, clock, el, linkTimes, mediaUrl, param, shorten, showError, showVersion, span, url, wallClock } from "./api.js";

const videoId = param("id");
const player = document.getElementById("player");
const clipsBody = document.querySelector("#clips tbody");
const resultsBody = document.querySelector("#results tbody");
let recordedAt = ""; // when the video's recording started, when it knows

// A time cell: the span, and beneath it the wall-clock time it began when the video knows it.
function timeCell(t0, t1) {
  const wall = wallClock(recordedAt, t0);
  return el("td", { class: "time" }, span(t0, t1), wall ? el("div", { class: "muted wall" }, wall) : null);
}

function seek(t0) {
  const go = () => {
    player.currentTime = t0;
    player.play().catch(() => {}); // autoplay may be refused; the seek still stands
  };
  if (player.readyState >= 1) go();
  else player.addEventListener("loadedmetadata", go, { once: true });
}

// Who says what in a clip, where the speakers stage labelled the transcript: "S1 (Dr Lee): …".
function speechOf(clip, transcript) {
  const said = transcript.filter((s) => s.speaker && clip.t0 <= (s.t0 + s.t1) / 2 && (s.t0 + s.t1) / 2 < clip.t1);
  if (!said.length) return clip.transcript || "";
  return said.map((s) => `${s.speaker_name ? `${s.speaker} (${s.speaker_name})` : s.speaker}: ${s.text}`).join(" ");
}

// What a person can take away: the transcript as subtitles (shown on the player too, each
// speaker by the name given to its label) and a contact sheet of the video.
function takeaway(video, transcript) {
  const base = `/api/videos/${encodeURIComponent(video.video_id)}`;
  const stem = video.name.replace(/\.[^.]*$/, "") || video.video_id;
  const links = [];
  if (transcript.length) {
    const track = el("track", {
      kind: "subtitles", label: "Transcript", srclang: "en", default: "",
      src: url(`${base}/subtitles?format=vtt`),
    });
    player.append(track);
    links.push(
      el("a", { href: url(`${base}/subtitles?format=srt`), download: `${stem}.srt`, id: "srt-link" }, "Subtitles (SRT)"),
      el("a", { href: url(`${base}/subtitles?format=vtt`), download: `${stem}.vtt` }, "WebVTT"),
    );
  }
  links.push(el("a", { href: url(`${base}/sheet?count=24`), download: `${stem}-sheet.jpg` }, "Contact sheet"));
  clear(document.getElementById("takeaway"), ...links.flatMap((a, i) => (i ? [" · ", a] : [a])));
}

// The perception describer's label heads the caption column once, when it wrote every caption.
let captionLabel = "";

function captionText(caption) {
  return captionLabel ? (caption || "").replace(`[${captionLabel}]`, "").trim() : caption || "";
}

function clipRow(clip, transcript) {
  return el(
    "tr",
    { class: "clickable", title: "Play from here", dataset: { t0: clip.t0, t1: clip.t1 },
      onclick: () => seek(clip.t0) },
    timeCell(clip.t0, clip.t1),
    el("td", {}, captionText(clip.caption)),
    el("td", {}, speechOf(clip, transcript)),
    el("td", {}, (clip.on_screen_text || []).join(" | ")),
  );
}

function resultRow(hit) {
  return el(
    "tr",
    { class: "clickable result", title: "Play from here", dataset: { t0: hit.t0, t1: hit.t1 },
      onclick: () => seek(hit.t0) },
    timeCell(hit.t0, hit.t1),
    el("td", {}, Number(hit.score).toFixed(3)),
    el("td", {}, shorten([captionText(hit.caption), hit.transcript && (hit.speakers || []).length ? `[${hit.speakers.join(", ")}] ${hit.transcript}` : hit.transcript, (hit.on_screen_text || []).join(" | ")].filter(Boolean).join(" · "), 200)),
  );
}

async function load() {
  if (!videoId) {
    showError(document.querySelector("main"), "No video given: open one from the Library.");
    return;
  }
  try {
    const detail = await api(`/api/videos/${encodeURIComponent(videoId)}`);
    const video = detail.video || detail;
    document.title = `vidagent · ${video.name}`;
    document.getElementById("title").textContent = video.name;
    recordedAt = video.recorded_at || "";
    document.getElementById("meta").textContent = [
      recordedAt && `recorded ${wallClock(recordedAt, 0)}`,
      clock(video.duration),
      video.width && `${video.width}×${video.height}`,
      video.fps && `${Number(video.fps).toFixed(2)} fps`,
      video.video_id,
    ].filter(Boolean).join(" · ");
    // the summary's times play the moment, as the clip rows and evidence marks do
    clear(document.getElementById("summary"), linkTimes(detail.summary || "", seek, video.duration + 1));
    document.getElementById("ask-link").href = `ask.html?video=${encodeURIComponent(video.video_id)}`;
    // A file the browser cannot play (an AVI's msmpeg4; a stream's HLS playlist where the
    // browser has no HLS, as Firefox) left the player at 0:00 without a word.
    player.addEventListener("error", () => {
      const box = document.getElementById("player-error");
      const what = video.stages && video.stages.watch
        ? "a live stream, served as an HLS playlist of its windows, which this browser does not play (Safari and Chromium do)"
        : "a format this browser does not play";
      box.textContent = `The player cannot show this video: ${what}. The clips, transcript, `
        + "subtitles and contact sheet still work; `vidagent export` cuts the cited moments as MP4.";
      box.hidden = false;
    });
    player.src = mediaUrl(video.video_id);
    if (video.stages && video.stages.watch && video.stages.watch.state === "watching") {
      // the playlist served is the stream as it stood: the player ends there, not at the edge
      const live = document.getElementById("player-live");
      live.textContent = `Live: the player holds the stream up to ${clock(video.duration)}, as it `
        + "stood when this page opened; reload the page for the windows indexed since.";
      live.hidden = false;
    }
    const clips = detail.clips || [];
    const transcript = detail.transcript || [];
    captionLabel = detail.caption_label || "";
    if (captionLabel) {
      clear(document.getElementById("caption-head"), "Caption ", el("span", { class: "muted" }, `(${captionLabel})`));
    }
    takeaway(video, transcript);
    clear(clipsBody, clips.length ? clips.map((clip) => clipRow(clip, transcript))
      : el("tr", {}, el("td", { colspan: 4, class: "empty" }, "No clips indexed yet.")));
  } catch (e) {
    clear(clipsBody, el("tr", {}, el("td", { colspan: 4, class: "error" }, e.message)));
  }
}

document.getElementById("search").addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = event.target.elements.query.value.trim();
  clear(resultsBody, el("tr", {}, el("td", { colspan: 3, class: "empty" }, "Searching…")));
  try {
    const { hits } = await api("/api/search", {
      method: "POST",
      json: { query, videos: [videoId], top: 10 },
    });
    clear(resultsBody, hits.length ? hits.map(resultRow)
      : el("tr", {}, el("td", { colspan: 3, class: "empty" }, "Nothing found.")));
  } catch (e) {
    clear(resultsBody, el("tr", {}, el("td", { colspan: 3, class: "error" }, e.message)));
  }
});

showVersion();
load();
