// Markdown for results and answers: markdown-it (raw HTML off) then DOMPurify, both
// vendored; query terms highlighted with <mark> and [n] markers made citation links,
// both by walking text nodes (no HTML strings built from user text).

import MarkdownIt from "../vendor/markdown-it/markdown-it.esm.min.js";
import DOMPurify from "../vendor/dompurify/purify.es.js";

const md = new MarkdownIt({ html: false, linkify: false, typographer: false });

/** ``text`` as sanitised Markdown, in a new element of class ``className``. */
export function renderMarkdown(text, className = "md") {
  const box = document.createElement("div");
  box.className = className;
  const safe = DOMPurify.sanitize(md.render(text || ""), { RETURN_DOM_FRAGMENT: true, FORBID_ATTR: ["style"] });
  for (const link of safe.querySelectorAll("a[href]")) {
    link.setAttribute("rel", "noopener noreferrer");
    link.setAttribute("target", "_blank");
  }
  box.append(safe);
  return box;
}

function textNodes(root, skip) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement && node.parentElement.closest(skip)
      ? NodeFilter.FILTER_SKIP : NodeFilter.FILTER_ACCEPT),
  });
  const found = [];
  while (walker.nextNode()) found.push(walker.currentNode);
  return found;
}

function replaceMatches(root, pattern, make, skip) {
  const nodes = textNodes(root, skip);
  for (const node of nodes) {
    const text = node.nodeValue;
    pattern.lastIndex = 0;
    if (!pattern.test(text)) continue;
    pattern.lastIndex = 0;
    const parts = [];
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match.index > last) parts.push(document.createTextNode(text.slice(last, match.index)));
      parts.push(make(match));
      last = match.index + match[0].length;
    }
    if (last < text.length) parts.push(document.createTextNode(text.slice(last)));
    node.replaceWith(...parts);
  }
}

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The words of a query worth marking (two characters or more), longest first. */
export function queryTerms(query) {
  const words = (query || "").match(/[\p{L}\p{N}][\p{L}\p{N}_.\-/]*[\p{L}\p{N}]|[\p{L}\p{N}]{2,}/gu) || [];
  return [...new Set(words.filter((w) => w.length >= 2))].sort((a, b) => b.length - a.length);
}

/** Wrap each occurrence of the query's terms under ``root`` in <mark class="hit">. */
export function highlight(root, query) {
  const terms = queryTerms(query);
  if (!terms.length) return root;
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}_])(?:${terms.map(escapeRegExp).join("|")})(?![\\p{L}\\p{N}_])`, "giu");
  replaceMatches(root, pattern, (match) => {
    const mark = document.createElement("mark");
    mark.className = "hit";
    mark.textContent = match[0];
    return mark;
  }, "mark");
  return root;
}

/** Replace each [n] under ``root`` by what ``make(n, text)`` returns (a link, say). */
export function linkCitations(root, make) {
  replaceMatches(root, /\[(\d+)\]/g, (match) => make(Number(match[1]), match[0]), "code, pre, a");
  return root;
}
