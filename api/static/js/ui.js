// Small DOM helpers shared by the pages, and the side viewer for chunks and reports.

import { api, pathOf } from "./api.js";
import { renderMarkdown } from "./markdown.js";

export const $ = (selector) => document.querySelector(selector);

/** el("a", {class: "x", onclick: fn}, "text", child) */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const clear = (node) => { node.replaceChildren(); return node; };

export function status(node, text, isError = false) {
  node.textContent = text;
  node.classList.toggle("error", isError);
}

/** "env=production, service=a" or a JSON object -> a metadata filter (or undefined). */
export function parseFilter(text) {
  const raw = (text || "").trim();
  if (!raw) return undefined;
  if (raw.startsWith("{")) return JSON.parse(raw);
  const filter = {};
  for (const part of raw.split(",")) {
    const [key, ...rest] = part.split("=");
    if (!key.trim() || rest.length === 0) throw new Error(`expected key=value, got "${part.trim()}"`);
    const value = rest.join("=").trim();
    const name = key.trim();
    if (name in filter) {
      const prev = filter[name];
      filter[name] = { $in: [...(prev.$in || [prev]), value] };
    } else {
      filter[name] = value;
    }
  }
  return filter;
}

export const numberOrUndefined = (input) => (input.value === "" ? undefined : Number(input.value));

export function metaTable(metadata) {
  return el("table", { class: "meta" },
    Object.entries(metadata || {}).map(([k, v]) =>
      el("tr", {}, el("td", {}, k), el("td", {}, Array.isArray(v) ? v.join(", ") : String(v)))));
}

// -- the side viewer ------------------------------------------------------------------

export function openViewer(title, ...content) {
  $("#viewer-title").textContent = title;
  clear($("#viewer-body")).append(...content.filter(Boolean));
  $("#viewer").hidden = false;
}

export function closeViewer() { $("#viewer").hidden = true; }

export async function showChunk(chunkId) {
  openViewer(`chunk ${chunkId}`, el("p", { class: "status" }, "loading…"));
  try {
    const chunk = await api(`/v1/chunks/${encodeURIComponent(chunkId)}`);
    openViewer(chunk.source,
      el("p", {}, el("a", { class: "quiet open-document", href: `#documents/${pathOf(chunk.document_id)}` },
        "open the document"), "  ", chunk.heading ? el("span", { class: "status" }, chunk.heading) : null),
      renderMarkdown(chunk.text, "chunk-text md"),
      metaTable(chunk.metadata));
  } catch (err) {
    openViewer(`chunk ${chunkId}`, el("p", { class: "error" }, String(err.message || err)));
  }
}

export async function showReport(communityId) {
  openViewer(`community ${communityId}`, el("p", { class: "status" }, "loading…"));
  try {
    const community = await api(`/v1/communities/${encodeURIComponent(communityId)}`);
    openViewer(community.report ? community.report.title : `community ${communityId}`, reportView(community));
  } catch (err) {
    openViewer(`community ${communityId}`, el("p", { class: "error" }, String(err.message || err)));
  }
}

export function reportView(community) {
  const report = community.report;
  return el("div", { class: "report" },
    el("p", {}, `level ${community.level} · ${community.size} members `,
      community.stale ? el("span", { class: "badge stale" }, "stale") : null),
    report ? renderMarkdown(report.summary, "md report-summary") : el("p", { class: "status" }, "no report written yet"),
    report ? el("ol", {}, report.findings.map((f) => el("li", {}, renderMarkdown(f.text, "md finding"),
      f.chunks.slice(0, 3).map((c) => el("a", { class: "cite", onclick: () => showChunk(c) }, "[source]"))))) : null,
    el("p", { class: "members" }, "members: ",
      community.members.slice(0, 40).map((m, i) => el("a", { href: `#graph/${encodeURIComponent(m)}` },
        (community.member_names || [])[i] || m))));
}
