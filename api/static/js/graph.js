// Graph: opens on an overview of the top-level communities (sized by members, labelled
// by report title, coloured by level, with a legend); a click on a community draws its
// sub-communities and members, a click on an entity its neighbourhood. Entities can be
// found by name; the side list shows communities by level with their reports.

import { api } from "./api.js";
import { $, clear, el, reportView, showChunk, showReport, status } from "./ui.js";

let cy = null;
const expanded = new Set();
let everyCommunity = null; // the last /v1/communities?reports=true, by id

// Level colours; the legend's swatches use the same colours through .level-N in style.css.
const LEVEL_COLOURS = ["#2d5bd7", "#e3a857", "#7fbf9a", "#d88c9a", "#a48fd1", "#6fb7c9"];
const levelColour = (level) => LEVEL_COLOURS[Math.min(level, LEVEL_COLOURS.length - 1)];
const communitySize = (members) => Math.min(120, 24 + 12 * Math.sqrt(members || 1));

const PALETTE = ["#8ea3cf", "#e3a857", "#7fbf9a", "#d88c9a", "#a48fd1", "#6fb7c9", "#c9b26f"];
const colourOf = (type) => PALETTE[[...(type || "")].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) % PALETTE.length];
const nodeSize = (mentions) => Math.min(80, 18 + 9 * Math.sqrt(mentions || 1));
const edgeWidth = (weight) => Math.min(12, 1 + 2 * Math.log2(1 + (weight || 1)));

function graph() {
  if (cy) return cy;
  cy = window.cytoscape({
    container: $("#graph-canvas"),
    style: [
      { selector: "node", style: {
        "background-color": "data(colour)", label: "data(name)", "font-size": 11, color: "#1d2330",
        width: "data(size)", height: "data(size)", "text-valign": "bottom", "text-margin-y": 3,
        "text-wrap": "ellipsis", "text-max-width": 140 } },
      { selector: "node.expanded", style: { "border-width": 2, "border-color": "#1d2330" } },
      { selector: "node.centre", style: { "border-width": 4, "border-color": "#2d5bd7", "font-weight": "bold" } },
      { selector: "node.community", style: {
        shape: "round-rectangle", "text-valign": "bottom", "text-halign": "center", color: "#1d2330",
        "font-size": 11, "text-wrap": "wrap", "text-max-width": 170 } },
      { selector: "node.member", style: { "background-color": "#8ea3cf" } },
      { selector: "edge", style: { width: "data(width)", "line-color": "#c3cad8", "curve-style": "bezier", opacity: 0.85 } },
    ],
  });
  cy.on("tap", "node", (event) => {
    const node = event.target;
    if (node.hasClass("community")) drill(node.data("community"));
    else expand(node.id());
  });
  window.loreGraph = cy; // for people poking around (and the browser tests)
  return cy;
}

function addNode(key, name, mentions, type) {
  const g = graph();
  const existing = g.getElementById(key);
  if (existing.nonempty()) {
    if (mentions) existing.data({ mentions, size: nodeSize(mentions) });
    return existing;
  }
  return g.add({ group: "nodes", data: { id: key, name, type, mentions, size: nodeSize(mentions), colour: colourOf(type) } });
}

function addCommunity(community, classes = "") {
  return graph().add({
    group: "nodes",
    classes: `community ${classes}`.trim(),
    data: {
      id: `community:${community.id}`, community: community.id, level: community.level,
      members: community.size, name: community.report ? community.report.title : community.id,
      size: communitySize(community.size), colour: levelColour(community.level),
    },
  });
}

async function loadCommunities(fresh = false) {
  if (!everyCommunity || fresh) {
    const found = await api("/v1/communities", { query: { reports: true } });
    everyCommunity = new Map(found.map((c) => [c.id, c]));
  }
  return everyCommunity;
}

