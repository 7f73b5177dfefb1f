// Rendering of the run page's widgets from the folded state: chart, frontier, candidates, diff, trace.
"use strict";

const Widgets = (() => {
  const { el, cid, color, fmt, score, clock } = Console;
  const SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attrs = {}, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  /** Best train score over time: a step line of the best so far, a dot per scored candidate. */
  function chart(target, state) {
    const points = state.scored;
    if (!points.length) {
      target.replaceChildren(el("div", { class: "empty" }, "The curve starts once the baseline is scored on the train split."));
      return;
    }
    const W = 640, H = 240, L = 44, R = 14, T = 14, B = 30;
    const t0 = state.startedAt ?? points[0].t;
    const tEnd = Math.max(state.now ?? points[points.length - 1].t, points[points.length - 1].t, t0 + 1);
    const top = Math.max(1, ...points.map((p) => p.mean));
    const x = (t) => L + ((t - t0) / (tEnd - t0)) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "best score over time" });
    root.append(svg("defs", {}, svg("linearGradient", { id: "bestFill", x1: 0, y1: 0, x2: 0, y2: 1 },
      svg("stop", { offset: "0%", "stop-color": "#4f46e5", "stop-opacity": "0.18" }),
      svg("stop", { offset: "100%", "stop-color": "#4f46e5", "stop-opacity": "0" }))));
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      root.append(svg("line", { class: "gridline", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      root.append(svg("text", { x: L - 8, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
    }
    const span = tEnd - t0;
    for (let i = 0; i <= 4; i++) {
      const t = t0 + (span * i) / 4;
      const label = span < 10 ? (t - t0).toFixed(1) + "s" : span < 120 ? Math.round(t - t0) + "s" : Math.round((t - t0) / 60) + "m";
      root.append(svg("text", { x: x(t), y: H - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, label));
    }
    root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    if (state.baseline && state.baseline.mean !== null && state.baseline.mean !== undefined) {
      root.append(svg("line", { class: "base", x1: L, x2: W - R, y1: y(state.baseline.mean), y2: y(state.baseline.mean) }));
    }
    let best = -Infinity, d = "", last = null;
    for (const p of points) {
      if (p.mean > best) {
        best = p.mean;
        d += last === null ? `M${x(p.t)},${y(best)}` : `H${x(p.t)}V${y(best)}`;
        last = p;
      }
    }
    d += `H${x(tEnd)}`;
    root.append(svg("path", { class: "area", d: `${d}V${y(0)}H${x(points[0].t)}Z` }));
    root.append(svg("path", { class: "best", d }));
    for (const p of points) {
      root.append(svg("circle", { class: "pt", cx: x(p.t), cy: y(p.mean), r: 3.5 },
        svg("title", {}, `${p.id} · train ${p.mean.toFixed(3)} · ${clock(p.t)}`)));
    }
    target.replaceChildren(root);
  }

  /** Seeds x frontier candidates; cells the last update won are ringed; a seed nobody solved
   *  (every candidate scored 0, or no score) is a miss, won by nobody. */
  function frontier(target, state) {
    const seeds = Object.keys(state.winners);
    if (!seeds.length) {
      target.replaceChildren(el("div", { class: "empty" },
        "The baseline alone until a new candidate passes the minibatch gate and is scored on the full train split."));
      return;
    }
    const wins = new Map();
    for (const s of seeds) for (const c of state.winners[s]) wins.set(c, (wins.get(c) || 0) + 1);
    const rows = [...wins.keys()].sort((a, b) => wins.get(b) - wins.get(a) || a.localeCompare(b));
    if (!rows.length) {
      target.replaceChildren(el("div", { class: "empty" },
        `No candidate solved a train seed yet: every seed is a miss (0/${seeds.length} covered).`));
      return;
    }
    const head = el("tr", {}, el("th"), ...seeds.map((s) => el("th", { class: "seed", title: s }, s)), el("th"));
    const body = rows.map((c) => el("tr", {},
      el("td", { class: "label" }, cid(c)),
      ...seeds.map((s) => {
        const won = state.winners[s].includes(c), miss = !state.winners[s].length;
        const fresh = won && state.newWins.has(`${s}|${c}`);
        const title = miss ? `${s}: a miss, no candidate solved it` : `${s}: ${won ? "won by " : "not won by "}${c}`;
        return el("td", { class: `cell${won ? " win" : ""}${miss ? " miss" : ""}${fresh ? " new" : ""}`, style: `--c:${color(c)}`, title });
      }),
      el("td", { class: "count" }, `${wins.get(c)}/${seeds.length}`)));
    target.replaceChildren(
      el("table", {}, el("thead", {}, head), el("tbody", {}, ...body)),
      el("div", { class: "legend" },
        el("span", {}, el("i", { style: `background:${color(rows[0])}` }), "wins the seed (ties: every best candidate)"),
        el("span", {}, el("i", { class: "miss" }), "miss: no candidate solved the seed"),
        el("span", {}, el("i", { class: "ring" }), "new win in the last update")));
    target.classList.toggle("dense", seeds.length > 48);
  }

  /** Candidates ranked by train mean, then seeds won, with their best seed; the best is
   *  highlighted, a person's pin and rejections tagged. ``on.open(id)`` opens a candidate's page,
   *  ``on.select(id, checked)`` picks it for a comparison. */
  function candidates(tbody, state, on = {}) {
    const steer = state.steer || { rejected: new Map(), pinned: null, selected: new Set() };
    const wins = new Map();
    for (const list of Object.values(state.winners)) for (const c of list) wins.set(c, (wins.get(c) || 0) + 1);
    const list = [...state.candidates.values()].sort((a, b) =>
      (b.mean ?? -1) - (a.mean ?? -1) || (wins.get(b.id) || 0) - (wins.get(a.id) || 0) || a.order - b.order);
    const bestId = state.best && state.best.candidate_id;
    const row = (c) => ({
      class: `link${c.id === bestId ? " best" : ""}${steer.rejected.has(c.id) ? " rejected" : ""}`,
      title: c.rationale || "", "data-candidate": c.id,
      onclick: (e) => { if (on.open && e.target.type !== "checkbox") on.open(c.id); },
    });
    const pick = (c) => el("input", { type: "checkbox", class: "pick", checked: steer.selected.has(c.id),
      onchange: (e) => on.select && on.select(c.id, e.target.checked) });
    tbody.replaceChildren(...list.map((c, i) => el("tr", row(c),
      el("td", {}, pick(c)),
      el("td", { class: "num" }, i + 1),
      el("td", {}, cid(c.id),
        steer.pinned === c.id ? el("span", { class: "tag pinned" }, "pinned") : "",
        steer.rejected.has(c.id) ? el("span", { class: "tag rejected", title: steer.rejected.get(c.id) }, "rejected") : ""),
      el("td", {}, el("span", { class: `tag origin-${c.origin}` }, c.origin)),
      el("td", {}, ...(c.parents.length ? c.parents.map((p) => cid(p, p.slice(0, 6))) : ["–"])),
      el("td", { class: "num mean" }, c.mean === undefined || c.mean === null ? "–" : score(c.mean)),
      el("td", { class: "num top" }, c.best === undefined || c.best === null ? "–" : score(c.best)),
      el("td", { class: "num" }, wins.get(c.id) || 0),
      el("td", { class: "num" }, c.gate ? `${fmt(c.gate.parent_score, 1)}→${fmt(c.gate.child_score, 1)} ${c.gate.accepted ? "✓" : "✗"}` : "–"))));
  }

  function diff(text) {
    const pre = el("pre", { class: "diff" });
    if (!text) { pre.textContent = "(no change: the baseline is still the best candidate)"; return pre; }
    for (const line of text.split("\n")) {
      const cls = line.startsWith("+++") || line.startsWith("---") ? "hunk" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
      pre.append(cls ? el("span", { class: cls }, line) : document.createTextNode(line + "\n"));
    }
    return pre;
  }

  /** The verdict card of a finished run, from its evidence packet. */
  function promotion(target, packet) {
    const p = packet.promotion, best = packet.best, base = packet.baseline;
    const lift = (p.lift >= 0 ? "+" : "") + p.lift.toFixed(3);
    target.replaceChildren(
      el("div", { class: "verdict" },
        el("div", {}, el("div", { class: `big ${p.promoted ? "yes" : "no"}` }, p.promoted ? "Promoted" : "Not promoted"),
          el("div", { class: "sub" }, `best ${best.candidate_id} vs baseline ${base.candidate_id} on ${p.n} holdout seeds`)),
        el("dl", { class: "kv" },
          el("dt", {}, "holdout"), el("dd", {}, `${fmt(base.holdout)} → ${fmt(best.holdout)}`),
          el("dt", {}, "lift"), el("dd", {}, `${lift}  (95% CI ${p.ci_low.toFixed(3)} … ${p.ci_high.toFixed(3)})`),
          el("dt", {}, "train"), el("dd", {}, `${fmt(base.train)} → ${fmt(best.train)}`)),
        el("dl", { class: "kv" },
          el("dt", {}, "min improvement"), el("dd", {}, p.min_improvement.toFixed(3)),
          el("dt", {}, "chosen on"), el("dd", {}, p.selection_split),
          el("dt", {}, "lineage"), el("dd", {}, (best.lineage || []).map((c) => c.slice(0, 6)).join(" → ")))),
      diff(packet.diff));
  }

  /** The drawer body for one rollout: scores, feedback, output, trace messages. */
  function trace(target, r) {
    const messages = (r.trace && r.trace.messages) || [];
    target.replaceChildren(
      el("dl", { class: "kv" },
        el("dt", {}, "candidate"), el("dd", {}, r.candidate_id),
        el("dt", {}, "seed"), el("dd", {}, r.seed),
        el("dt", {}, "reward"), el("dd", {}, r.status === "ok" ? String(r.reward) : "error"),
        el("dt", {}, "latency"), el("dd", {}, `${Math.round(r.latency_ms)} ms · ${r.attempts} attempt(s)`),
        el("dt", {}, "tokens"), el("dd", {}, `${r.usage.input_tokens} in / ${r.usage.output_tokens} out`)),
      el("h2", { style: "margin-top:16px" }, "Verifier feedback"),
      el("div", { class: "msg" }, el("pre", {}, r.feedback || r.error || "(none)")),
      el("h2", { style: "margin-top:16px" }, "Output"),
      el("div", { class: "msg" }, el("pre", {}, typeof r.output === "string" ? r.output : JSON.stringify(r.output, null, 2))),
      el("h2", { style: "margin-top:16px" }, `Trace${r.trace_truncated ? " (truncated)" : ""}`),
      ...(messages.length
        ? messages.map((m) => el("div", { class: `msg ${m.role || ""}` }, el("div", { class: "role" }, m.role || "message"),
          el("pre", {}, typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 2))))
        : [el("div", { class: "msg" }, el("pre", {}, JSON.stringify(r.trace, null, 2)))]));
  }

  return { chart, frontier, candidates, promotion, trace, diff };
})();
