// Steering a run from its page: pause, resume, stop and notes for the run; reject, pin, note,
// branch, compare and why for a candidate. Actions go to the run's actions route (source
// "console"); the run's `action` events, replayed by the page's stream, are the state shown,
// so every page open on the run agrees with what the run logged.
"use strict";

const Steer = (() => {
  const { api, el, cid, fmt, clock, toast, withToken } = Console;
  let ctx = null;  // { runId, S, touch, $ } from the run page

  function state() {
    return { paused: false, rejected: new Map(), pinned: null, notes: 0, stop: null, selected: new Set() };
  }

  /** Fold one `action` event into `st`; returns the parts of its line in the timeline. */
  function fold(st, d) {
    const by = ` (${d.source || "a person"})`;
    const c = d.candidate_id;
    switch (d.action) {
      case "pause": st.paused = true; return ["paused", by, ": no new rollout or reflection starts"];
      case "resume": st.paused = false; return ["resumed", by];
      case "reject":
        st.rejected.set(c, d.reason || "");
        if (st.pinned === c) st.pinned = null;
        return ["rejected ", cid(c), by, `: ${d.reason || "no reason given"}`];
      case "pin": st.pinned = c; return ["pinned ", cid(c), by, ": the next proposals start from it"];
      case "unpin": {
        const was = st.pinned;
        st.pinned = null;
        return ["unpinned ", was ? cid(was) : "", by];
      }
      case "note":
        st.notes += 1;
        return ["note", by, c ? [" for the lineage of ", cid(c)] : " for every proposal", `: ${d.text || ""}`];
      case "stop": st.stop = d.reason || "stop"; return ["stop asked", by, `: ${d.reason || "no reason given"}; the best so far is promoted`];
      default: return [`${d.action}`, by];
    }
  }

  function isOpen(S) { return !["completed", "failed"].includes(S.status) && S.phase !== "completed"; }

  async function act(action, fields = {}) {
    const body = Object.assign({ action, source: "console" }, fields);
    try {
      await api(`/api/runs/${encodeURIComponent(ctx.runId)}/actions`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      });
      toast(`${action}: sent`);
      return true;
    } catch (err) {
      toast(err.message);
      return false;
    }
  }

  /** A small form in a modal: resolves to its values, or null when cancelled. */
  function ask({ title, help, fields, ok }) {
    return new Promise((resolve) => {
      const inputs = fields.map((f) => {
        const attrs = { name: f.name, id: `ask-${f.name}`, required: f.required, placeholder: f.placeholder || "" };
        const input = f.type === "textarea" ? el("textarea", Object.assign({ rows: 4 }, attrs))
          : f.type === "select" ? el("select", attrs, ...f.options.map(([v, label]) => el("option", { value: v }, label)))
            : el("input", Object.assign({ type: f.type || "text", min: f.min }, attrs));
        if (f.type === "checkbox") input.checked = Boolean(f.value);
        else if (f.value !== undefined) input.value = f.value;
        return el("label", { class: f.type === "checkbox" ? "check" : "" }, f.type === "checkbox" ? [input, f.label] : [f.label, input]);
      });
      const form = el("form", { class: "ask" }, el("h3", {}, title), help ? el("p", {}, help) : "", ...inputs,
        el("div", { class: "row" }, el("button", { type: "button", id: "ask-cancel" }, "Cancel"),
          el("button", { type: "submit", class: "primary", id: "ask-ok" }, ok || "OK")));
      const modal = el("div", { class: "modal", id: "ask" }, form);
      const close = (value) => { modal.remove(); resolve(value); };
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        const values = {};
        for (const f of fields) {
          const input = form.elements[f.name];
          values[f.name] = f.type === "checkbox" ? input.checked : input.value.trim();
        }
        close(values);
      });
      form.querySelector("#ask-cancel").onclick = () => close(null);
      modal.addEventListener("click", (e) => { if (e.target === modal) close(null); });
      document.body.append(modal);
      (form.querySelector("textarea, input:not([type=checkbox]), select") || form.querySelector("#ask-ok")).focus();
    });
  }

  async function reject(c) {
    const v = await ask({ title: `Reject ${c.slice(0, 10)}`, ok: "Reject",
      help: "It is never a parent again, never merged, never promoted. Why? (kept with the run)",
      fields: [{ name: "reason", label: "Reason", type: "textarea", required: true, placeholder: "e.g. it games the verifier" }] });
    return v ? act("reject", { candidate_id: c, reason: v.reason }) : false;
  }

  async function note(c) {
    const v = await ask({ title: "A note to the reflection model", ok: "Send note",
      help: "Shown to the reflection model in the next proposals, as a person's feedback.",
      fields: [
        { name: "text", label: "Note", type: "textarea", required: true, placeholder: "e.g. look at the refund cases" },
        { name: "scope", label: "For", type: "select", value: c ? "lineage" : "all",
          options: [["all", "every proposal"], ...(c ? [["lineage", `proposals on the lineage of ${c.slice(0, 10)}`]] : [])] },
        { name: "keep", label: "keep showing it to every later proposal (not only until one written with it is accepted)", type: "checkbox" },
      ] });
    if (v) await act("note", { text: v.text, candidate_id: v.scope === "lineage" ? c : null, keep: v.keep });
  }

  async function stop() {
    const v = await ask({ title: "Stop searching", ok: "Stop and promote",
      help: "The search stops now and the best so far goes through promotion, with its evidence packet (a cancel ends the run without one).",
      fields: [{ name: "reason", label: "Reason", type: "text", placeholder: "e.g. good enough" }] });
    if (v) await act("stop", { reason: v.reason || "stopped from the console" });
  }

  async function branch(c) {
    const v = await ask({ title: `Branch from ${c.slice(0, 10)}`, ok: "Create branch",
      help: "A new run whose baseline is this candidate; the rest of its config is this run's. Its baseline's rollouts already stored cost nothing.",
      fields: [
        { name: "max_metric_calls", label: "Budget (metric calls; empty: this run's)", type: "number", min: 1 },
        { name: "seed", label: "Seed (empty: this run's)", type: "number" },
        { name: "start", label: "Start it now", type: "checkbox", value: true },
      ] });
    if (!v) return;
    const config = {};
    if (v.max_metric_calls) config.max_metric_calls = Number(v.max_metric_calls);
    if (v.seed !== "") config.seed = Number(v.seed);
    try {
      const made = await api(`/api/runs/${encodeURIComponent(ctx.runId)}/branch`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ candidate_id: c, config, start: v.start }),
      });
      location.href = withToken(`/runs/${encodeURIComponent(made.run_id)}`);
    } catch (err) {
      toast(err.message);
    }
  }

  function compareUrl(a, b) {
    return withToken(`/runs/${encodeURIComponent(ctx.runId)}/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  }

  /** The run's steering bar: what a person may do now, and what was done. */
  function render(S) {
    const st = S.steer, $ = ctx.$, open = isOpen(S) && S.status === "running";
    $("pause").hidden = !open || st.paused;
    $("resume").hidden = !open || !st.paused;
    $("stop").hidden = !open || Boolean(st.stop);
    $("note").hidden = !open;
    const picked = [...st.selected];
    $("compare").disabled = picked.length !== 2;
    $("compare").textContent = picked.length === 2 ? "Compare the two selected" : `Compare (select two: ${picked.length}/2)`;
    const parts = [];
    if (st.paused) parts.push(el("span", { class: "chip paused" }, "paused"));
    if (st.stop) parts.push(el("span", { class: "chip stopping" }, "stop asked"));
    if (st.pinned) parts.push(el("span", {}, "pinned ", cid(st.pinned)));
    if (st.rejected.size) parts.push(el("span", {}, `${st.rejected.size} rejected`));
    if (st.notes) parts.push(el("span", {}, `${st.notes} note${st.notes > 1 ? "s" : ""}`));
    $("steer-state").replaceChildren(...parts.flatMap((p, i) => (i ? [" · ", p] : [p])));
  }

  let shown = null;  // the candidate the drawer shows, if any

  /** The candidate's page (in the drawer): its text, its scores, actions, and its decisions. */
  async function openCandidate(id) {
    const { S, $ } = ctx, c = S.candidates.get(id) || { id, parents: [], origin: "?" };
    const st = S.steer, live = isOpen(S);
    $("drawer-title").replaceChildren("Candidate ", cid(id, id));
    const best = S.best && S.best.candidate_id;
    // Shown again once its action's event is in, unless the person closed the drawer or
    // opened something else meanwhile.
    const again = (done) => {
      if (done) setTimeout(() => { if (!$("drawer").hidden && shown === id) openCandidate(id); }, 500);
    };
    shown = id;
    const pin = async () => again(await act(st.pinned === id ? "unpin" : "pin", st.pinned === id ? {} : { candidate_id: id }));
    const buttons = [
      live && !st.rejected.has(id) ? el("button", { id: "c-pin", onclick: pin }, st.pinned === id ? "Unpin" : "Pin as the next parent") : "",
      live && !st.rejected.has(id) ? el("button", { id: "c-reject", class: "danger", onclick: async () => again(await reject(id)) }, "Reject") : "",
      live ? el("button", { id: "c-note", onclick: () => note(id) }, "Note…") : "",
      el("button", { id: "c-branch", onclick: () => branch(id) }, "Branch from it"),
      best && best !== id ? el("a", { class: "button", id: "c-compare", href: compareUrl(best, id) }, "Compare with the best") : "",
    ];
    const why = el("div", { id: "c-why" }, el("div", { class: "empty" }, "loading its decisions…"));
    $("drawer-body").replaceChildren(
      el("dl", { class: "kv" },
        el("dt", {}, "origin"), el("dd", {}, c.origin),
        el("dt", {}, "parents"), el("dd", {}, ...(c.parents.length ? c.parents.map((p) => cid(p)) : ["–"])),
        el("dt", {}, "train mean"), el("dd", {}, fmt(c.mean)),
        el("dt", {}, "gate"), el("dd", {}, c.gate ? `${fmt(c.gate.parent_score, 1)} → ${fmt(c.gate.child_score, 1)} ${c.gate.accepted ? "passed" : "rejected"}` : "–"),
        st.rejected.has(id) ? [el("dt", {}, "rejected"), el("dd", {}, st.rejected.get(id) || "by a person")] : ""),
      el("div", { class: "row actions-row" }, ...buttons),
      el("h2", { style: "margin-top:16px" }, "Why: its decisions"), why);
    $("drawer").hidden = false;
    try {
      const doc = await api(`/api/runs/${encodeURIComponent(ctx.runId)}/why?candidate=${encodeURIComponent(id)}`);
      const w = doc.candidates[0];
      why.replaceChildren(
        el("p", { class: "decision" }, el("b", {}, w.decision), " — ", w.because),
        w.rationale ? el("details", {}, el("summary", {}, "the proposer's rationale"), el("pre", {}, w.rationale)) : "",
        el("ol", { class: "decisions" }, ...w.decisions.map((d) => el("li", { class: `kind-${d.kind}` },
          el("span", { class: "t" }, d.ts ? clock(d.ts) : ""), el("span", { class: "tag" }, d.kind), el("span", {}, d.text)))));
    } catch (err) {
      why.replaceChildren(el("div", { class: "banner bad" }, err.message));
    }
  }

  function toggle(id, on) {
    const sel = ctx.S.steer.selected;
    if (on) sel.add(id); else sel.delete(id);
    while (sel.size > 2) sel.delete(sel.values().next().value);
    ctx.touch();
  }

  function init(run) {
    ctx = run;
    const { $ } = ctx;
    $("pause").onclick = () => act("pause");
    $("resume").onclick = () => act("resume");
    $("stop").onclick = () => stop();
    $("note").onclick = () => note(null);
    $("compare").onclick = () => {
      const [a, b] = [...ctx.S.steer.selected];
      location.href = compareUrl(a, b);
    };
  }

  /** Where this run came from and the runs that branch from it, as links. */
  function links(view) {
    const out = [];
    const run = (r) => el("a", { href: withToken(`/runs/${encodeURIComponent(r)}`), class: "mono" }, r);
    if (view.branch_of) out.push(el("span", { id: "branched-from" }, " · branched from run ", run(view.branch_of.run_id), " at ", cid(view.branch_of.candidate_id)));
    if (view.branches && view.branches.length) {
      out.push(el("span", { id: "branches" }, " · branches: ",
        ...view.branches.flatMap((b, i) => [i ? ", " : "", run(b.run_id), " (at ", cid(b.candidate_id), ")"])));
    }
    return out;
  }

  return { state, fold, render, init, openCandidate, toggle, links };
})();
