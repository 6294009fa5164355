// The tenant overview: the live policy (GET /_netacl/v1/status), the last hour's traffic (the
// counts endpoint: totals and two charts, decisions per second and blocked share for each of its
// twelve 5-minute buckets, with the same figures as a table) and the tenant logs
// (GET /api/v2/logs) with filters and paging. Charts are SVG built with DOM calls.
import { $, el, show, api, can } from "./console.js";
import { loadCounts } from "./counts.js";

const SVG = "http://www.w3.org/2000/svg";

const PER_PAGE = 20;
const logs = { page: 0, total: 0 };

function figure(list, label, value, id) {
  const dd = el("dd", value);
  if (id) dd.id = id;
  list.append(el("dt", label), dd);
}

function percent(share) {
  return share === null || share === undefined ? "no decisions reported"
    : (Math.round(share * 1000) / 10) + " %";
}

async function loadStatus() {
  const out = $("ov-policy");
  const r = await api("GET", "_netacl/v1/status");
  if (r.status !== 200) {
    out.replaceChildren(el("p", (r.json && r.json.message) || ("Status unavailable (" + r.status + ")."), "error"));
    return;
  }
  const p = r.json.policy || {};
  const list = el("dl", null, "figures");
  figure(list, "Policy version", r.json.version, "ov-version");
  figure(list, "Rules (active / total)", (p.active_rules ?? "?") + " / " + (p.rules ?? r.json.network_acls), "ov-rules");
  figure(list, "Compile time", p.compile_micros === undefined ? "?" : (p.compile_micros / 1000).toFixed(2) + " ms", "ov-compile");
  figure(list, "Entries, posting lists", (p.entries ?? "?") + ", " + (p.postings ?? "?"));
  figure(list, "Policy size (approx.)", p.approx_bytes === undefined ? "?" : Math.ceil(p.approx_bytes / 1024) + " KiB");
  const lists = (r.json.managed_lists || []).filter((l) => l.entries > 0)
    .map((l) => l.name + " (" + l.entries + ")").join(", ");
  figure(list, "Managed lists in force", lists || "none");
  const indexes = el("table", null, "indexes");
  const head = el("tr");
  for (const h of ["Index", "Strategy", "Keys", "Intervals", "Bytes"]) {
    const th = el("th", h);
    th.scope = "col";
    head.append(th);
  }
  const body = el("tbody");
  for (const ix of p.indexes || []) {
    const tr = el("tr");
    tr.append(el("td", ix.name), el("td", ix.kind), el("td", ix.keys),
      el("td", ix.intervals ?? ""), el("td", ix.bytes));
    body.append(tr);
  }
  const thead = el("thead");
  thead.append(head);
  indexes.append(thead, body);
  // Most indexes of a small tenant are unused: the table is folded, its summary says how many.
  const used = (p.indexes || []).filter((ix) => ix.kind !== "unused").length;
  const details = el("details");
  details.append(el("summary", "Indexes: " + used + " in use of " + (p.indexes || []).length), indexes);
  out.replaceChildren(list, details);
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

const clock = (date) => date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hour12: false });
const rate = (n) => (n === 0 ? "0" : n < 0.01 ? n.toExponential(1) : n.toFixed(n < 10 ? 3 : 1)) + "/s";

// The window's buckets, oldest first: start time, decisions, decisions per second, blocked,
// blocked share (null without decisions).
function buckets(c) {
  const t = c.totals;
  const from = Date.parse(c.from);
  return t.decisions_series.map((decisions, i) => {
    const blocked = (t.blocked_series || [])[i] || 0;
    return {
      start: new Date(from + i * c.bucket_seconds * 1000), decisions, blocked,
      rate: decisions / c.bucket_seconds,
      share: decisions > 0 ? Math.min(1, blocked / decisions) : null,
    };
  });
}

// One bar chart: a bar per bucket (null: no bar), the scale's top and 0 on the left, the
// window's first and last times below, each bar's figures in its <title>.
function barChart(id, label, values, max, top, tips, c) {
  const width = 420, height = 64, left = 58, below = 16, slot = (width - left) / values.length;
  const root = svg("svg", { id, viewBox: "0 0 " + width + " " + (height + below), width,
    height: height + below, role: "img", "aria-label": label, class: "traffic-chart" });
  root.append(svg("text", { x: left - 6, y: 10, "text-anchor": "end", class: "axis" }, top));
  root.append(svg("text", { x: left - 6, y: height, "text-anchor": "end", class: "axis" }, "0"));
  root.append(svg("line", { x1: left, y1: height + 0.5, x2: width, y2: height + 0.5, class: "base" }));
  values.forEach((v, i) => {
    const h = v === null || max <= 0 ? 0 : Math.max(v > 0 ? 1 : 0, Math.round((v / max) * (height - 4)));
    const bar = svg("rect", { x: left + i * slot + 1, y: height - h, width: Math.max(1, slot - 2), height: h,
      class: v === null ? "bar empty" : "bar" });
    bar.append(svg("title", {}, tips[i]));
    root.append(bar);
  });
  root.append(svg("text", { x: left, y: height + below - 2, class: "axis" }, clock(new Date(c.from))));
  root.append(svg("text", { x: width, y: height + below - 2, "text-anchor": "end", class: "axis" },
    clock(new Date(c.to))));
  return root;
}

