// Ask: POST /v1/ask; the route and its reasons, the answer (Markdown) with clickable [n]
// citations.

import { api } from "./api.js";
import { linkCitations, renderMarkdown } from "./markdown.js";
import { $, clear, el, parseFilter, showChunk, showReport, status } from "./ui.js";

let citations = new Map();

function openCitation(id) {
  const citation = citations.get(id);
  if (!citation) return;
  if (citation.kind === "report" && citation.report_id) showReport(citation.report_id);
  else if (citation.chunk_ids.length) showChunk(citation.chunk_ids[0]);
}

function answerNodes(text) {
  return linkCitations(renderMarkdown(text, "md"), (id, marker) => (citations.has(id)
    ? el("a", { class: "cite", href: "#ask", dataset: { cite: id }, onclick: (e) => { e.preventDefault(); openCitation(id); } }, marker)
    : document.createTextNode(marker)));
}

function citationItem(citation) {
  const target = citation.kind === "report"
    ? el("a", { class: "cite", onclick: () => showReport(citation.report_id) }, citation.title || citation.report_id)
    : el("span", {}, citation.chunk_ids.map((c, i) =>
      el("a", { class: "cite", onclick: () => showChunk(c) }, citation.sources[i] || citation.sources[0] || c)));
  return el("li", { dataset: { cite: citation.id } },
    el("span", { class: "kind" }, `[${citation.id}] ${citation.kind}`), target,
    el("span", { class: "status" }, `  score ${Number(citation.score).toFixed(3)}`));
}

async function run(event) {
  event?.preventDefault();
  const line = $("#ask-status");
  clear($("#ask-route"));
  clear($("#ask-answer"));
  clear($("#ask-citations"));
  let filters;
  try { filters = parseFilter($("#ask-filter").value); } catch (err) { status(line, `filter: ${err.message}`, true); return; }
  status(line, "thinking…");
  try {
    const response = await api("/v1/ask", {
      method: "POST",
      json: { question: $("#ask-q").value, mode: $("#ask-mode").value, filters },
    });
    citations = new Map(response.citations.map((c) => [c.id, c]));
    const route = response.route;
    $("#ask-route").append(
      el("span", { class: "decision" }, `${response.mode}`),
      el("span", { class: "status" }, `routed ${route.decision} by ${route.classifier} · `),
      ...route.reasons.map((r) => el("span", { class: "reason" }, r)));
    $("#ask-answer").append(answerNodes(response.answer));
    $("#ask-citations").append(...response.citations.map(citationItem));
    const writer = response.extractive ? "extractive" : response.details.answer_writer;
    const warnings = response.warnings.length ? ` · ${response.warnings.join("; ")}` : "";
    status(line, `${response.citations.length} citations · ${response.context_tokens} context tokens · ${writer}${warnings}`);
  } catch (err) {
    status(line, err.message, true);
  }
}

export function mount() {
  $("#ask-form").addEventListener("submit", run);
}

export function show() { $("#ask-q").focus(); }
