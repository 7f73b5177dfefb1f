// One sweep over student models: polls GET /api/sweeps/<id> until its comparison is written.
"use strict";

(() => {
  const { api, el, chip, fmt, withToken } = Console;
  const sweepId = decodeURIComponent(location.pathname.split("/").pop());
  const body = document.querySelector("#models tbody");
  const problem = document.getElementById("problem");
  let timer = null;

  const withCi = (v, ci) => (v === null || v === undefined ? "–" : fmt(v) + (ci ? ` [${fmt(ci[0])}, ${fmt(ci[1])}]` : ""));

  function row(m, winner) {
    const runLink = el("a", { class: "mono", href: withToken(`/runs/${encodeURIComponent(m.run_id)}`) }, m.run_id);
    return el("tr", { "data-model": m.model, class: m.model === winner ? "winner" : null },
      el("td", {}, m.model, m.model === winner ? el("span", { class: "tag", style: "margin-left:6px" }, "cheapest meeting target") : null),
      el("td", {}, runLink),
      el("td", {}, chip(m.status)),
      el("td", { class: "num" }, withCi(m.baseline_holdout, m.baseline_ci)),
      el("td", { class: "num" }, withCi(m.best_holdout, m.best_ci)),
      el("td", { class: "num" }, m.lift === null ? "–" : (m.lift >= 0 ? "+" : "") + fmt(m.lift) + (m.promoted ? " promoted" : "")),
      el("td", { class: "num" }, m.cost_per_rollout_usd === null ? "–" : "$" + Number(m.cost_per_rollout_usd).toFixed(6)),
      el("td", { class: "num" }, m.latency_ms === null ? "–" : Math.round(m.latency_ms) + " ms"));
  }

  async function refresh() {
    const dot = document.getElementById("live-dot");
    const text = document.getElementById("live-text");
    try {
      const sweep = await api(`/api/sweeps/${encodeURIComponent(sweepId)}`);
      const c = sweep.comparison;
      document.getElementById("title").textContent = `Sweep ${sweep.sweep_id}`;
      const target = c.target_score === null ? "no target score" : `target ${c.target_score}: ${c.winner || "no model meets it"}`;
      document.getElementById("summary").textContent = `${sweep.models.length} student models · ${target} · ${sweep.finished ? "finished" : "running"}`;
      body.replaceChildren(...c.models.map((m) => row(m, c.winner)));
      document.getElementById("warnings").replaceChildren(...c.warnings.map((w) => el("div", { class: "banner bad" }, w)));
      problem.hidden = true;
      dot.className = sweep.finished ? "dot idle" : "dot on";
      text.textContent = sweep.finished ? "finished" : "updated " + new Date().toLocaleTimeString();
      if (sweep.finished && timer) clearInterval(timer);
    } catch (err) {
      problem.hidden = false;
      problem.textContent = err.message;
      dot.className = "dot off";
      text.textContent = "not connected";
    }
  }

  Console.tokenLinks();
  refresh();
  timer = setInterval(refresh, 3000);
})();
