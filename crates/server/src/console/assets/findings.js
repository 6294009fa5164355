// The analysis findings next to the rules they concern: after every load of the rules the live
// rule set is analysed (POST _netacl/v1/network-acls/analyze) in the background, so the table is
// drawn first and decorated when the answer comes. Each finding is shown on its rule's row, its
// `by` rules as buttons that jump to them; undecided rules are marked as such. The findings of a
// save (the Netacl-Findings header) are shown in the editor. Everything is written as text.
"use strict";

import { state, $, el, api, renderRules, rowDecorators, showRule } from "./console.js";

const KIND = { shadowed: "shadowed by", redundant: "redundant with", conflict: "conflicts with" };

// The answer for the rules as last loaded: rule id -> findings, rule id -> undecided reasons.
const analysis = { byRule: new Map(), undecided: new Map() };
let asked = 0;

function ruleName(id) {
  const rule = state.rules.find((r) => r.id === id);
  if (!rule) return id;
  return "priority " + rule.priority + (rule.description ? ": " + rule.description : " (" + id + ")");
}

function ruleLink(id) {
  const b = el("button", ruleName(id), "link");
  b.type = "button";
  b.dataset.jump = id;
  b.title = id;
  b.setAttribute("aria-label", "Go to rule " + ruleName(id));
  b.addEventListener("click", () => showRule(id)); // narrows the filter when it is not drawn
  return b;
}

function decorate(rule, tr) {
  const td = el("td", null, "findings");
  for (const f of analysis.byRule.get(rule.id) || []) {
    const p = el("p", null, "finding finding-" + f.kind);
    p.append(el("strong", f.by && f.by.length ? KIND[f.kind] || f.kind : f.kind));
    (f.by || []).forEach((id, i) => {
      p.append(i ? ", " : " ");
      p.append(ruleLink(id));
    });
    if (f.detail) p.append(el("span", f.detail, "detail"));
    td.append(p);
  }
  for (const reason of analysis.undecided.get(rule.id) || []) {
    const p = el("p", null, "finding finding-undecided");
    p.append(el("strong", "undecided"), el("span", reason, "detail"));
    td.append(p);
  }
  if (td.childElementCount) tr.classList.add("has-finding");
  tr.append(td);
}

// Runs the analysis of the live rules; only the newest call's answer is drawn.
async function analyze() {
  const seq = ++asked;
  const note = $("analysis-note");
  const count = state.rules.length;
  const hadAny = analysis.byRule.size > 0 || analysis.undecided.size > 0;
  analysis.byRule = new Map();
  analysis.undecided = new Map();
  if (!count) {
    note.textContent = "";
    if (hadAny) renderRules();
    return;
  }
  note.textContent = "Analysing the " + count + " rules…";
  const r = await api("POST", "_netacl/v1/network-acls/analyze", {});
  if (seq !== asked) return; // the rules were loaded again meanwhile: that call's answer counts
  if (r.status === 200 && r.json) {
    const findings = r.json.findings || [];
    const undecided = r.json.undecided || [];
    for (const f of findings) {
      if (!analysis.byRule.has(f.rule_id)) analysis.byRule.set(f.rule_id, []);
      analysis.byRule.get(f.rule_id).push(f);
    }
    for (const u of undecided) {
      if (!analysis.undecided.has(u.rule_id)) analysis.undecided.set(u.rule_id, []);
      analysis.undecided.get(u.rule_id).push(u.reason);
    }
    note.textContent = "Analysis of the active rules: " +
      (findings.length ? findings.length + " finding" + (findings.length > 1 ? "s" : "") : "no findings") +
      (undecided.length ? ", " + undecided.length + " undecided" : "") + ".";
  } else if (r.status === 400 && r.json && r.json.errorCode === "too_many_rules") {
    // Not an error: the API analyses rule sets up to its bound only.
    note.textContent = "The analysis is not available for a rule set of this size (" + count + " rules). " +
      (r.json.message || "");
  } else {
    note.textContent = "The analysis is not available: " +
      ((r.json && r.json.message) || "status " + r.status) + ".";
  }
  if (hadAny || analysis.byRule.size || analysis.undecided.size) renderRules();
}

// The findings of a save, from its Netacl-Findings header, shown in the editor.
function saved(event) {
  const box = $("editor-findings");
  const findings = event.detail && event.detail.findings;
  if (!findings) { box.hidden = true; box.replaceChildren(); return; }
  const list = el("ul");
  for (const part of findings.split("; ")) list.append(el("li", part));
  box.replaceChildren(el("p", "Saved. The analysis of the rule set after this write found:"), list);
  box.hidden = false;
}

function editorOpened() {
  const box = $("editor-findings");
  box.hidden = true;
  box.replaceChildren();
}

function install() {
  const head = document.querySelector("#rules-table thead tr");
  const active = [...head.children].find((th) => th.textContent === "Active");
  const th = el("th", "Findings");
  th.scope = "col";
  head.insertBefore(th, active);
  rowDecorators.push(decorate);
  document.addEventListener("console:rules-loaded", analyze);
  document.addEventListener("console:saved", saved);
  document.addEventListener("console:editor-opened", editorOpened);
  // Rules loaded before this module ran: draw the column and analyse them now.
  if (state.rules.length) { renderRules(); analyze(); }
}

install();
