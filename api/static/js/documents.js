// Documents: a paged list (metadata, status and id-prefix filters), one document read
// back (text, chunks, metadata, failure reason), uploads with live job progress, delete.

import { api, pathOf } from "./api.js";
import { $, clear, el, metaTable, parseFilter, status } from "./ui.js";

const PAGE = 25;
const when = (stamp) => (stamp || "").replace("T", " ").slice(0, 16);
let offset = 0;
let total = 0;

function listQuery() {
  const filter = parseFilter($("#docs-filter").value);
  return {
    offset,
    limit: PAGE,
    status: $("#docs-status").value,
    prefix: $("#docs-prefix").value.trim(),
    filter: filter ? JSON.stringify(filter) : undefined,
  };
}

export async function refreshList() {
  const line = $("#docs-status-line");
  const body = clear($("#docs-list"));
  let query;
  try { query = listQuery(); } catch (err) { status(line, `filter: ${err.message}`, true); return; }
  try {
    const page = await api("/v1/documents", { query });
    total = page.total;
    status(line, `${page.total} documents`);
    body.append(...page.documents.map((d) => el("tr", {
      class: "doc-row", dataset: { id: d.id }, onclick: () => { window.location.hash = `#documents/${pathOf(d.id)}`; },
    },
    el("td", {}, d.id), el("td", {}, d.title), el("td", {}, el("span", { class: `badge ${d.status}` }, d.status)),
    el("td", {}, d.chunks), el("td", {}, when(d.updated_at)))));
    const last = Math.min(offset + PAGE, total);
    $("#docs-count").textContent = total ? `${offset + 1}–${last} of ${total}` : "none";
    $("#docs-prev").disabled = offset === 0;
    $("#docs-next").disabled = offset + PAGE >= total;
  } catch (err) {
    status(line, err.message, true);
  }
}

export async function openDocument(id) {
  const panel = $("#doc-detail");
  panel.hidden = false;
  clear(panel).append(el("p", { class: "status" }, `loading ${id}…`));
  try {
    const doc = await api(`/v1/documents/${pathOf(id)}`, { query: { include: "text,chunks" } });
    const remove = el("button", { id: "doc-delete", type: "button", class: "danger" }, "Delete");
    remove.addEventListener("click", async () => {
      if (remove.dataset.armed !== "yes") {
        remove.dataset.armed = "yes";
        remove.textContent = "Really delete?";
        return;
      }
      try {
        await api(`/v1/documents/${pathOf(doc.id)}`, { method: "DELETE" });
        clear(panel).append(el("p", { class: "status", id: "doc-deleted" }, `deleted ${doc.id}`));
        refreshList();
      } catch (err) { panel.append(el("p", { class: "error" }, err.message)); }
    });
    clear(panel).append(...[
      el("h2", {}, doc.id),
      el("p", { id: "doc-status" }, el("span", { class: `badge ${doc.status}` }, doc.status),
        `  ${doc.chunks} chunks · source ${doc.source} · updated ${when(doc.updated_at)}`),
      doc.error ? el("p", { class: "error", id: "doc-error" }, `failed: ${doc.error}`) : null,
      el("div", { id: "doc-meta" }, metaTable({ title: doc.title, ...doc.metadata })),
      el("h3", {}, "Text", doc.text_reconstructed ? " (joined from the chunks)" : ""),
      el("pre", { class: "doc-text", id: "doc-text" }, doc.text ?? "(no text stored)"),
      el("h3", {}, `Chunks (${(doc.chunk_list || []).length})`),
      el("ol", { class: "chunks", id: "doc-chunks" }, (doc.chunk_list || []).map((c) =>
        el("li", { dataset: { chunk: c.id } }, el("div", { class: "status" }, `#${c.ordinal} ${c.id} ${c.heading}`),
          el("pre", { class: "chunk-text" }, c.text)))),
      remove].filter(Boolean));
    for (const row of document.querySelectorAll("tr.doc-row")) row.classList.toggle("selected", row.dataset.id === doc.id);
    panel.scrollIntoView({ block: "start" });
  } catch (err) {
    clear(panel).append(el("p", { class: "error" }, err.message));
  }
}

async function follow(job) {
  const box = $("#job-progress");
  box.hidden = false;
  let current = job;
  for (;;) {
    const counts = current.counts || {};
    const all = Object.values(counts).reduce((a, b) => a + b, 0);
    const ended = (counts.done || 0) + (counts.failed || 0);
    clear(box).append(
      el("h3", {}, `Job ${current.job_id} `, el("span", { class: `badge ${current.state}`, id: "job-state" }, current.state)),
      el("progress", { max: all || 1, value: ended }),
      el("p", { class: "status" }, Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(" · ")),
      el("ul", { class: "jobs" }, (current.documents || []).map((d) => el("li", {},
        el("span", { class: `badge ${d.status}` }, d.status), ` ${d.id}`, d.reason ? ` — ${d.reason}` : ""))));
    if (current.state !== "running") break;
    await new Promise((resolve) => setTimeout(resolve, 500));
    current = await api(`/v1/jobs/${encodeURIComponent(current.job_id)}`);
  }
  refreshList();
  refreshJobs();
}

async function uploadFiles(event) {
  event.preventDefault();
  const files = $("#upload-files").files;
  if (!files.length) return;
  const form = new FormData();
  for (const file of files) form.append("file", file);
  if ($("#upload-id").value.trim()) form.append("id", $("#upload-id").value.trim());
  if ($("#upload-meta").value.trim()) form.append("metadata", $("#upload-meta").value.trim());
  try {
    follow(await api("/v1/documents", { method: "POST", form }));
  } catch (err) {
    clear($("#job-progress")).append(el("p", { class: "error" }, err.message));
    $("#job-progress").hidden = false;
  }
}

async function storeText(event) {
  event.preventDefault();
  try {
    const metadata = parseFilter($("#text-meta").value) || {};
    follow(await api("/v1/documents", {
      method: "POST",
      json: { id: $("#text-id").value.trim(), text: $("#text-body").value, metadata },
    }));
  } catch (err) {
    clear($("#job-progress")).append(el("p", { class: "error" }, err.message));
    $("#job-progress").hidden = false;
  }
}

export async function refreshJobs() {
  try {
    const page = await api("/v1/jobs", { query: { limit: 8 } });
    clear($("#jobs-list")).append(...page.jobs.map((j) => el("li", {},
      el("span", { class: `badge ${j.state}` }, j.state), ` ${j.kind} ${j.job_id} · `,
      Object.entries(j.counts).map(([k, v]) => `${k} ${v}`).join(", "), ` · ${when(j.created_at)}`)));
  } catch (err) {
    clear($("#jobs-list")).append(el("li", { class: "error" }, err.message));
  }
}

export function mount() {
  $("#docs-form").addEventListener("submit", (e) => { e.preventDefault(); offset = 0; refreshList(); });
  $("#docs-prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); refreshList(); });
  $("#docs-next").addEventListener("click", () => { offset += PAGE; refreshList(); });
  $("#upload-form").addEventListener("submit", uploadFiles);
  $("#text-form").addEventListener("submit", storeText);
}

export function show(id) {
  refreshList();
  refreshJobs();
  if (id) openDocument(id);
  else $("#doc-detail").hidden = true;
}
