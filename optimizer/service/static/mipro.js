// The Trials panel of a MIPRO run: folds `mipro_setup` and `trial` events and renders them.
"use strict";

const Mipro = (() => {
  const { el, cid, score, fmt } = Console;
  const SVG = "http://www.w3.org/2000/svg";
  const PREVIEW = 120;

  function state() {
    return { setup: null, trials: new Map(), changed: false };
  }

  /** Fold one MIPRO event into `m`; returns the parts of a line for the activity log, or null. */
  function fold(m, ev) {
    const d = ev.data || {};
    m.changed = true;
    if (ev.type === "mipro_setup") {
      m.setup = {
        instructions: (d.instructions || []).map(String), demoSets: d.demo_sets || [],
        bootstrapped: d.bootstrapped, labelled: d.labelled, summary: d.summary, rejected: (d.rejected || []).length,
      };
      return [`MIPRO search: ${m.setup.instructions.length} instruction candidates × ${m.setup.demoSets.length} demo sets` +
        ` (${d.bootstrapped ?? 0} bootstrapped, ${d.labelled ?? 0} labelled demos)`];
    }
    const before = latestBest(m);
    m.trials.set(d.trial, d);  // keyed by trial number: a resumed run's replay replaces, never duplicates
    const best = d.best;
    if (best && (!before || best.candidate_id !== before.candidate_id)) {
      return [`trial ${d.trial}: best so far `, cid(best.candidate_id), ` (minibatch mean ${fmt(best.score)})`];
    }
    return null;
  }

  function latestBest(m) {
    let last = null;
    for (const t of m.trials.values()) if (last === null || t.trial > last.trial) last = t;
    return last && last.best;
  }

  const ordered = (m) => [...m.trials.values()].sort((a, b) => b.trial - a.trial);  // newest first, as the page's feeds

  function demoLabel(m, index) {
    const set = m.setup && m.setup.demoSets[index];
    if (!set) return String(index);
    return `${index} · ${set.length ? `${set.length} demo${set.length === 1 ? "" : "s"}` : "zero-shot"}`;
  }

  function preview(value, n) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > n ? text.slice(0, n) + "…" : text;
  }

  function row(m, t, best) {
    const instruction = m.setup && m.setup.instructions[t.instruction];
    const seeds = t.minibatch || [];
    const isBest = best && (t.candidate_id === best.candidate_id || t.trial === best.trial);
    return el("tr", { class: isBest ? "best" : "", "data-trial": t.trial },
      el("td", { class: "num" }, t.trial),
      el("td", { class: "num", title: instruction === undefined ? null : preview(instruction, 400) }, t.instruction),
      el("td", { class: "demo" }, demoLabel(m, t.demo_set)),
      el("td", {}, t.candidate_id ? cid(t.candidate_id) : "–"),
      el("td", { class: "num", title: `${seeds.length} seeds: ${seeds.join(", ")} · ${t.paid ?? 0} paid` },
        score(t.score, t.score === null ? "error" : undefined)),
      el("td", { class: "num", title: t.best ? `${t.best.candidate_id} (trial ${t.best.trial})` : null },
        t.best ? score(t.best.score) : "–"));
  }

  /** Minibatch score per trial (dots, grey when every rollout errored) and the best so far (a step line). */
  function plot(target, trials) {
    const points = [...trials].reverse();
    if (points.length < 2) { target.replaceChildren(); return; }
    const W = 360, H = 84, P = 6;
    const first = points[0].trial, span = Math.max(1, points[points.length - 1].trial - first);
    const top = Math.max(1, ...points.map((t) => t.score ?? 0), ...points.map((t) => (t.best && t.best.score) ?? 0));
    const x = (n) => P + ((n - first) / span) * (W - 2 * P);
    const y = (v) => P + (1 - v / top) * (H - 2 * P);
    const node = (tag, attrs, ...children) => {
      const n = document.createElementNS(SVG, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      n.append(...children);
      return n;
    };
    let d = "";
    for (const t of points) {
      if (!t.best || t.best.score === null || t.best.score === undefined) continue;
      d += d ? `H${x(t.trial)}V${y(t.best.score)}` : `M${x(t.trial)},${y(t.best.score)}`;
    }
    const root = node("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "minibatch score per trial" },
      node("line", { class: "axis", x1: P, x2: W - P, y1: y(0), y2: y(0) }));
    if (d) root.append(node("path", { class: "best", d }));
    for (const t of points) {
      const ok = t.score !== null && t.score !== undefined;
      root.append(node("circle", { class: ok ? "pt" : "pt rej", cx: x(t.trial), cy: y(ok ? t.score : 0), r: 3 },
        node("title", {}, `trial ${t.trial} · ${ok ? Number(t.score).toFixed(3) : "every rollout errored"}`)));
    }
    target.replaceChildren(root,
      el("div", { class: "spark-foot" }, "minibatch score per trial (grey at 0: every rollout errored) · line: best so far"));
  }

  function instructions(target, m, trials) {
    const tried = new Map();
    for (const t of trials) {
      const s = tried.get(t.instruction) || { n: 0, best: null };
      s.n += 1;
      if (t.score !== null && t.score !== undefined && (s.best === null || t.score > s.best)) s.best = t.score;
      tried.set(t.instruction, s);
    }
    target.replaceChildren(...m.setup.instructions.map((text, i) => {
      const s = tried.get(i);
      const long = text.length > PREVIEW;
      return el("li", { "data-instruction": i },
        el("span", { class: "idx" }, i),
        el("div", { class: "text", title: text },
          long ? el("details", {}, el("summary", {}, preview(text, PREVIEW)), el("pre", {}, text)) : el("pre", {}, text)),
        el("span", { class: "meta" }, i === 0 ? el("span", { class: "tag" }, "baseline") : "",
          s ? ` ${s.n}× · best ${fmt(s.best, 2)}` : " not tried"));
    }));
  }

  function demoSets(target, m) {
    target.replaceChildren(...m.setup.demoSets.map((set, i) => el("span", {
      class: "tag", "data-demo-set": i,
      title: set.length ? set.map((demo) => `${preview(demo.input ?? "", 80)} → ${preview(demo.output ?? "", 80)}`).join("\n") : "no demos: zero-shot",
    }, demoLabel(m, i))));
  }

  /** Render the panel into its elements (`$` looks them up by id) when something changed. */
  function render($, m) {
    if (!m.changed) return;
    m.changed = false;
    const trials = ordered(m);
    const best = trials.length ? trials[0].best : null;
    $("mipro-trials").querySelector("tbody").replaceChildren(...trials.map((t) => row(m, t, best)));
    $("mipro-empty").hidden = trials.length > 0;
    $("mipro-count").textContent = `${trials.length} trial${trials.length === 1 ? "" : "s"}`;
    plot($("mipro-plot"), trials);
    $("mipro-setup").hidden = !m.setup;
    if (!m.setup) return;
    instructions($("mipro-instructions"), m, trials);
    demoSets($("mipro-demos"), m);
    $("mipro-demo-foot").textContent = `${m.setup.bootstrapped ?? 0} bootstrapped · ${m.setup.labelled ?? 0} labelled demos`;
    $("mipro-instructions-foot").textContent = m.setup.rejected ? `${m.setup.rejected} proposal${m.setup.rejected === 1 ? "" : "s"} rejected` : "";
    const summary = $("mipro-summary");
    summary.hidden = !m.setup.summary;
    summary.querySelector("pre").textContent = m.setup.summary || "";
  }

  return { state, fold, render };
})();
