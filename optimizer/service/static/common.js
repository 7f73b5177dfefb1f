// Shared helpers of the console pages: the service token, API calls, formatting.
"use strict";

const Console = (() => {
  const params = new URLSearchParams(location.search);
  if (params.get("token")) sessionStorage.setItem("gepa-token", params.get("token"));
  const token = params.get("token") || sessionStorage.getItem("gepa-token") || "";

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  /** Add ?token= to a console link or an EventSource URL (a browser cannot send headers there). */
  function withToken(url) {
    if (!token) return url;
    return url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token);
  }

  /** Call the API; errors carry the service's message, which names the fix. */
  async function api(path, options = {}) {
    const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
    if (token) headers.Authorization = "Bearer " + token;
    let response;
    try {
      response = await fetch(path, Object.assign({}, options, { headers }));
    } catch (err) {
      throw new ApiError(0, "cannot reach the gepa-runtime service: is `gepa-runtime serve` still running?");
    }
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try { message = (await response.json()).error.message; } catch (_) { /* not our error body */ }
      throw new ApiError(response.status, message);
    }
    return response.json();
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function hue(id) {
    let h = 0;
    for (const ch of String(id)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return h % 360;
  }
  const color = (id) => `hsl(${hue(id)} 62% 52%)`;

  function cid(id, label) {
    return el("span", { class: "cid", title: id }, el("i", { style: `background:${color(id)}` }), label || String(id).slice(0, 10));
  }

  function score(value, status) {
    if (status === "error" || value === null || value === undefined) return el("span", { class: "score err" }, status === "error" ? "error" : "-");
    const v = Number(value);
    const cls = v >= 0.999 ? "hi" : v > 0 ? "mid" : "lo";
    return el("span", { class: "score " + cls }, v.toFixed(2));
  }

  const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  const pct = (v) => (v === null || v === undefined ? "–" : Math.round(Number(v) * 100) + "%");

  function ago(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "–";
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  function clock(ts) {
    const d = new Date(ts * 1000);
    return d.toTimeString().slice(0, 8);
  }

  function chip(text, extra = "") {
    return el("span", { class: `chip ${text} ${extra}` }, String(text).replace(/_/g, " "));
  }

  let toastTimer = null;
  function toast(message) {
    let node = document.getElementById("toast");
    if (!node) { node = el("div", { id: "toast", class: "toast" }); document.body.append(node); }
    node.textContent = message;
    node.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { node.hidden = true; }, 7000);
  }

  function tokenLinks() {
    for (const a of document.querySelectorAll("a[data-keep-token]")) a.href = withToken(a.getAttribute("href"));
  }

  return { ApiError, api, withToken, el, color, cid, score, fmt, pct, ago, clock, chip, toast, tokenLinks, token };
})();
