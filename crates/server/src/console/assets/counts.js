// Per-rule traffic in the rules table: matched / evaluated over the last hour and a sparkline of
// both in twelve 5-minute buckets (evaluated as pale bars, the matches over them) (GET /_netacl/v1/network-acls/counts, the edges'
// acls_summary events). Built with DOM APIs only (an inline SVG, no library, no markup strings).
import { state, el, api, renderRules, rowDecorators } from "./console.js";

const SVG = "http://www.w3.org/2000/svg";
const counts = { byRule: new Map(), answer: null, loading: null };

// The latest counts answer (for the overview), loaded again at most every 10 s.
export async function loadCounts(force) {
  if (counts.loading) return counts.loading;
  if (!force && counts.answer && Date.now() - counts.loadedAt < 10000) return counts.answer;
  counts.loading = (async () => {
    const r = await api("GET", "_netacl/v1/network-acls/counts?minutes=60");
    counts.loading = null;
    if (r.status !== 200) return null;
    counts.answer = r.json;
    counts.loadedAt = Date.now();
    counts.byRule = new Map((r.json.network_acls || []).map((c) => [c.rule_id, c]));
    return r.json;
  })();
  return counts.loading;
}

// A sparkline of `series` (counts, oldest first): one bar per bucket, scaled to the largest;
// with `behind` (a series as long), its bars are drawn first, paler (class "behind"), and the
// scale is the largest of both.
export function sparkline(series, label, behind) {
  const width = 60, height = 16, gap = 1;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const max = Math.max(1, ...series, ...(behind || []));
  const bar = width / series.length;
  const bars = (values, cls) => values.forEach((n, i) => {
    const h = n > 0 ? Math.max(1, Math.round((n / max) * height)) : 0;
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("x", String(i * bar));
    rect.setAttribute("y", String(height - h));
    rect.setAttribute("width", String(Math.max(1, bar - gap)));
    rect.setAttribute("height", String(h));
    rect.setAttribute("class", cls);
    svg.append(rect);
  });
  const base = document.createElementNS(SVG, "line"); // the window's extent, also when quiet
  base.setAttribute("x1", "0");
  base.setAttribute("x2", String(width));
  base.setAttribute("y1", String(height - 0.5));
  base.setAttribute("y2", String(height - 0.5));
  base.setAttribute("class", "base");
  svg.append(base);
  if (behind) bars(behind, "behind");
  bars(series, "front");
  return svg;
}

function decorate(rule, tr) {
  const td = el("td", null, "traffic");
  const c = counts.byRule.get(rule.id);
  if (!c || (c.matched === 0 && c.evaluated === 0)) {
    td.append(el("span", counts.answer ? "no traffic reported" : "", "muted"));
  } else {
    const figures = el("span", c.matched + " / " + c.evaluated, "counts");
    figures.title = c.matched + " matched of " + c.evaluated + " evaluated in the last hour";
    td.append(figures, sparkline(c.matched_series,
      "per 5 minutes, last hour: matched " + c.matched_series.join(", ") +
      "; evaluated " + c.evaluated_series.join(", "), c.evaluated_series));
  }
  tr.append(td);
}

function addColumn() {
  const active = [...document.querySelectorAll("#rules-table thead th")]
    .find((th) => th.textContent === "Active");
  const th = el("th", "Matched / evaluated (1 h)");
  th.scope = "col";
  th.id = "traffic-head";
  active.before(th);
}

addColumn();
rowDecorators.push(decorate);
document.addEventListener("console:rules-loaded", async () => {
  if (await loadCounts(false)) renderRules();
});
// Rules drawn before this module was loaded get their counts now.
if (state.rules.length) loadCounts(false).then((c) => c && renderRules());
