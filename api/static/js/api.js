// Calls to the Lorekeeper HTTP API with the key and namespace this tab holds.

const KEY = "lore.apiKey";
const NAMESPACE = "lore.namespace";

export class ApiError extends Error {
  constructor(status, body) {
    const detail = body && typeof body === "object" ? body.detail : body;
    super(`${status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    this.status = status;
    this.body = body;
  }
}

let unauthorized = () => {};

export const getKey = () => sessionStorage.getItem(KEY) || "";
export const setKey = (key) => (key ? sessionStorage.setItem(KEY, key) : sessionStorage.removeItem(KEY));
export const getNamespace = () => sessionStorage.getItem(NAMESPACE) || "";
export const setNamespace = (ns) =>
  ns ? sessionStorage.setItem(NAMESPACE, ns) : sessionStorage.removeItem(NAMESPACE);
export const onUnauthorized = (handler) => { unauthorized = handler; };

/** A path with each segment URL-encoded (document ids hold '/', sources hold '#'). */
export const pathOf = (id) => id.split("/").map(encodeURIComponent).join("/");

export async function api(path, { method = "GET", json, form, query } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const ns = getNamespace();
  if (ns && !url.searchParams.has("namespace")) url.searchParams.set("namespace", ns);
  // The CSRF defence the server checks on a non-JSON write (a file upload): a custom
  // header, which a cross-site form cannot send.
  const headers = { "X-Lore-Client": "console" };
  const key = getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form) {
    body = form;
  }
  const response = await fetch(url, { method, headers, body });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) {
    if (response.status === 401) unauthorized(data);
    throw new ApiError(response.status, data);
  }
  return data;
}
