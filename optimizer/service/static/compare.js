// The compare page of two candidates: /runs/<id>/compare?a=&b= reads GET /api/runs/<id>/compare.
"use strict";

(() => {
  const { api, el, cid, score, fmt, toast, withToken } = Console;
  const $ = (id) => document.getElementById(id);
  const runId = decodeURIComponent(location.pathname.replace(/\/+$/, "").split("/").slice(-2)[0]);
  const base = `/api/runs/${encodeURIComponent(runId)}`;

  function split(name, s) {
    const rows = s.seeds.map((r) => el("tr", { class: r.a !== null && r.b !== null && r.a !== r.b ? "differs" : "" },
      el("td", { class: "mono" }, r.seed), el("td", { class: "a" }, score(r.a)), el("td", { class: "b" }, score(r.b))));
    return el("div", { class: `split split-${name}` },
      el("h3", {}, `${name}: A ${fmt(s.a_mean)} · B ${fmt(s.b_mean)}`),
      el("div", { class: "aside" }, `${s.n} seeds scored by both · A better on ${s.a_better}, B on ${s.b_better}, same on ${s.same}`),
      el("div", { class: "scroll" }, el("table", { class: "list side" },
        el("thead", {}, el("tr", {}, el("th", {}, "seed"), el("th", {}, "A"), el("th", {}, "B"))), el("tbody", {}, ...rows))));
  }

  function side(name, s) {
    const messages = (s.trace && s.trace.messages) || [];
    return el("div", {},
      el("h3", {}, `${name}: `, score(s.reward)),
      el("div", {}, "output"), el("pre", {}, typeof s.output === "string" ? s.output : JSON.stringify(s.output, null, 2)),
      el("div", {}, "verifier feedback"), el("pre", { class: "feedback" }, s.feedback || "(none)"),
      el("details", {}, el("summary", {}, `trace (${messages.length} messages)`),
        ...messages.map((m) => el("div", { class: `msg ${m.role || ""}` }, el("div", { class: "role" }, m.role || "message"),
          el("pre", {}, typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 2))))));
  }

  function render(view) {
    const a = view.a.candidate_id, b = view.b.candidate_id;
    $("pick-a").value = a;
    $("pick-b").value = b;
    $("about").replaceChildren("A ", cid(a), ` (${view.a.origin}) · B `, cid(b), ` (${view.b.origin})`);
    const diffs = Object.entries(view.diff);
    $("diff").replaceChildren(...(diffs.length
      ? diffs.map(([name, text]) => el("div", { class: "component", "data-component": name }, el("h3", {}, name), Widgets.diff(text)))
      : [el("div", { class: "empty" }, "the same text")]));
    const splits = Object.entries(view.splits);
    $("splits").replaceChildren(...(splits.length ? splits.map(([n, s]) => split(n, s))
      : [el("div", { class: "empty" }, "neither was scored on a seed yet")]));
    $("differ-title").textContent = `Where they differ (${view.differing_total} seeds)`;
    const more = view.differing_total - view.differing.length;
    $("differing").replaceChildren(
      ...(view.differing.length ? view.differing.map((d) => el("div", { class: "differ", "data-seed": d.seed },
        el("b", { class: "mono" }, d.seed), ` (${d.split})`, el("div", { class: "cols" }, side("A", d.a), side("B", d.b))))
        : [el("div", { class: "empty" }, "they score the same on every seed both were scored on")]),
      more > 0 ? el("div", { class: "aside" }, `and ${more} more seeds (the API lists the first ${view.differing.length})`) : "");
    $("result").hidden = false;
  }

  async function load(a, b) {
    history.replaceState(null, "", withToken(`/runs/${encodeURIComponent(runId)}/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`));
    try {
      render(await api(`${base}/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`));
      $("problem").hidden = true;
    } catch (err) {
      $("problem").hidden = false;
      $("problem").textContent = err.message;
    }
  }

  async function init() {
    Console.tokenLinks();
    $("crumb-run").textContent = runId;
    $("crumb-run").href = withToken(`/runs/${encodeURIComponent(runId)}`);
    document.title = `compare · ${runId} - gepa-runtime console`;
    const params = new URLSearchParams(location.search);
    try {
      const list = (await api(`${base}/candidates`)).candidates;
      for (const pick of [$("pick-a"), $("pick-b")]) {
        pick.replaceChildren(...list.map((c) => el("option", { value: c.candidate_id },
          `${c.candidate_id.slice(0, 12)} · ${c.origin} · train ${fmt(c.train_mean)}${c.is_best ? " · best" : ""}`)));
      }
      $("pick-a").value = params.get("a") || (list[list.length - 1] || {}).candidate_id || "";
      $("pick-b").value = params.get("b") || (list[0] || {}).candidate_id || "";
    } catch (err) {
      toast(err.message);
    }
    $("pickers").addEventListener("submit", (e) => { e.preventDefault(); load($("pick-a").value, $("pick-b").value); });
    const a = params.get("a"), b = params.get("b");
    if (a && b) load(a, b);
  }

  init();
})();
