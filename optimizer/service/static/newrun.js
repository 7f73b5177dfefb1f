// The index page's new-run form: plan a config (POST /api/plan), then create it (POST /api/runs).
"use strict";

(() => {
  const { api, el, withToken } = Console;
  const form = document.getElementById("newrun-form");
  const result = document.getElementById("plan-result");
  const NUMBERS = ["max_metric_calls", "max_cost_usd", "concurrency"];
  const MONEY = ["student_usd", "reflection_usd", "total_usd"];
  const LABELS = {
    container_calls: "container calls", proposals: "proposals", reflection_calls: "reflection calls",
    reflection_tokens: "reflection tokens", student_tokens: "student tokens", student_usd: "student dollars",
    reflection_usd: "reflection dollars", total_usd: "total dollars", wall_s: "wall time",
  };

  /** The form as a RunConfig: only what was filled in. */
  function config() {
    const data = new FormData(form), out = {};
    for (const [key, raw] of data.entries()) {
      const value = String(raw).trim();
      if (!value) continue;
      if (key === "containers") out.containers = value.split(",").map((u) => u.trim()).filter(Boolean);
      else out[key] = NUMBERS.includes(key) ? Number(value) : value;
    }
    return out;
  }

  function shown(name, value) {
    if (value === null || value === undefined) return "unknown";
    if (MONEY.includes(name)) return "$" + value.toFixed(4);
    if (name === "wall_s") return value < 120 ? `${Math.round(value)} s` : `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
    return Math.round(value).toLocaleString();
  }

  function render(plan) {
    const f = plan.forecast, s = plan.samples;
    const rows = Object.entries(LABELS).map(([name, label]) =>
      el("tr", { "data-figure": name }, el("td", {}, label), el("td", { class: "num" }, shown(name, f[name].value)), el("td", { class: "why" }, f[name].assumption)));
    result.replaceChildren(
      el("p", {}, `Plan of ${plan.program_id}: ${plan.metric_calls.toLocaleString()} metric calls, measured on ${s.rollouts} sample rollouts and ${s.proposals} sample proposals (nothing stored).`),
      el("table", { class: "list plan" }, el("thead", {}, el("tr", {}, el("th", {}, "figure"), el("th", { class: "num" }, "planned"), el("th", {}, "assumption"))), el("tbody", {}, ...rows)),
      ...(f.limited_by === "cost" ? [el("p", { class: "banner warn" }, "The run stops at the cost cap before it spends its metric calls.")] : []),
      ...plan.problems.map((p) => el("p", { class: "banner warn" }, p)));
  }

  async function plan() {
    result.replaceChildren(el("div", { class: "empty" }, "planning: a few sample rollouts and proposals…"));
    try {
      render(await api("/api/plan", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ config: config() }) }));
    } catch (err) {
      result.replaceChildren(el("div", { class: "banner bad" }, err.message));
    }
  }

  async function create(event) {
    event.preventDefault();
    try {
      const view = await api("/api/runs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ config: config() }) });
      location.href = withToken(`/runs/${encodeURIComponent(view.run_id)}`);
    } catch (err) {
      result.replaceChildren(el("div", { class: "banner bad" }, err.message));
    }
  }

  document.getElementById("plan-button").onclick = plan;
  form.addEventListener("submit", create);
})();
