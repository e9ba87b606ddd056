// The operator page of a Troupe admin listener: it polls the management
// API every second and draws what it answers. No library and no build
// step (see internal/adminui/doc.go). Everything is built with DOM calls
// and text nodes, never from HTML strings: member addresses and type
// names come from the cluster.
"use strict";

(function () {
  const refreshMs = 1000;
  const timeoutMs = 5000;
  // Relative, so that the page works behind a proxy that mounts the
  // listener under a path.
  const api = "api/v1/";
  const svgNS = "http://www.w3.org/2000/svg";
  const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f"];

  const byId = (id) => document.getElementById(id);

  // el builds an element: attrs become attributes (data-* included),
  // children strings become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const c of children) {
      if (c !== null && c !== undefined) {
        e.append(c instanceof Node ? c : String(c));
      }
    }
    return e;
  }

  function svgEl(tag, attrs) {
    const e = document.createElementNS(svgNS, tag);
    setAttrs(e, attrs);
    return e;
  }

  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined && v !== false) {
        e.setAttribute(k, v === true ? "" : String(v));
      }
    }
  }

  // APIError is a failed request: status 0 when there was no answer.
  class APIError extends Error {
    constructor(status, code, message, hosts) {
      super(message);
      this.status = status;
      this.code = code;
      this.hosts = hosts || [];
    }
  }

  // get fetches path under the API and returns its JSON, or throws an
  // APIError that says what went wrong in words.
  async function get(path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    try {
      let resp;
      try {
        resp = await fetch(api + path, {
          credentials: "same-origin",
          cache: "no-store",
          headers: { Accept: "application/json" },
          signal: ctl.signal,
        });
      } catch (e) {
        throw new APIError(0, "unreachable", ctl.signal.aborted
          ? "no answer within " + timeoutMs / 1000 + " s"
          : "the admin listener cannot be reached");
      }
      let body = null;
      try {
        body = await resp.json();
      } catch (e) {
        // Not JSON: said below.
      }
      if (!resp.ok) {
        const e = (body && body.error) || {};
        throw new APIError(resp.status, e.code || "http_" + resp.status, e.message || resp.statusText || "failed", e.hosts);
      }
      if (body === null) {
        throw new APIError(resp.status, "bad_response", "the answer is not JSON");
      }
      return body;
    } finally {
      clearTimeout(timer);
    }
  }

  function describe(err) {
    if (err instanceof APIError) {
      return err.status ? err.message + " (" + err.status + " " + err.code + ")" : err.message;
    }
    return String(err && err.message ? err.message : err);
  }

  const pad = (n) => String(n).padStart(2, "0");
  // clock is HH:MM:SS in the browser's time zone, whatever its locale.
  const clock = (d) => pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());

  function duration(seconds) {
    let s = Math.floor(seconds);
    const h = Math.floor(s / 3600);
    s -= h * 3600;
    const m = Math.floor(s / 60);
    s -= m * 60;
    return (h ? h + "h " + pad(m) + "m " : m ? m + "m " : "") + pad(s) + "s";
  }

  const percent = (r) => (r * 100).toFixed(1) + "%";

  // --- Freshness -------------------------------------------------------

  let lastGood = null; // when the page last drew a complete refresh

  function markFresh() {
    lastGood = new Date();
    const f = byId("freshness");
    f.dataset.state = "fresh";
    f.dataset.since = "";
    f.textContent = "Updated " + clock(lastGood) + ", every " + refreshMs / 1000 + " s";
    document.body.dataset.stale = "false";
  }

  // markStale keeps what the page shows and says since when it is old.
  function markStale(err) {
    const f = byId("freshness");
    if (lastGood === null) {
      f.dataset.state = "error";
      f.textContent = "No data yet: " + describe(err) + ". Retrying every " + refreshMs / 1000 + " s.";
      return;
    }
    f.dataset.state = "stale";
    f.dataset.since = lastGood.toISOString();
    f.textContent = "Stale since " + clock(lastGood) + ": " + describe(err) + ". Retrying every " + refreshMs / 1000 + " s.";
    document.body.dataset.stale = "true";
  }

  // --- Drawing ---------------------------------------------------------

  function drawSummary(status) {
    const m = status.member;
    byId("self-address").textContent = m.address || "(standalone)";
    document.title = "Troupe " + (m.address || "standalone");
    byId("mode").textContent = status.mode;
    const ready = byId("ready");
    ready.dataset.ready = String(status.readiness.ready);
    ready.textContent = status.readiness.ready ? "ready" : "not ready";
    byId("incarnation").textContent = m.incarnation || "–";
    byId("uptime").textContent = duration(m.uptime_seconds);
    byId("build").textContent = m.build_version + " (" + m.go_version + ")";
    byId("placement-version").textContent = status.placement_version || "– (joining)";
    const counts = Object.entries(status.cluster.members_by_status)
      .filter(([, n]) => n > 0)
      .map(([st, n]) => n + " " + st);
    byId("by-status").textContent = counts.length ? counts.join(", ") : "–";
    byId("checks").replaceChildren(...status.readiness.checks.map((c) =>
      el("li", { "data-check": c.name, "data-ok": String(c.ok), class: c.ok ? "ok" : "failing" },
        (c.ok ? "✓ " : "✗ ") + c.name + (c.reason ? ": " + c.reason : ""))));
  }

  // colours gives each member address a colour, the same in every ring.
  function colours(members) {
    const m = new Map();
    members.forEach((mem, i) => m.set(mem.address, palette[i % palette.length]));
    return m;
  }

  function drawMembers(status, members, placement, types) {
    const shares = new Map(); // address -> [{type, ratio}]
    for (const t of placement.types) {
      for (const rm of t.members) {
        if (!shares.has(rm.address)) {
          shares.set(rm.address, []);
        }
        shares.get(rm.address).push({ type: t.name, ratio: rm.share_ratio });
      }
    }
    let activations = 0;
    let queued = 0;
    for (const t of types.types) {
      activations += t.activations;
      queued += t.queued_messages;
    }
    const elsewhere = "reported by that member's own admin listener";
    const rows = members.members.map((m) => {
      const mine = shares.get(m.address) || [];
      const share = mine.length
        ? mine.map((s) => s.type + " " + percent(s.ratio)).join(", ")
        : "–";
      const self = m.self;
      return el("tr", { "data-member": m.address, "data-status": m.status, "data-incarnation": m.incarnation, "data-self": self },
        el("td", { class: "address" }, m.address, self ? el("span", { class: "tag" }, "this member") : null),
        el("td", {}, el("span", { class: "status status-" + m.status, "data-field": "status" }, m.status)),
        el("td", { class: "num" }, m.incarnation),
        el("td", {}, m.actor_types.join(", ") || "–"),
        el("td", { "data-field": "share" }, share),
        el("td", { "data-field": "ready", title: self ? null : elsewhere },
          self ? (status.readiness.ready ? "ready" : "not ready") : "–"),
        el("td", { class: "num", "data-field": "activations", title: self ? null : elsewhere }, self ? activations : "–"),
        el("td", { class: "num", "data-field": "queued", title: self ? null : elsewhere }, self ? queued : "–"));
    });
    if (rows.length === 0) {
      rows.push(el("tr", {}, el("td", { colspan: 8, class: "note" },
        status.mode === "standalone" ? "A standalone system: no cluster members." : "No members.")));
    }
    byId("members-body").replaceChildren(...rows);
    const more = byId("members-more");
    more.hidden = !members.next;
    more.textContent = members.next ? "Showing " + members.members.length + " of " + members.total + " members." : "";
  }

  // --- Node records ----------------------------------------------------

  let recordsGood = null; // when the records were last drawn

  const seconds = (ms) => (ms / 1000).toFixed(1) + " s";

  function drawRecords(rr) {
    const derived = "derived by this member from its membership view: the member's own counters are on its own admin listener";
    const rows = rr.records.map((r) => {
      const own = r.source !== "membership"; // published by its process: counters and version are its own
      const health = r.health === r.reported_health ? r.health : r.health + " (says " + r.reported_health + ")";
      const labels = Object.keys(r.labels || {}).sort().map((k) => k + "=" + r.labels[k]).join(", ");
      const counter = (field, v) => el("td", { class: "num", "data-field": field, title: own ? null : derived }, own ? v : "–");
      return el("tr", { "data-record": r.node, "data-role": r.role, "data-health": r.health, "data-ready": String(r.ready),
        "data-source": r.source, "data-self": r.self },
      el("td", { class: "address" }, r.node, r.self ? el("span", { class: "tag" }, "this member") : null),
      el("td", { "data-field": "role" }, r.role),
      el("td", { "data-field": "health" }, el("span", { class: "health-" + r.health }, health)),
      el("td", { "data-field": "ready" }, r.ready ? "ready" : "not ready"),
      el("td", { class: "num", "data-field": "age", title: "heartbeat " + seq(r) }, seconds(r.heartbeat_age_ms)),
      counter("messages", r.counters.messages),
      counter("errors", r.counters.errors),
      counter("activations", r.counters.activations),
      counter("bytes", r.counters.bytes),
      el("td", { "data-field": "labels" }, labels || "–"),
      el("td", { "data-field": "version" }, r.build_version || "–"));
    });
    if (rows.length === 0) {
      rows.push(el("tr", {}, el("td", { colspan: 11, class: "note" }, "No records.")));
    }
    byId("records-body").replaceChildren(...rows);
  }

  const seq = (r) => "#" + r.seq + " of incarnation " + r.incarnation;

  function markRecordsFresh(rr) {
    recordsGood = new Date();
    const f = byId("records-freshness");
    f.dataset.state = "fresh";
    f.dataset.since = "";
    f.textContent = (rr.store === "external" ? "From the shared record store" : "From this member's own store (the others' derived from its view)") +
      "; heartbeat every " + seconds(rr.heartbeat_ms) + ", unhealthy after " + seconds(rr.unhealthy_after_ms) + ".";
    byId("records-section").dataset.stale = "false";
  }

  // markRecordsStale keeps the records shown and says since when they
  // are old: the store may fail while the rest of the API answers.
  function markRecordsStale(err) {
    const f = byId("records-freshness");
    if (recordsGood === null) {
      f.dataset.state = "error";
      f.textContent = "No records yet: " + describe(err) + ".";
      return;
    }
    f.dataset.state = "stale";
    f.dataset.since = recordsGood.toISOString();
    f.textContent = "Records stale since " + clock(recordsGood) + ": " + describe(err) + ".";
    byId("records-section").dataset.stale = "true";
  }

  async function refreshRecords() {
    try {
      const rr = await get("records");
      drawRecords(rr);
      markRecordsFresh(rr);
    } catch (err) {
      if (err instanceof APIError && err.status === 404 && err.code === "not_found") {
        const f = byId("records-freshness");
        f.dataset.state = "none";
        f.textContent = "A standalone system publishes no node records.";
        byId("records-body").replaceChildren();
        return;
      }
      markRecordsStale(err);
    }
  }

  // arc is the path of a ring segment from fraction a to fraction b of
  // the circle, between radii inner and outer, centred on (c, c).
  function arc(c, inner, outer, a, b) {
    const at = (r, f) => {
      const t = 2 * Math.PI * f - Math.PI / 2;
      return (c + r * Math.cos(t)).toFixed(2) + " " + (c + r * Math.sin(t)).toFixed(2);
    };
    if (b - a >= 0.9999) { // a whole circle is two half arcs
      return "M " + at(outer, 0) + " A " + outer + " " + outer + " 0 1 1 " + at(outer, 0.5) +
        " A " + outer + " " + outer + " 0 1 1 " + at(outer, 0) +
        " M " + at(inner, 0) + " A " + inner + " " + inner + " 0 1 0 " + at(inner, 0.5) +
        " A " + inner + " " + inner + " 0 1 0 " + at(inner, 0) + " Z";
    }
    const large = b - a > 0.5 ? 1 : 0;
    return "M " + at(outer, a) + " A " + outer + " " + outer + " 0 " + large + " 1 " + at(outer, b) +
      " L " + at(inner, b) + " A " + inner + " " + inner + " 0 " + large + " 0 " + at(inner, a) + " Z";
  }

  function drawRings(status, members, placement) {
    const colour = colours(members.members);
    const figures = placement.types.map((t) => {
      const size = 180;
      const c = size / 2;
      const pic = svgEl("svg", { width: size, height: size, viewBox: "0 0 " + size + " " + size, role: "img", "aria-label": "ring of " + t.name });
      let from = 0;
      for (const m of t.members) {
        if (m.share_ratio <= 0) {
          continue;
        }
        const seg = svgEl("path", {
          d: arc(c, 50, 82, from, Math.min(1, from + m.share_ratio)),
          fill: colour.get(m.address) || "#999",
          class: "arc status-" + m.status,
          "data-member": m.address,
          "data-share": m.share_ratio,
        });
        const tip = svgEl("title");
        tip.textContent = m.address + ": " + percent(m.share_ratio) + " (" + m.status + ")";
        seg.append(tip);
        pic.append(seg);
        from += m.share_ratio;
      }
      const label = svgEl("text", { x: c, y: c, "text-anchor": "middle", "dominant-baseline": "middle", class: "ring-label" });
      label.textContent = t.members.length + (t.members.length === 1 ? " member" : " members");
      pic.append(label);
      const legend = el("ul", { class: "legend" }, ...t.members.map((m) => {
        const swatch = svgEl("svg", { width: 12, height: 12, "aria-hidden": "true" });
        swatch.append(svgEl("rect", { width: 12, height: 12, fill: colour.get(m.address) || "#999" }));
        return el("li", { "data-member": m.address, "data-status": m.status }, swatch,
          " " + m.address + " " + percent(m.share_ratio) + " ", el("span", { class: "status status-" + m.status }, m.status));
      }));
      const about = t.replicas ? t.replicas + (t.replicas === 1 ? " copy" : " copies") + " of each key" : "not hosted here";
      return el("figure", { class: "ring", "data-ring-type": t.name }, pic,
        el("figcaption", {}, el("strong", {}, t.name), " (" + about + ")", legend));
    });
    if (figures.length === 0) {
      figures.push(el("p", { class: "note" },
        status.mode === "standalone" ? "A standalone system places nothing: every key lives here." : "No actor type has a ring yet."));
    }
    byId("rings").replaceChildren(...figures);
  }

  function drawTypes(types) {
    const rows = types.types.map((t) => el("tr", { "data-type": t.name },
      el("td", {}, t.name),
      el("td", { class: "num", "data-field": "activations" }, t.activations),
      el("td", { class: "num", "data-field": "queued" }, t.queued_messages),
      el("td", { class: "num" }, t.replicas),
      el("td", {}, t.pinned ? "yes" : "no"),
      el("td", { class: "num" }, t.ring_members)));
    if (rows.length === 0) {
      rows.push(el("tr", {}, el("td", { colspan: 6, class: "note" }, "This member hosts no actor type.")));
    }
    byId("types-body").replaceChildren(...rows);
  }

  // fillTypeChoice offers every type with a ring and every type hosted
  // here, keeping the choice made; it leaves the list alone while it is
  // the same, so that an open list does not close under the user.
  function fillTypeChoice(placement, types) {
    const names = [...new Set([...placement.types.map((t) => t.name), ...types.types.map((t) => t.name)])].sort();
    const sel = byId("where-type");
    const have = [...sel.options].map((o) => o.value);
    if (have.length === names.length && have.every((n, i) => n === names[i])) {
      return;
    }
    const chosen = sel.value;
    sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    if (names.includes(chosen)) {
      sel.value = chosen;
    }
  }

  // --- Refresh ---------------------------------------------------------

  async function refresh() {
    // The records come from the record store, which can fail on its own:
    // they are drawn, or marked stale, apart from the rest.
    await Promise.all([refreshView(), refreshRecords()]);
    setTimeout(refresh, refreshMs);
  }

  async function refreshView() {
    try {
      // One round of four requests: drawn together or not at all, so
      // that the page never mixes two rounds.
      const [status, members, placement, types] = await Promise.all([
        get("status"), get("members?limit=1000"), get("placement"), get("types"),
      ]);
      drawSummary(status);
      drawMembers(status, members, placement, types);
      drawRings(status, members, placement);
      drawTypes(types);
      fillTypeChoice(placement, types);
      markFresh();
    } catch (err) {
      markStale(err);
    }
  }

  // --- Key lookup ------------------------------------------------------

  let lookups = 0; // numbers the lookups: only the latest one is drawn

  function showWhere(w) {
    const out = byId("where-result");
    out.dataset.state = "ok";
    out.dataset.code = "";
    out.dataset.owner = w.owner;
    const head = w.owner
      ? el("p", {}, "Owner: ", el("strong", { id: "where-owner" }, w.owner))
      : el("p", { id: "where-owner" }, w.placement_version === "standalone"
        ? "Standalone: every key of this type lives here."
        : "No member can serve this key now.");
    const parts = [head];
    if (w.owner_refuses === "no_majority") {
      parts.push(el("p", { class: "failing" }, "The owner refuses it now: it lost the majority of the cluster."));
    }
    if (w.replicas.length) {
      parts.push(el("ol", { id: "where-replicas" }, ...w.replicas.map((r, i) => el("li", { "data-member": r.address, "data-status": r.status },
        r.address + " ", el("span", { class: "status status-" + r.status }, r.status), i === 0 ? " (primary)" : ""))));
    }
    // A lookup is not refreshed: say when it was answered.
    parts.push(el("p", { class: "note" }, "Answered at " + clock(new Date()) +
      (w.key_token ? "; key token " + w.key_token + ", placement version " + w.placement_version : "") + "."));
    out.replaceChildren(...parts);
  }

  function showWhereError(err, type) {
    const out = byId("where-result");
    out.dataset.state = "error";
    out.dataset.code = err.code || "";
    out.dataset.owner = "";
    let text;
    switch (err.code) {
      case "type_not_hosted_here":
        text = "This member does not host “" + type + "”, so it cannot tell how that type places its keys. " +
          (err.hosts.length ? "Ask a member that hosts it: " + err.hosts.join(", ") + "." : "No member that hosts it serves now.");
        break;
      case "unknown_type":
        text = "No member hosts actor type “" + type + "”.";
        break;
      default:
        text = "The lookup failed: " + describe(err) + ".";
    }
    out.replaceChildren(el("p", { class: "error", id: "where-error" }, text));
  }

  async function lookup(ev) {
    ev.preventDefault();
    const type = byId("where-type").value;
    const key = byId("where-key").value;
    const n = ++lookups;
    const out = byId("where-result");
    out.dataset.state = "pending";
    out.replaceChildren(el("p", { class: "note" }, "Looking up…"));
    try {
      const w = await get("placement/where?type=" + encodeURIComponent(type) + "&key=" + encodeURIComponent(key));
      if (n === lookups) {
        showWhere(w);
      }
    } catch (err) {
      if (n === lookups) {
        showWhereError(err, type);
      }
    }
  }

  byId("where-form").addEventListener("submit", lookup);
  refresh();
})();
