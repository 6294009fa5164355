// The history view: the tenant's versions (newest first, paged with `next`), each version's
// changes and its diff against the previous version, and rollback to a version after a
// confirmation that names the version and what it would change. The rollback is conditioned on
// the newest version the operator saw listed (`expected_version`): a stale one (409) is shown as
// such with an offer to reload. Everything a rule author controls is written as text.
"use strict";

import { state, $, el, api, can, show, loadRules } from "./console.js";

const PAGE = 20;
// `seen`: the newest version listed (what a rollback expects); `pending`: the rollback asked for.
const history = { next: null, seen: null, pending: null, byVersion: new Map() };

const canRollBack = () =>
  can("create:network_acls") && can("update:network_acls") && can("delete:network_acls");

function button(text, onClick, cls) {
  const b = el("button", text, cls);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

function errorOf(r, what) {
  return (r.json && r.json.message) || (what + " (" + r.status + ").");
}

async function openHistory() {
  show("history");
  hideConfirm();
  $("rollback-result").replaceChildren();
  $("history-diff").replaceChildren();
  await loadVersions(null);
  $("history-title").focus();
}

async function loadVersions(from) {
  $("history-error").textContent = "";
  const query = "take=" + PAGE + (from === null ? "" : "&from=" + encodeURIComponent(from));
  const r = await api("GET", "_netacl/v1/network-acls/versions?" + query);
  if (r.status !== 200) {
    $("history-error").textContent = errorOf(r, "Could not load the history");
    return;
  }
  const versions = r.json.versions || [];
  if (from === null) {
    $("history-body").replaceChildren();
    history.byVersion.clear();
    history.seen = versions.length ? versions[0].version : state.version;
  }
  const rows = versions.map(versionRow);
  $("history-body").append(...rows);
  if (from === null && !versions.length) {
    const tr = el("tr");
    const td = el("td", "No version is recorded yet.");
    td.colSpan = 6;
    tr.append(td);
    $("history-body").append(tr);
  }
  history.next = r.json.next === undefined ? null : r.json.next;
  $("history-more").hidden = history.next === null;
}

function changeText(c) {
  return c.op + " " + (c.type || "").replace(/_/g, " ") + " " + c.id;
}

function versionRow(entry) {
  history.byVersion.set(entry.version, entry);
  const tr = el("tr");
  tr.dataset.version = entry.version;
  const changes = el("ul", null, "changes");
  for (const c of entry.changes || []) changes.append(el("li", changeText(c)));
  const changesCell = el("td");
  changesCell.append(changes);
  const actions = el("td", null, "actions");
  if (entry.version > 0) {
    const diff = button("Diff", () => showDiff(entry.version), "diff");
    diff.setAttribute("aria-label", "Diff of version " + entry.version + " against " + (entry.version - 1));
    actions.append(diff);
  }
  if (canRollBack() && entry.version !== history.seen) {
    const back = button("Roll back to this version", () => askRollback(entry.version), "rollback");
    back.setAttribute("aria-label", "Roll back to version " + entry.version);
    actions.append(back);
  } else if (entry.version === history.seen) {
    actions.append(el("span", "current", "muted"));
  }
  tr.append(el("td", entry.version), el("td", entry.created_at), el("td", entry.client_id || "—"),
    el("td", entry.request_id || "—", "request-id"), changesCell, actions);
  return tr;
}

function ruleLabel(record) {
  if (!record) return "";
  return record.id + " (priority " + record.priority + ", " + actionName(record) + ")" +
    (record.description ? ": " + record.description : "");
}

function actionName(record) {
  const a = (record.rule && record.rule.action) || {};
  for (const k of ["block", "allow", "log", "redirect"]) if (a[k]) return k;
  return "?";
}

const text = (value) => (value === undefined ? "(absent)" : JSON.stringify(value));

// The diff as text: added and removed records, and for each changed record its changed fields
// with their value before and after.
function drawDiff(diff, labels) {
  const out = el("div", null, "diff");
  const part = (title, records, cls) => {
    if (!records.length) return;
    out.append(el("h4", title));
    const ul = el("ul", null, cls);
    for (const r of records) ul.append(el("li", ruleLabel(r)));
    out.append(ul);
  };
  part(labels.added, diff.added || [], "added");
  part(labels.removed, diff.removed || [], "removed");
  const changed = diff.changed || [];
  if (changed.length) {
    out.append(el("h4", labels.changed));
    for (const c of changed) {
      const box = el("div", null, "changed");
      box.append(el("p", ruleLabel(c.after || c.before)));
      const table = el("table", null, "fields");
      const head = el("tr");
      for (const h of ["Field", labels.before, labels.after]) {
        const th = el("th", h);
        th.scope = "col";
        head.append(th);
      }
      table.append(head);
      for (const field of c.fields || []) {
        const tr = el("tr");
        const before = el("td");
        before.append(el("code", text(c.before && c.before[field]), "before"));
        const after = el("td");
        after.append(el("code", text(c.after && c.after[field]), "after"));
        tr.append(el("td", field), before, after);
        table.append(tr);
      }
      box.append(table);
      out.append(box);
    }
  }
  if (!out.childElementCount) out.append(el("p", labels.none, "muted"));
  return out;
}

async function showDiff(version) {
  const target = $("history-diff");
  target.replaceChildren(el("p", "Loading the diff of version " + version + "…", "muted"));
  const against = version - 1;
  const r = await api("GET", "_netacl/v1/network-acls/versions/" + version + "/diff?against=" + against);
  if (r.status !== 200) {
    target.replaceChildren(el("p", errorOf(r, "No diff") +
      (r.status === 404 ? " (version " + against + " is no longer kept)" : ""), "error"));
    return;
  }
  const entry = history.byVersion.get(version);
  const title = el("h3", "Version " + version + " against version " + against);
  title.tabIndex = -1;
  const others = ((entry && entry.changes) || []).filter((c) => c.type && c.type !== "network_acl");
  const drawn = drawDiff(r.json, {
    added: "Added", removed: "Removed", changed: "Changed", before: "Before", after: "After",
    none: others.length ? "No network ACL changed (" + others.map(changeText).join(", ") + ")."
      : "No network ACL changed.",
  });
  target.replaceChildren(title, drawn);
  title.focus();
}

// ---- rollback ----

// Closes the confirmation; with `refocus`, the focus goes back to the button that opened it.
function hideConfirm(refocus) {
  const pending = history.pending;
  history.pending = null;
  $("rollback-confirm").hidden = true;
  $("rollback-plan").replaceChildren();
  if (refocus && pending) {
    const back = document.querySelector('#history-body tr[data-version="' + pending.version + '"] button.rollback');
    if (back) back.focus();
  }
}

// The confirmation: what rolling back to `version` would do to the version listed as newest.
async function askRollback(version) {
  $("rollback-result").replaceChildren();
  const seen = history.seen;
  const r = await api("GET", "_netacl/v1/network-acls/versions/" + version + "/diff?against=" + seen);
  if (r.status !== 200) {
    $("rollback-result").replaceChildren(el("p", errorOf(r, "Cannot roll back"), "error"));
    return;
  }
  history.pending = { version, expected: seen };
  $("rollback-title").textContent = "Roll back to version " + version + "?";
  const nothing = !(r.json.added || []).length && !(r.json.removed || []).length && !(r.json.changed || []).length;
  const plan = [el("p", "The rule set is at version " + seen + ". Rolling back makes a new version with the " +
    "network ACLs of version " + version + " (keys and managed lists are not rolled back):")];
  if (nothing) plan.push(el("p", "The rules of version " + version + " are the ones in force: nothing would change."));
  else plan.push(drawDiff(r.json, {
    added: "Restored (deleted since)", removed: "Deleted (created since)", changed: "Reverted",
    before: "Now", after: "After the rollback", none: "",
  }));
  $("rollback-plan").replaceChildren(...plan);
  $("rollback-go").textContent = "Roll back to version " + version;
  $("rollback-confirm").hidden = false;
  $("rollback-go").focus();
}

async function rollBack() {
  const pending = history.pending;
  if (!pending) return;
  hideConfirm();
  const out = $("rollback-result");
  out.replaceChildren(el("p", "Rolling back to version " + pending.version + "…", "muted"));
  const r = await api("POST", "_netacl/v1/network-acls/rollback",
    { version: pending.version, expected_version: pending.expected });
  if (r.status === 200) {
    const done = el("p", "Rolled back to version " + pending.version + ": the rule set is now version " +
      r.json.version + ".", "ok");
    done.tabIndex = -1;
    out.replaceChildren(done);
    await loadVersions(null);
    done.focus();
    loadRules();
  } else if (r.status === 409) {
    const p = el("p", "Not rolled back: the rule set changed since you saw version " + pending.expected +
      ". " + errorOf(r, ""), "error stale");
    const reload = button("Reload the history", async () => {
      out.replaceChildren();
      await loadVersions(null);
    }, "reload");
    reload.id = "history-reload";
    out.replaceChildren(p, reload);
    reload.focus();
  } else {
    out.replaceChildren(el("p", "Not rolled back: " + errorOf(r, "refused"), "error"));
  }
}

function install() {
  $("nav-history").addEventListener("click", openHistory);
  $("history-title").tabIndex = -1;
  $("history-more").addEventListener("click", () => {
    if (history.next !== null) loadVersions(history.next);
  });
  $("rollback-go").addEventListener("click", rollBack);
  $("rollback-cancel").addEventListener("click", () => hideConfirm(true));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !$("rollback-confirm").hidden) hideConfirm(true);
  });
}

install();
