// The run page's trade-off chart: each candidate's reward against its cost (or latency, or
// prompt length), the frontier over the two marked, from the evidence packet's `objectives`.
"use strict";

const Objectives = (() => {
  const { el, cid } = Console;
  const SVG = "http://www.w3.org/2000/svg";
  const AXES = {
    cost_usd: { tab: "Cost", label: "student cost per rollout", tick: (v) => "$" + money(v) },
    latency_ms: { tab: "Latency", label: "latency per rollout", tick: (v) => (v < 10 ? v.toFixed(1) : Math.round(v)) + " ms" },
    prompt_tokens: { tab: "Prompt length", label: "prompt length", tick: (v) => Math.round(v) + " tokens" },
  };

  function svg(tag, attrs = {}, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  /** Dollars with three significant digits, never in exponent form. */
  function money(v) {
    if (v === 0) return "0";
    const places = v >= 1 ? 2 : Math.max(2, 2 - Math.floor(Math.log10(v)));
    return v.toFixed(places);
  }

  /** The chart of one axis into `target`: dots, the frontier's line, the baseline and the winner. */
  function chart(target, section, axis) {
    const info = AXES[axis];
    const placed = section.candidates.filter((c) => c[axis] !== null && c[axis] !== undefined);
    if (!placed.length) {
      target.replaceChildren(el("div", { class: "empty" },
        `No candidate has a known ${info.label}` + (axis === "cost_usd" ? ": the student model has no price (give it with --prices)." : ".")));
      return;
    }
    const W = 640, H = 260, L = 56, R = 18, T = 28, B = 40;
    const xs = placed.map((c) => c[axis]), ys = placed.map((c) => c.reward);
    const [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    const x = (v) => L + (x1 === x0 ? 0.5 : (v - x0) / (x1 - x0)) * (W - L - R);
    const y = (v) => T + (1 - (y1 === y0 ? 0.5 : (v - y0) / (y1 - y0))) * (H - T - B);
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "data-axis": axis,
      "aria-label": `reward against ${info.label}, the frontier marked` });
    for (const v of y1 === y0 ? [y0] : [y0, (y0 + y1) / 2, y1]) {
      root.append(svg("line", { class: "gridline", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      root.append(svg("text", { x: L - 8, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(3)));
    }
    root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    root.append(svg("text", { x: L, y: H - B + 16, "text-anchor": "start" }, info.tick(x0)));
    if (x1 !== x0) root.append(svg("text", { x: W - R, y: H - B + 16, "text-anchor": "end" }, info.tick(x1)));
    root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, `${info.label} (lower is better) →`));
    root.append(svg("text", { x: L - 8, y: 12, "text-anchor": "end", class: "ylabel" }, "reward ↑"));
    const front = placed.filter((c) => c.on_frontier[axis]).sort((a, b) => a[axis] - b[axis]);
    if (front.length > 1) {
      root.append(svg("polyline", { class: "frontier-line", points: front.map((c) => `${x(c[axis])},${y(c.reward)}`).join(" ") }));
    }
    for (const c of placed) root.append(mark(c, axis, x(c[axis]), y(c.reward)));
    target.replaceChildren(root);
  }

  function mark(c, axis, px, py) {
    const on = Boolean(c.on_frontier[axis]);
    const attrs = { class: "point" + (on ? " frontier" : "") + (c.winner ? " winner" : "") + (c.baseline ? " baseline" : ""),
      "data-candidate": c.candidate_id, "data-frontier": String(on) };
    const title = svg("title", {}, `${c.candidate_id}${c.baseline ? " (baseline)" : ""}${c.winner ? " (winner)" : ""} · reward ${c.reward.toFixed(3)} · ${AXES[axis].tick(c[axis])}` +
      (on ? " · on the frontier" : " · dominated"));
    const shape = c.baseline
      ? svg("rect", Object.assign({ x: px - 5, y: py - 5, width: 10, height: 10 }, attrs), title)
      : svg("circle", Object.assign({ cx: px, cy: py, r: 5 }, attrs), title);
    if (!c.winner) return shape;
    return svg("g", {}, shape, svg("circle", { class: "winner-ring", cx: px, cy: py, r: 9 }));
  }

  /** The panel: a tab per axis, the chart, and a line on what the rule chose. */
  function render(panel, packet) {
    const section = packet.objectives;
    if (!section || !section.candidates || !section.candidates.length) { panel.hidden = true; return; }
    panel.hidden = false;
    const tabs = panel.querySelector(".tabs"), target = panel.querySelector(".tradeoff");
    const show = (axis) => {
      for (const b of tabs.children) b.classList.toggle("on", b.dataset.axis === axis);
      chart(target, section, axis);
    };
    tabs.replaceChildren(...Object.entries(AXES).map(([axis, info]) =>
      el("button", { class: "tab", "data-axis": axis, onclick: () => show(axis) }, info.tab)));
    show(section.candidates.some((c) => c.cost_usd !== null && c.cost_usd !== undefined) ? "cost_usd" : "prompt_tokens");
    const promo = packet.promotion || {}, t = promo.tradeoff;
    const winner = section.candidates.find((c) => c.winner);
    const parts = [`chosen by --select ${section.select}`, winner ? " · winner " : "", winner ? cid(winner.candidate_id) : ""];
    if (t && t.reward_given_up > 0) parts.push(` · gives up ${t.reward_given_up.toFixed(3)} of reward against `, cid(t.top_id));
    if (t && !t.eligible.length) parts.push(" · no candidate met the rule: the baseline stays");
    panel.querySelector(".aside").replaceChildren(...parts);
  }

  return { render, chart };
})();
