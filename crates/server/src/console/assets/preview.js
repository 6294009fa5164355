// The impact preview in the editor: "Preview impact" sends the form as the proposed change Save
// would make (a create for a new rule; for an edited one a replace, or an update of the fields
// the form changed, as "Save and preview as" says) and "Preview deletion" the deletion of the
// edited rule, to POST _netacl/v1/network-acls/preview, with the pasted requests when there are
// some, and draws the answer: how many decisions change, the transitions, the rules that gain and
// lose decisions as a bar chart (SVG built with DOM calls), and the examples. An invalid proposed
// rule shows the API's message at its field.
"use strict";

import {
  state, $, el, api, ruleBody, showApiError, clearErrors, writeMode, changedFields, NOTHING_CHANGED,
} from "./console.js";

const SVG = "http://www.w3.org/2000/svg";
const PREFIX = "changes[0].network_acl.";
const CHART_RULES = 12;

// The pasted requests, one JSON object a line; throws naming the first line that is not one.
function pastedRequests() {
  const requests = [];
  const lines = $("preview-requests").value.split("\n");
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    let value;
    try { value = JSON.parse(line); } catch (e) {
      throw new Error("Line " + (i + 1) + " of the requests is not JSON: " + e.message);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new Error("Line " + (i + 1) + " of the requests is not a JSON object.");
    }
    requests.push(value);
  });
  return requests;
}

function outcomeText(o) {
  if (!o) return "?";
  return (o.action || "?") + (o.redirect_uri ? " to " + o.redirect_uri : "");
}

function ruleName(id) {
  const rule = state.rules.find((r) => r.id === id);
  if (rule) return "priority " + rule.priority + (rule.description ? ": " + rule.description : " (" + id + ")");
  if (state.editing && state.editing.id === id) return "the edited rule";
  return "the new rule";
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// by_rule as horizontal bars: decisions gained (after the change) and lost, per rule.
function chart(byRule) {
  const rows = byRule.slice(0, CHART_RULES);
  const max = Math.max(1, ...rows.map((r) => Math.max(r.gained, r.lost)));
  const labelWidth = 320, barWidth = 260, rowHeight = 30, width = labelWidth + barWidth + 70;
  const height = rows.length * rowHeight;
  const root = svg("svg", { viewBox: "0 0 " + width + " " + height, width, height, role: "img",
    class: "impact-chart" });
  root.append(svg("title", {}, "Decisions gained and lost by rule"));
  rows.forEach((r, i) => {
    const y = i * rowHeight;
    let name = ruleName(r.rule_id);
    if (name.length > 42) name = name.slice(0, 41) + "…";
    const label = svg("text", { x: 0, y: y + 19, class: "label" }, name);
    label.append(svg("title", {}, r.rule_id));
    root.append(label);
    const gained = Math.round((r.gained / max) * barWidth);
    const lost = Math.round((r.lost / max) * barWidth);
    root.append(svg("rect", { x: labelWidth, y: y + 4, width: gained, height: 10, class: "gained" }));
    root.append(svg("text", { x: labelWidth + gained + 4, y: y + 13, class: "value" }, "+" + r.gained));
    root.append(svg("rect", { x: labelWidth, y: y + 16, width: lost, height: 10, class: "lost" }));
    root.append(svg("text", { x: labelWidth + lost + 4, y: y + 25, class: "value" }, "−" + r.lost));
  });
  return root;
}

function draw(answer, what) {
  const out = $("preview-result");
  const parts = [];
  const summary = el("dl", null, "preview-summary");
  summary.id = "preview-summary";
  summary.append(el("dt", "Requests replayed"), el("dd", answer.requests, "preview-requests"),
    el("dt", "Decisions changed"), el("dd", answer.changed, "preview-changed"));
  const title = el("h3", "Impact of " + what);
  title.tabIndex = -1;
  parts.push(title, summary);
  const transitions = answer.transitions || [];
  if (transitions.length) {
    parts.push(el("h4", "Transitions"));
    const ul = el("ul", null, "transitions");
    for (const t of transitions) {
      ul.append(el("li", outcomeText(t.from) + " → " + outcomeText(t.to) + ": " + t.count));
    }
    parts.push(ul);
  }
  const byRule = answer.by_rule || [];
  if (byRule.length) {
    parts.push(el("h4", "By rule"), chart(byRule), el("p",
      "Upper bar: changed decisions the rule makes after the change (gained); lower bar: before (lost).",
      "muted legend"));
    if (byRule.length > CHART_RULES) {
      parts.push(el("p", "The " + CHART_RULES + " busiest of " + byRule.length + " rules are drawn.", "muted"));
    }
  }
  const examples = answer.examples || [];
  if (examples.length) {
    parts.push(el("h4", "Examples"));
    const ul = el("ul", null, "examples");
    for (const x of examples) {
      const li = el("li");
      li.append(el("code", JSON.stringify(x.request)),
        el("span", " " + outcomeText(x.from) + " → " + outcomeText(x.to)));
      ul.append(li);
    }
    parts.push(ul);
  }
  if (!answer.changed) parts.push(el("p", "No decision of these requests would change.", "muted"));
  out.replaceChildren(...parts);
  title.focus({ preventScroll: true });
  title.scrollIntoView({ block: "start" }); // the answer is below the form
}

// The change the form proposes, as Save would send it; null (and said) when there is none.
function proposedChange() {
  const mode = writeMode();
  if (mode === "create") return { op: "create", network_acl: ruleBody() };
  if (mode === "replace") return { op: "replace", id: state.editing.id, network_acl: ruleBody() };
  const changed = changedFields();
  if (!Object.keys(changed).length) {
    $("preview-error").textContent = NOTHING_CHANGED;
    return null;
  }
  return { op: "update", id: state.editing.id, network_acl: changed };
}

const WHAT = {
  create: "this new rule", replace: "this replace", update: "this update", delete: "deleting this rule",
};

async function preview(deletion) {
  clearErrors();
  $("preview-error").textContent = "";
  $("preview-result").replaceChildren();
  const change = deletion ? { op: "delete", id: state.editing.id } : proposedChange();
  if (!change) return;
  const body = { changes: [change] };
  try {
    const requests = pastedRequests();
    if (requests.length) body.requests = requests;
  } catch (e) {
    $("preview-error").textContent = e.message;
    return;
  }
  $("preview-result").replaceChildren(el("p", "Replaying…", "muted"));
  const r = await api("POST", "_netacl/v1/network-acls/preview", body);
  if (r.status === 200 && r.json) {
    draw(r.json, WHAT[change.op]);
    return;
  }
  $("preview-result").replaceChildren();
  const message = (r.json && r.json.message) || "No preview (" + r.status + ").";
  // An invalid proposed rule: the message at the field its path names (prefix stripped).
  if (message.includes("on property " + PREFIX)) {
    if (showApiError(r.json, PREFIX)) return;
    $("editor-error").textContent = ""; // no field for that path: shown below, by the button
  }
  $("preview-error").textContent = message;
}

function install() {
  $("preview-rule").addEventListener("click", () => preview(false));
  $("preview-delete").addEventListener("click", () => preview(true));
  document.addEventListener("console:editor-opened", () => {
    $("preview-error").textContent = "";
    $("preview-result").replaceChildren();
  });
}

install();
