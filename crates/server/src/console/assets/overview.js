// The tenant overview: the live policy (GET /_netacl/v1/status), the last hour's traffic (the
// counts endpoint) and the tenant logs (GET /api/v2/logs) with filters and paging.
import { $, el, show, api, can } from "./console.js";
import { loadCounts, sparkline } from "./counts.js";

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
  out.replaceChildren(list, el("h4", "Indexes"), indexes);
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
  const chart = el("p");
  chart.append(sparkline(t.decisions_series, "decisions per 5 minutes, last hour: " + t.decisions_series.join(", ")),
    el("span", " decisions per 5 minutes (" + c.from + " to " + c.to + ")", "muted"));
  out.replaceChildren(list, chart);
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
