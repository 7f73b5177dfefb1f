// The live console of one run: folds the run's SSE events into a state and renders it.
"use strict";

(() => {
  const { api, el, cid, score, clock, chip, ago, fmt, pct, toast, withToken } = Console;
  const runId = decodeURIComponent(location.pathname.replace(/\/+$/, "").split("/").pop());
  const $ = (id) => document.getElementById(id);
  const STEPS = [["evaluating_baseline", "Baseline"], ["searching", "Search"], ["evaluating_best", "Select best"],
    ["finalizing", "Evidence"], ["completed", "Completed"]];
  const FEED_MAX = 300, FEED_PAGE = 200, BEAT_LOST_S = 16;

  const S = {
    status: "created", phase: "created", active: false, error: null, budget: {}, best: null, baseline: null,
    candidates: new Map(), scored: [], winners: {}, newWins: new Set(), coverage: {}, covered: null, setAside: [], iterations: 0, rejected: 0,
    startedAt: null, lastEventAt: null, lastSeq: 0, serverOffset: 0, lastBeat: null, quietAfter: 30, ended: false,
    program: null, stopReason: null, evidenceLoaded: false, feedOffset: 0, feedBusy: false, feedAgain: false,
    method: "gepa", mipro: Mipro.state(), concurrency: null, rateLimit: null, steer: Steer.state(),
  };
  let stream = null, dirty = false, failedPhase = null;

  // ---- state ----------------------------------------------------------------------------

  function candidate(id) {
    if (!S.candidates.has(id)) S.candidates.set(id, { id, parents: [], origin: "seed", order: S.candidates.size, mean: null });
    return S.candidates.get(id);
  }

  function activity(ts, ...parts) {
    const list = $("activity"), item = el("li", {}, el("span", { class: "t" }, clock(ts)), el("span", {}, ...parts));
    list.prepend(item);
    while (list.children.length > 120) list.lastChild.remove();
    return item;
  }

  function apply(ev) {
    const d = ev.data || {};
    S.lastSeq = Math.max(S.lastSeq, ev.seq);
    S.startedAt = S.startedAt ?? ev.ts;
    S.lastEventAt = ev.ts;
    switch (ev.type) {
      case "phase":
        if (d.phase !== S.phase) activity(ev.ts, "phase ", chip(d.phase));
        S.phase = d.phase;
        if (d.phase === "completed") S.status = "completed";
        if (d.phase === "failed") { S.status = "failed"; S.error = d.error || S.error; failedPhase = failedPhase || "searching"; }
        else failedPhase = d.phase;
        break;
      case "status":
        S.status = { started: "running", resumed: "running", interrupted: "running" }[d.status] || d.status;
        activity(ev.ts, `run ${d.status}`, d.status === "interrupted" ? " (service stopped; it resumes on restart)" : "");
        break;
      case "program":
        S.program = d;
        $("program-id").textContent = d.program_id;
        S.budget.limit = (d.budget || {}).max_metric_calls ?? S.budget.limit;
        activity(ev.ts, `program ${d.program_id}: ${d.seeds.train} train / ${d.seeds.val} val / ${d.seeds.holdout} holdout seeds`);
        break;
      case "trials":
        Object.assign(S.budget, d.budget || {});
        scheduleFeed();
        break;
      case "scored": {
        const c = candidate(d.candidate_id);
        c.mean = d.mean;
        c.best = d.best_seed;
        if (!S.baseline) S.baseline = { candidate_id: d.candidate_id, mean: d.mean };
        if (d.mean !== null && d.mean !== undefined) {
          S.scored.push({ t: ev.ts, mean: d.mean, id: d.candidate_id });
          if (!S.best || d.mean > S.best.mean) S.best = { candidate_id: d.candidate_id, mean: d.mean };
        }
        activity(ev.ts, cid(d.candidate_id), ` scored ${fmt(d.mean)} on train`);
        break;
      }
      case "candidate": {
        const c = candidate(d.candidate_id);
        Object.assign(c, { parents: d.parents || [], origin: d.origin, rationale: d.rationale, iteration: d.iteration });
        activity(ev.ts, `${d.origin === "mipro" ? "trial" : "iteration"} ${d.iteration}: new ${d.origin} `, cid(d.candidate_id), d.rationale ? ` — ${d.rationale.slice(0, 140)}` : "");
        break;
      }
      case "gate":
        candidate(d.candidate_id).gate = d;
        activity(ev.ts, cid(d.candidate_id), ` minibatch ${fmt(d.parent_score, 2)} → ${fmt(d.child_score, 2)}: `,
          d.accepted ? "accepted, scoring on full train" : "rejected");
        break;
      case "frontier": {
        const before = S.winners, fresh = new Set();
        for (const [seed, list] of Object.entries(d.winners || {})) {
          for (const c of list) if (!(before[seed] || []).includes(c)) fresh.add(`${seed}|${c}`);
        }
        S.winners = d.winners || {};
        S.newWins = Object.keys(before).length ? fresh : new Set();
        S.coverage = d.coverage || {};
        S.covered = d.covered === undefined ? null : [d.covered, d.seeds];  // older runs: no count
        if (d.best) S.best = d.best;
        break;
      }
      case "seed_set_aside":
        S.setAside.push(d);
        activity(ev.ts, `seed ${d.seed} set aside: it failed for ${(d.candidates || []).length} different candidates; not asked again, never scored`);
        break;
      case "concurrency":
        if (S.concurrency && d.limit !== S.concurrency.limit) activity(ev.ts, `rollouts in flight: limit ${d.limit} of ${d.max}`);
        S.concurrency = d;
        break;
      case "warning":
        activity(ev.ts, `warning: ${d.message}`);
        if (d.rate_limit) S.rateLimit = d.rate_limit.cleared ? null : Object.assign({ at: ev.ts }, d.rate_limit);
        break;
      case "iteration": S.iterations += 1; break;
      case "proposal_rejected":
        S.rejected += 1;
        activity(ev.ts, `iteration ${d.iteration}: proposal rejected (${d.reason})`);
        break;
      case "skipped": activity(ev.ts, `iteration ${d.iteration}: skipped, ${d.reason}`); break;
      case "search_stopped": S.stopReason = d.reason; activity(ev.ts, `search stopped: ${d.reason}`); break;
      case "settled": activity(ev.ts, `winner settled (${d.candidate_id}): ${d.reason}`); break;
      case "mipro_setup":
      case "trial": {
        const line = Mipro.fold(S.mipro, ev);
        if (line) activity(ev.ts, ...line);
        break;
      }
      case "action":  // a person's: the time, what, and where it came from
        activity(ev.ts, ...Steer.fold(S.steer, d)).classList.add("action", `action-${d.action}`);
        break;
      case "promotion": activity(ev.ts, d.promoted ? "best candidate promoted" : "best candidate not promoted", ` (lift ${fmt(d.lift)})`); break;
      default: break;
    }
    touch();
  }

  // ---- rendering --------------------------------------------------------------------------

  function touch() {
    if (dirty) return;
    dirty = true;
    (document.hidden ? (f) => setTimeout(f, 200) : requestAnimationFrame)(render);
  }

  /** A MIPRO run by its config, or by its events (a run created before configs named the method). */
  function isMipro() { return S.method === "mipro" || S.mipro.trials.size > 0 || S.mipro.setup !== null; }

  function serverNow() { return Date.now() / 1000 - S.serverOffset; }

  function render() {
    dirty = false;
    $("phase").replaceWith(Object.assign(chip(S.phase, "big"), { id: "phase" }));
    const status = Object.assign(chip(S.status), { id: "status", title: "run status" });
    status.hidden = S.status === S.phase || (S.status === "running" && S.phase !== "created" && S.phase !== "failed");
    $("status").replaceWith(status);
    const at = STEPS.findIndex(([p]) => p === (S.phase === "failed" ? failedPhase : S.phase));
    $("steps").replaceChildren(...STEPS.map(([, label], i) => el("div", {
      class: "step " + (S.phase === "failed" && i === at ? "fail" : i < at || S.phase === "completed" ? "done" : i === at ? "now" : ""),
    }, label)));
    const b = S.budget;
    $("paid").textContent = b.paid ?? 0;
    $("limit").textContent = b.limit ?? "∞";
    $("paid-bar").style.width = b.limit ? Math.min(100, (100 * (b.paid || 0)) / b.limit) + "%" : "0%";
    $("cached").textContent = b.cached ?? 0;
    $("errors").textContent = b.errors ?? 0;
    $("retries").textContent = b.retries ?? 0;
    renderLimits();
    $("cost").textContent = "$" + Number(b.cost_usd || 0).toFixed(4);
    $("cost-foot").textContent = `student $${Number(b.student_cost_usd || 0).toFixed(4)} · proposer $${Number(b.proposer_cost_usd || 0).toFixed(4)}`;
    $("best").replaceChildren(S.best ? document.createTextNode(fmt(S.best.mean)) : "–");
    $("best-foot").replaceChildren("baseline ", fmt(S.baseline && S.baseline.mean), S.best ? " · " : "", S.best ? cid(S.best.candidate_id) : "");
    $("ncand").textContent = S.candidates.size;
    const mipro = isMipro();
    $("cand-foot").textContent = mipro ? `${S.mipro.trials.size} trials` : `${S.iterations} iterations · ${S.rejected} proposals rejected`;
    // Coverage: train seeds some candidate solved (a seed everyone scored 0 on is nobody's win).
    const members = Object.entries(S.coverage).sort((a, b) => b[1] - a[1]);
    $("coverage").replaceChildren(...(S.covered
      ? [`${S.covered[0]}/${S.covered[1]}`, " ", el("small", {}, "covered")]
      : [String(members.length || 1), " ", el("small", {}, members.length > 1 ? "candidates" : "candidate")]));
    $("coverage-foot").replaceChildren(...(members.length
      ? [`${members.length} on the frontier · `, cid(members[0][0], members[0][0].slice(0, 8)), ` wins ${pct(members[0][1])} of the train seeds`]
      : [S.covered ? "no candidate solved a train seed yet" : "the baseline alone, until a child is scored on train"]));
    $("frontier-aside").textContent = S.stopReason ? `search stopped: ${S.stopReason}` : "which candidate wins which train seed";
    const aside = $("set-aside");
    aside.hidden = !S.setAside.length;
    aside.replaceChildren(...(S.setAside.length ? [
      el("b", {}, `Set aside (${S.setAside.length}): `),
      ...S.setAside.map((n, i) => el("span", { class: "seed", title: n.error }, (i ? ", " : "") + n.seed)),
      " — each failed for 2 different candidates; not asked again, never scored (hover for the last error)"] : []));
    Widgets.chart($("chart"), Object.assign({}, S, { now: S.ended || S.status !== "running" ? S.lastEventAt : serverNow() }));
    Widgets.frontier($("frontier"), S);
    Widgets.candidates(document.querySelector("#candidates tbody"), S, { open: Steer.openCandidate, select: Steer.toggle });
    Steer.render(S);
    $("method").hidden = false;
    $("method").textContent = mipro ? "MIPRO" : "GEPA";
    $("method").title = mipro ? "method: MIPRO (instruction and demo set search over Optuna trials)" : "method: GEPA (reflective prompt evolution)";
    $("mipro").hidden = !mipro;
    $("feed-title").textContent = mipro ? "Rollouts" : "Trials";  // on a MIPRO page "Trials" are the Optuna trials
    if (mipro) Mipro.render($, S.mipro);
    $("start").hidden = !(["created", "failed", "cancelled"].includes(S.status) || (S.status === "running" && !S.active && S.lastBeat));
    $("start").textContent = S.status === "created" ? "Start run" : "Resume run";
    $("cancel").hidden = !S.active;
    const problem = $("problem");
    problem.hidden = !(S.status === "failed" && S.error);
    problem.textContent = S.error ? `Run failed: ${S.error}` : "";
    if (S.phase === "completed" && !S.evidenceLoaded) loadEvidence();
    tick();
  }

  /** The adaptive concurrency limit under the budget, and a banner while a rate limit holds. */
  function renderLimits() {
    const c = S.concurrency, foot = $("concurrency");
    foot.hidden = !c;
    if (c) {
      const cuts = (c.endpoints || []).reduce((n, e) => n + (e.cuts || 0), 0);
      foot.textContent = `in flight at once: limit ${c.limit} of ${c.max}` +
        (c.limit < c.max ? ` (cut by 429/503 answers${cuts ? `; ${cuts} cuts so far` : ""})` : "");
    }
    const r = S.rateLimit, banner = $("ratelimit");
    banner.hidden = !r || S.ended || S.status !== "running";
    if (!r) return;
    const waited = r.waited_s + Math.max(0, serverNow() - r.at);
    banner.textContent = `Waiting on the container's rate limit: ${r.url} has answered only 429 for ${ago(waited)}` +
      (r.limit ? `; rollouts to it slowed to ${r.limit} at a time` : "") +
      `. Rollouts keep waiting up to ${r.wait_s} s (--rate-limit-wait) before they fail.`;
  }

  function tick() {
    const live = $("live-text"), dot = $("live-dot"), quiet = $("quiet");
    const since = S.lastEventAt ? serverNow() - S.lastEventAt : null;
    const lost = !S.ended && S.lastBeat !== null &&
      ((Date.now() - S.lastBeat) / 1000 > BEAT_LOST_S || (stream !== null && stream.readyState === EventSource.CLOSED));
    if (S.ended) { dot.className = "dot idle"; live.textContent = `finished · last event ${clock(S.lastEventAt || 0)}`; }
    else if (lost) { dot.className = "dot off"; live.textContent = "connection lost, reconnecting"; }
    else { dot.className = S.lastBeat ? "dot on" : "dot idle"; live.textContent = since === null ? "live · no events yet" : `live · last runner event ${ago(since)} ago`; }
    const running = S.status === "running" && !S.ended;
    if (lost) {
      quiet.hidden = false;
      quiet.textContent = `Lost the connection to the service ${ago((Date.now() - S.lastBeat) / 1000)} ago; reconnecting. Is gepa-runtime serve still running?`;
    } else if (running && since !== null && since > S.quietAfter) {
      quiet.hidden = false;
      quiet.textContent = S.active
        ? `No news from the runner for ${ago(since)}: it may be waiting on slow rollouts or on the reflection model. Check the container and model logs if this persists.`
        : `No news from the runner for ${ago(since)}, and this service is not executing the run (another process runs it, or it was killed). Resume it with "Resume run".`;
    } else quiet.hidden = true;
  }

  // ---- the trials feed (paged from the API, so each row knows its rollout id) -----------------

  function scheduleFeed() {
    if (S.feedBusy) { S.feedAgain = true; return; }
    S.feedBusy = true;
    setTimeout(loadFeed, 150);
  }

  async function loadFeed() {
    try {
      for (;;) {
        const page = await api(`/api/runs/${encodeURIComponent(runId)}/rollouts?offset=${S.feedOffset}&limit=${FEED_PAGE}`);
        const feed = $("feed");
        for (const t of page.rollouts) feed.prepend(trialRow(t, page.rollouts.length < 40));
        while (feed.children.length > FEED_MAX) feed.lastChild.remove();
        S.feedOffset += page.rollouts.length;
        $("trials-aside").textContent = `${page.total} ${isMipro() ? "rollouts" : "trials"} · newest first · click one to open its trace`;
        if (page.rollouts.length < FEED_PAGE) break;
      }
    } catch (err) {
      toast(err.message);
    } finally {
      S.feedBusy = false;
      if (S.feedAgain) { S.feedAgain = false; scheduleFeed(); }
    }
  }

  function trialRow(t, fresh) {
    return el("div", { class: "trial" + (fresh ? " fresh" : ""), "data-rollout": t.rollout_id ?? "", onclick: () => openTrace(t) },
      el("span", { class: "t" }, clock(t.created_at)),
      cid(t.candidate_id),
      el("span", { class: "seed", title: t.seed }, t.seed),
      el("span", {}, score(t.reward, t.status), t.cached ? el("span", { class: "tag", style: "margin-left:4px" }, "cached") : "",
        t.trace_id ? el("span", { class: "tag traceid", title: `trace id ${t.trace_id} (OpenTelemetry, or the agent's own)`, "data-trace-id": t.trace_id }, t.trace_id.slice(0, 8)) : ""),
      el("span", { class: "fb", title: t.feedback || t.error || "" }, t.feedback || t.error || ""));
  }

  async function openTrace(t) {
    if (t.rollout_id === null || t.rollout_id === undefined) { toast("this trial has no stored rollout (it errored before one was recorded)"); return; }
    $("drawer-title").textContent = `Rollout ${t.rollout_id} · ${t.seed}`;
    $("drawer-body").replaceChildren(el("div", { class: "empty" }, "loading…"));
    $("drawer").hidden = false;
    try {
      Widgets.trace($("drawer-body"), await api(`/api/runs/${encodeURIComponent(runId)}/rollouts/${t.rollout_id}`));
    } catch (err) {
      $("drawer-body").replaceChildren(el("div", { class: "banner bad" }, err.message));
    }
  }

  // ---- evidence, actions, stream ---------------------------------------------------------------

  async function loadEvidence() {
    S.evidenceLoaded = true;
    try {
      const packet = await api(`/api/runs/${encodeURIComponent(runId)}/evidence`);
      Widgets.promotion($("promotion-body"), packet);
      $("promotion-aside").textContent = `${packet.rollouts.paid} paid · ${packet.rollouts.cached} cached · ${packet.rollouts.errors} errors · stop: ${packet.stop_reason || "–"}`;
      $("promotion").hidden = false;
      Objectives.render($("objectives"), packet);
      const link = $("evidence-link");
      link.href = withToken(`/api/runs/${encodeURIComponent(runId)}/evidence`);
      link.hidden = false;
    } catch (err) {
      S.evidenceLoaded = false;
      toast(err.message);
    }
  }

  async function act(action) {
    try {
      const view = await api(`/api/runs/${encodeURIComponent(runId)}/${action}`, { method: "POST" });
      S.status = view.status; S.active = view.active; S.error = view.error;
      toast(action === "start" ? "run started" : "run cancelled");
      if (S.ended && view.active) { S.ended = false; openStream(); }
      touch();
    } catch (err) {
      toast(err.message);
    }
  }

  function openStream() {
    if (stream) stream.close();
    stream = new EventSource(withToken(`/api/runs/${encodeURIComponent(runId)}/events${S.lastSeq ? `?after=${S.lastSeq}` : ""}`));
    stream.onmessage = (m) => apply(JSON.parse(m.data));
    stream.addEventListener("heartbeat", (m) => {
      const d = JSON.parse(m.data);
      S.serverOffset = Date.now() / 1000 - d.time;
      S.lastBeat = Date.now();
      S.lastEventAt = d.last_event_at ?? S.lastEventAt;
      S.status = d.status; S.active = d.active; S.quietAfter = d.quiet_after_s;
      touch();
    });
    stream.addEventListener("end", (m) => {
      const d = JSON.parse(m.data);
      stream.close();
      if (d.reason) { setTimeout(openStream, 2000); return; }  // the service is stopping: try again
      S.ended = true; S.status = d.status; S.active = false; S.error = d.error || S.error;
      touch();
    });
    stream.onerror = () => tick();  // EventSource reconnects by itself, sending Last-Event-ID
  }

  async function init() {
    $("run-id").textContent = runId;
    $("crumb-run").textContent = runId;
    document.title = `${runId} - gepa-runtime console`;
    Console.tokenLinks();
    Steer.init({ runId, S, touch, $ });
    $("start").onclick = () => act("start");
    $("cancel").onclick = () => act("cancel");
    $("drawer-close").onclick = () => { $("drawer").hidden = true; };
    $("drawer").onclick = (e) => { if (e.target.id === "drawer") $("drawer").hidden = true; };
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") $("drawer").hidden = true; });
    try {
      const view = await api(`/api/runs/${encodeURIComponent(runId)}`);
      Object.assign(S, { status: view.status, phase: view.phase, active: view.active, error: view.error });
      S.method = view.config.method || "gepa";
      Object.assign(S.budget, view.budget);
      const cfg = view.config;
      const source = (cfg.containers || []).join(", ") || `module ${cfg.module}`;
      $("run-sub").replaceChildren(el("span", { id: "program-id" }, view.program_id || "program not reached yet"),
        ` · ${source} · reflection ${cfg.reflection_model}` + (cfg.task_model ? ` · task ${cfg.task_model}` : "") +
        ` · created ${new Date(view.created_at * 1000).toLocaleString()}`, ...Steer.links(view));
      const total = view.budget.paid + view.budget.cached + view.budget.errors;
      S.feedOffset = Math.max(0, total - FEED_MAX);
      touch();
      openStream();
      scheduleFeed();
      setInterval(() => { tick(); if (S.status === "running" && !S.ended) touch(); }, 1000);
    } catch (err) {
      const problem = $("problem");
      problem.hidden = false;
      problem.textContent = err.status === 404 ? `${err.message}` : `Cannot load the run: ${err.message}`;
    }
  }

  init();
})();