function trafficCharts(c) {
  const rows = buckets(c);
  const minutes = Math.round(c.bucket_seconds / 60);
  const tip = (b) => clock(b.start) + ": " + b.decisions + " decisions (" + rate(b.rate) + "), " +
    b.blocked + " blocked" + (b.share === null ? "" : " (" + percent(b.share) + ")");
  const tips = rows.map(tip);
  const maxRate = Math.max(0, ...rows.map((b) => b.rate));
  const wrap = el("div", null, "traffic-charts");
  wrap.append(
    el("h4", "Decisions per second, per " + minutes + " minutes"),
    barChart("ov-chart-rate", "Decisions per second per " + minutes + " minutes: " +
      rows.map((b) => rate(b.rate)).join(", "), rows.map((b) => b.rate), maxRate, rate(maxRate), tips, c),
    el("h4", "Blocked share, per " + minutes + " minutes"),
    barChart("ov-chart-share", "Blocked share per " + minutes + " minutes: " +
      rows.map((b) => (b.share === null ? "no decisions" : percent(b.share))).join(", "),
      rows.map((b) => b.share), 1, "100 %", tips, c));
  // The same figures as a table (for reading them exactly, and for screen readers).
  const details = el("details");
  details.append(el("summary", "The " + rows.length + " buckets as a table"));
  const table = el("table", null, "buckets");
  table.id = "ov-buckets";
  const head = el("tr");
  for (const h of ["From", "Decisions", "Per second", "Blocked", "Blocked share"]) {
    const th = el("th", h);
    th.scope = "col";
    head.append(th);
  }
  const thead = el("thead");
  thead.append(head);
  const body = el("tbody");
  for (const b of rows) {
    const tr = el("tr");
    tr.append(el("td", clock(b.start)), el("td", b.decisions), el("td", rate(b.rate)), el("td", b.blocked),
      el("td", b.share === null ? "—" : percent(b.share)));
    body.append(tr);
  }
  table.append(thead, body);
  details.append(table);
  wrap.append(details);
  return wrap;
}

async function loadTraffic() {
  const out = $("ov-traffic");
  const c = await loadCounts(true);
  if (!c) {
    out.replaceChildren(el("p", "Traffic counts unavailable.", "error"));
    return;
  }
  const t = c.totals;
  const list = el("dl", null, "figures");
  figure(list, "Decisions per second", t.decisions_per_second.toFixed(3), "ov-dps");
  figure(list, "Decisions (last hour)", t.decisions, "ov-decisions");
  figure(list, "Blocked share", percent(t.blocked_share), "ov-blocked");
  figure(list, "Blocked", t.blocked);
  out.replaceChildren(list, trafficCharts(c),
    el("p", "From the edges' reports between " + c.from + " and " + c.to + ".", "muted"));
}

// The filters as the `q` of GET /api/v2/logs (type, client id, date range, joined by AND).
function logQuery() {
  const terms = [];
  const type = $("log-type").value;
  if (type) terms.push("type:" + type);
  const client = $("log-client").value.trim();
  if (client) terms.push("client_id:\"" + client.replace(/["\\]/g, "\\$&") + "\"");
  const iso = (v) => (v ? new Date(v).toISOString() : "*");
  const from = $("log-from").value, to = $("log-to").value;
  if (from || to) terms.push("date:[" + iso(from) + " TO " + iso(to) + "]");
  return terms.join(" AND ");
}

async function loadLogs() {
  const table = $("log-body");
  $("log-error").textContent = "";
  if (!can("read:logs")) {
    table.replaceChildren();
    $("log-error").textContent = "Reading the logs needs the read:logs scope.";
    return;
  }
  const q = logQuery();
  let path = "api/v2/logs?include_totals=true&per_page=" + PER_PAGE + "&page=" + logs.page;
  if (q) path += "&q=" + encodeURIComponent(q);
  const r = await api("GET", path);
  if (r.status !== 200) {
    table.replaceChildren();
    $("log-error").textContent = (r.json && r.json.message) || ("Logs unavailable (" + r.status + ").");
    return;
  }
  logs.total = r.json.total;
  const rows = (r.json.logs || []).map((e) => {
    const tr = el("tr");
    tr.dataset.type = e.type;
    const details = el("td");
    if (e.details) {
      const d = el("details");
      d.append(el("summary", "details"), el("pre", JSON.stringify(e.details, null, 2)));
      details.append(d);
    }
    tr.append(el("td", e.date), el("td", e.type, "log-type"), el("td", e.description),
      el("td", e.client_id || ""), details);
    return tr;
  });
  table.replaceChildren(...rows);
  const first = logs.total === 0 ? 0 : logs.page * PER_PAGE + 1;
  $("log-page").textContent = first + "–" + (logs.page * PER_PAGE + rows.length) + " of " + logs.total;
  $("log-prev").disabled = logs.page === 0;
  $("log-next").disabled = (logs.page + 1) * PER_PAGE >= logs.total;
}

export async function openOverview() {
  show("overview");
  await Promise.all([loadStatus(), loadTraffic(), loadLogs()]);
}

function wire() {
  $("nav-overview").addEventListener("click", openOverview);
  $("log-filter").addEventListener("submit", (e) => { e.preventDefault(); logs.page = 0; loadLogs(); });
  $("log-prev").addEventListener("click", () => { logs.page = Math.max(0, logs.page - 1); loadLogs(); });
  $("log-next").addEventListener("click", () => { logs.page += 1; loadLogs(); });
  $("ov-refresh").addEventListener("click", openOverview);
}

wire();
