// The index of runs: polls GET /api/runs every few seconds.
"use strict";

(() => {
  const { api, el, chip, fmt, ago, withToken } = Console;
  const body = document.querySelector("#runs tbody");
  const problem = document.getElementById("problem");

  function budgetCell(b) {
    const limit = b.limit || 0;
    const paid = limit ? Math.min(100, (100 * b.paid) / limit) : 0;
    const cached = limit ? Math.min(100 - paid, (100 * b.cached) / limit) : 0;
    return el("td", {},
      el("div", { class: "mono" }, `${b.paid} / ${b.limit ?? "∞"}`, el("span", { class: "tag", style: "margin-left:6px" }, `${b.cached} cached`)),
      el("div", { class: "meter" }, el("span", { style: `width:${paid}%` }), el("span", { class: "cached", style: `width:${cached}%` })));
  }

  function row(run) {
    const now = Date.now() / 1000;
    const open = () => { location.href = withToken(`/runs/${encodeURIComponent(run.run_id)}`); };
    return el("tr", { class: "link", onclick: open, "data-run": run.run_id },
      el("td", {}, el("a", { class: "mono", href: withToken(`/runs/${encodeURIComponent(run.run_id)}`) }, run.run_id)),
      el("td", {}, run.program_id || el("span", { class: "tag" }, "not reached")),
      el("td", {}, chip(run.status)),
      el("td", {}, chip(run.phase)),
      budgetCell(run.budget),
      el("td", { class: "num" }, run.best ? fmt(run.best.mean) : "–"),
      el("td", { class: "num" }, run.candidates),
      el("td", {}, new Date(run.created_at * 1000).toLocaleString()),
      el("td", {}, run.last_event_at ? ago(now - run.last_event_at) + " ago" : "–"));
  }

  async function refresh() {
    const dot = document.getElementById("live-dot");
    const text = document.getElementById("live-text");
    try {
      const [{ runs }, health] = await Promise.all([api("/api/runs"), api("/api/health")]);
      document.getElementById("workspace").textContent = `Workspace ${health.workspace} · ${runs.length} run${runs.length === 1 ? "" : "s"}`;
      body.replaceChildren(...runs.map(row));
      document.getElementById("empty").hidden = runs.length > 0;
      problem.hidden = true;
      dot.className = "dot on";
      text.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (err) {
      problem.hidden = false;
      problem.textContent = err.status === 401
        ? "The service needs a token: open this page as /?token=<token> (the value given to gepa-runtime serve --token or GEPA_SERVE_TOKEN)."
        : err.message;
      dot.className = "dot off";
      text.textContent = "not connected";
    }
  }

  Console.tokenLinks();
  refresh();
  setInterval(refresh, 3000);
})();