function legend(levels) {
  clear($("#graph-legend")).append(
    el("span", { class: "legend-title" }, "community level"),
    ...levels.map((l) => el("span", { class: "legend-item", dataset: { level: l } },
      el("span", { class: `swatch level-${Math.min(l, LEVEL_COLOURS.length - 1)}` }), `level ${l}`)),
    el("span", { class: "legend-item" }, el("span", { class: "swatch member" }), "entity"),
    el("span", { class: "legend-note" }, "size: members · click a community to draw it"));
}

/** The top-level communities, one node each. */
export async function overview() {
  const line = $("#graph-status");
  try {
    const all = await loadCommunities(true);
    const top = [...all.values()].filter((c) => c.parent === null);
    const g = graph();
    g.elements().remove();
    expanded.clear();
    for (const c of top) addCommunity(c, "top");
    legend([...new Set([...all.values()].map((c) => c.level))].sort((a, b) => a - b));
    g.layout({ name: "grid", avoidOverlap: true, avoidOverlapPadding: 60, sort: (a, b) => b.data("members") - a.data("members"), animate: false }).run();
    g.fit(undefined, 30);
    status(line, top.length
      ? `${top.length} top-level communities · ${all.size} in all`
      : "no communities yet (run `lore graph build`)");
  } catch (err) {
    status(line, err.message, true);
  }
}

/** A community: its sub-communities and its members around it; its report at the side. */
export async function drill(communityId) {
  const line = $("#graph-status");
  try {
    const all = await loadCommunities();
    const community = all.get(communityId) || await api(`/v1/communities/${encodeURIComponent(communityId)}`);
    const g = graph();
    g.elements().remove();
    expanded.clear();
    const centre = addCommunity(community, "centre");
    const children = [...all.values()].filter((c) => c.parent === community.id);
    for (const child of children) {
      addCommunity(child);
      g.add({ group: "edges", data: { id: `${centre.id()}>${child.id}`, source: centre.id(), target: `community:${child.id}`, width: 2 } });
    }
    const members = community.members.slice(0, 40);
    const names = community.member_names || [];
    members.forEach((key, i) => {
      g.add({ group: "nodes", classes: "member", data: { id: key, name: names[i] || key, size: 22, colour: "#8ea3cf" } });
      g.add({ group: "edges", data: { id: `${centre.id()}>${key}`, source: centre.id(), target: key, width: 1 } });
    });
    g.layout({ name: "cose", animate: false, randomize: true, nodeRepulsion: () => 9000, idealEdgeLength: () => 80 }).run();
    g.fit(undefined, 30);
    status(line, `${community.report ? community.report.title : community.id}: ${children.length} sub-communities · ${members.length} of ${community.size} members drawn`);
    clear($("#entity-detail")).append(reportView(community));
  } catch (err) {
    status(line, err.message, true);
  }
}

function addEdge(source, target, weight) {
  const g = graph();
  const [a, b] = source < target ? [source, target] : [target, source];
  const id = `${a}\u0001${b}`;
  const existing = g.getElementById(id);
  if (existing.nonempty()) {
    existing.data({ weight: Math.max(existing.data("weight"), weight), width: edgeWidth(Math.max(existing.data("weight"), weight)) });
    return;
  }
  if (g.getElementById(a).empty() || g.getElementById(b).empty()) return;
  g.add({ group: "edges", data: { id, source: a, target: b, weight, width: edgeWidth(weight) } });
}

function detail(response) {
  const entity = response.entity;
  clear($("#entity-detail")).append(
    el("h3", { id: "entity-name" }, entity.name, " ", el("span", { class: "badge" }, entity.type)),
    el("p", {}, entity.description || el("span", { class: "status" }, "no description")),
    el("p", { class: "status" }, `${entity.mentions} mentions · ${response.neighbours.length} neighbours shown`),
    el("p", { class: "sources" }, "sources: ",
      entity.chunk_ids.slice(0, 30).map((c) => el("a", { class: "entity-source", onclick: () => showChunk(c) }, c.slice(0, 8)))));
}

