// Search: POST /v1/memory/query with the form's options; each result shows why it won,
// its text rendered as Markdown with the query's words marked.

import { api, pathOf } from "./api.js";
import { highlight, renderMarkdown } from "./markdown.js";
import { $, clear, el, numberOrUndefined, parseFilter, showChunk, status } from "./ui.js";

const ENGINES = ["sparse", "dense", "exact", "graph"];

function request() {
  const hybrid = {
    sparse_weight: numberOrUndefined($("#search-sparse")),
    dense_weight: numberOrUndefined($("#search-dense")),
    rrf_k_constant: numberOrUndefined($("#search-rrfk")),
  };
  return {
    search_text: $("#search-q").value,
    top_k: numberOrUndefined($("#search-topk")) || 10,
    hybrid_params: Object.fromEntries(Object.entries(hybrid).filter(([, v]) => v !== undefined)),
    metadata_filter: parseFilter($("#search-filter").value),
    fusion: $("#search-fusion").value,
    diversity: numberOrUndefined($("#search-diversity")),
    graph_weight: numberOrUndefined($("#search-graph")),
  };
}

function resultItem(query, result, index) {
  // the dense feedback list is off unless asked for: shown only where it ranked the chunk
  const engines = result.ranks.feedback ? [...ENGINES, "feedback"] : ENGINES;
  const ranks = engines.map((engine) => {
    const rank = result.ranks[engine];
    return el("span", { class: `rank rank-${engine}${rank ? " hit" : ""}`, title: `${engine} rank` },
      `${engine} ${rank ?? "–"}`);
  });
  return el("li", { class: "result", dataset: { chunk: result.chunk_id, document: result.document_id } },
    el("div", { class: "result-head" },
      el("span", { class: "result-rank" }, `#${index + 1}`),
      el("a", { class: "result-source", href: `#documents/${pathOf(result.document_id)}` }, result.source),
      result.heading ? el("span", { class: "result-heading" }, result.heading) : null,
      result.namespace ? el("span", { class: "badge" }, result.namespace) : null,
      el("span", { class: "score", title: "fused score (relative within this query)" },
        result.rrf_score.toFixed(4))),
    el("div", { class: "ranks" }, ranks,
      el("a", { class: "quiet", onclick: () => showChunk(result.chunk_id) }, "chunk"),
      // the same passage in other documents, folded into this result
      (result.duplicates ?? []).length
        ? el("span", { class: "status also-in" }, "also in ",
          ...result.duplicates.map((copy) => el("a", { class: "quiet",
            href: `#documents/${pathOf(copy.document_id)}` }, `${copy.source} `)))
        : null),
    highlight(renderMarkdown(result.text, "result-text md"), query));
}

async function run(event) {
  event?.preventDefault();
  const line = $("#search-status");
  const list = clear($("#search-results"));
  let body;
  try { body = request(); } catch (err) { status(line, `filter: ${err.message}`, true); return; }
  status(line, "searching…");
  const started = performance.now();
  try {
    const response = await api("/v1/memory/query", { method: "POST", json: body });
    const ms = Math.round(performance.now() - started);
    const warnings = response.warnings.length ? ` · ${response.warnings.join("; ")}` : "";
    status(line, `${response.total_retrieved} results · ${response.fusion} · ${ms} ms${warnings}`);
    list.append(...response.results.map((r, i) => resultItem(body.search_text, r, i)));
  } catch (err) {
    status(line, err.message, true);
  }
}

export function mount() {
  $("#search-form").addEventListener("submit", run);
}

export function show() { $("#search-q").focus(); }
