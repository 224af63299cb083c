// The console's shell: pages by URL hash, the API key dialog, the namespace field.

import { api, getKey, getNamespace, onUnauthorized, setKey, setNamespace } from "./api.js";
import * as ask from "./ask.js";
import * as documents from "./documents.js";
import * as graph from "./graph.js";
import * as search from "./search.js";
import { $, closeViewer } from "./ui.js";

const PAGES = { search, ask, documents, graph };

function route() {
  const hash = decodeURIComponent(window.location.hash.slice(1)) || "search";
  const slash = hash.indexOf("/");
  const name = slash < 0 ? hash : hash.slice(0, slash);
  const arg = slash < 0 ? "" : hash.slice(slash + 1);
  const page = PAGES[name] ? name : "search";
  for (const key of Object.keys(PAGES)) $(`#page-${key}`).hidden = key !== page;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.page === page);
  closeViewer();
  PAGES[page].show(arg);
}

function askForKey(message) {
  $("#key-message").textContent = message;
  $("#key-input").value = "";
  $("#key-dialog").hidden = false;
  $("#key-input").focus();
}

onUnauthorized((body) => {
  const detail = body && body.detail ? String(body.detail) : "";
  askForKey(getKey()
    ? `That key was refused (${detail}). Enter another one.`
    : "This server requires an API key (lore keys create).");
});

// A key is tried on one cheap authenticated call before the dialog closes: a wrong key
// is refused here, with the server's reason, not at the next action.
async function tryKey(event) {
  event.preventDefault();
  const previous = getKey();
  const candidate = $("#key-input").value.trim();
  const message = $("#key-message");
  setKey(candidate);
  message.textContent = "checking the key…";
  message.classList.remove("error");
  try {
    await api("/v1/jobs", { query: { limit: 1 } });
  } catch (err) {
    if (err.status === 401) {
      setKey(previous);
      const detail = err.body && err.body.detail ? String(err.body.detail) : err.message;
      askForKey(`That key was refused (${detail}). Enter another one.`);
      message.classList.add("error");
      return;
    }
  }
  $("#key-dialog").hidden = true;
  route();
}

$("#key-form").addEventListener("submit", tryKey);
$("#key-forget").addEventListener("click", () => { setKey(""); askForKey("Key forgotten. Enter a key to continue."); });
$("#key-button").addEventListener("click", () => askForKey(getKey() ? "A key is set for this tab; enter another to replace it." : "Enter an API key."));
$("#viewer-close").addEventListener("click", closeViewer);
$("#namespace").value = getNamespace();
$("#namespace").addEventListener("change", (e) => { setNamespace(e.target.value.trim()); route(); });

for (const page of Object.values(PAGES)) page.mount();
window.addEventListener("hashchange", route);
route();
// one cheap authenticated call: with auth on and no key, the key dialog opens at once
api("/v1/jobs", { query: { limit: 1 } }).catch(() => {});