export async function expand(name, { reset = false } = {}) {
  const line = $("#entity-detail");
  try {
    const response = await api(`/v1/entities/${encodeURIComponent(name)}`, { query: { limit: 25 } });
    const g = graph();
    if (reset) {
      g.elements().remove();
      expanded.clear();
      clear($("#graph-legend")).append(el("span", { class: "legend-note" },
        "entities coloured by type · size: mentions · ◱ overview for the communities"));
    }
    const entity = response.entity;
    const centre = addNode(entity.key, entity.name, entity.mentions, entity.type);
    if (reset) centre.addClass("centre");
    centre.addClass("expanded");
    expanded.add(entity.key);
    for (const n of response.neighbours) addNode(n.key, n.name, n.mentions, n.type);
    for (const n of response.neighbours) addEdge(entity.key, n.key, n.weight);
    for (const r of response.relations) addEdge(r.source, r.target, r.weight);
    g.layout({ name: "cose", animate: false, randomize: reset, nodeRepulsion: () => 9000, idealEdgeLength: () => 90 }).run();
    g.fit(undefined, 30);
    detail(response);
  } catch (err) {
    clear(line).append(el("p", { class: "error" }, err.message));
  }
}

async function find(event) {
  event?.preventDefault();
  const hits = clear($("#entity-results"));
  try {
    const found = await api("/v1/entities", { query: { q: $("#entity-q").value, limit: 15 } });
    if (!found.length) hits.append(el("li", { class: "status" }, "no entity matches (has the graph been built? `lore graph build`)"));
    hits.append(...found.map((e) => el("li", {
      class: "entity-hit", dataset: { key: e.key }, onclick: () => { window.location.hash = `#graph/${encodeURIComponent(e.key)}`; },
    }, e.name, " ", el("small", {}, `${e.type} · ${e.mentions}`))));
    if (found.length && !window.location.hash.startsWith("#graph/")) expand(found[0].key, { reset: true });
  } catch (err) {
    hits.append(el("li", { class: "error" }, err.message));
  }
}

async function communities(level) {
  const list = clear($("#communities-list"));
  try {
    const found = await api("/v1/communities", { query: { level, reports: true } });
    if (!found.length) list.append(el("li", { class: "status" }, "no communities (run `lore graph build`)"));
    const ordered = [...found].sort((a, b) => (b.report?.importance || 0) - (a.report?.importance || 0) || b.size - a.size);
    list.append(...ordered.map((c) => el("li", { class: "community", dataset: { id: c.id } },
      el("span", { class: "title", onclick: () => { showReport(c.id); drill(c.id); } }, c.report ? c.report.title : c.id),
      " ", c.stale ? el("span", { class: "badge stale" }, "stale") : null,
      el("div", { class: "summary" }, `${c.size} members · `, c.report ? c.report.summary.slice(0, 160) : "no report"))));
  } catch (err) {
    list.append(el("li", { class: "error" }, err.message));
  }
}

async function levels() {
  const select = $("#communities-level");
  try {
    const all = await api("/v1/communities");
    const found = [...new Set(all.map((c) => c.level))].sort((a, b) => a - b);
    clear(select).append(...found.map((l) => el("option", { value: l }, `level ${l}`)));
    if (found.length) communities(found[0]);
    else communities(0);
  } catch (err) {
    status($("#communities-list"), err.message, true);
  }
}

export function mount() {
  $("#entity-form").addEventListener("submit", find);
  $("#communities-level").addEventListener("change", (e) => communities(e.target.value));
  $("#graph-overview").addEventListener("click", () => {
    if (window.location.hash === "#graph") overview();
    else window.location.hash = "#graph";
  });
}

export { reportView };

export function show(name) {
  graph().resize();
  levels();
  if (name) {
    if (!$("#entity-q").value) $("#entity-q").value = name;
    expand(name, { reset: true });
  } else {
    overview();
  }
}
