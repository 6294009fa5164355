// netacl console. No framework, no dependency, no inline code (the page's CSP forbids it).
// Everything a rule author or a request controls is written with textContent, never as markup.
"use strict";

const SIGNALS = [
  ["ipv4_cidrs", "IPv4 CIDRs"], ["ipv6_cidrs", "IPv6 CIDRs"],
  ["connecting_ipv4_cidrs", "Connecting IPv4 CIDRs"], ["connecting_ipv6_cidrs", "Connecting IPv6 CIDRs"],
  ["asns", "ASNs"], ["geo_country_codes", "Countries"], ["geo_subdivision_codes", "Subdivisions"],
  ["ja3_fingerprints", "JA3"], ["ja4_fingerprints", "JA4"], ["user_agents", "User agents"],
  ["hostnames", "Hostnames"],
];
const ROW_LIMIT = 500;

// Shared with the console's other modules (each view in its own file imports what it needs).
export const state = { csrf: null, scopes: [], rules: [], version: null, editing: null, decision: null };
export const $ = (id) => document.getElementById(id);

export function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// Shows the views `ids` (sections of <main>) and hides every other one.
export function show(...ids) {
  for (const section of document.querySelectorAll("main > section")) {
    section.hidden = !ids.includes(section.id);
  }
  const signedIn = !ids.includes("signin");
  $("nav").hidden = !signedIn;
  $("who").hidden = !signedIn;
}

export async function call(method, url, body) {
  const headers = { "Accept": "application/json" };
  if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let json = null;
  const text = await response.text();
  if (text) { try { json = JSON.parse(text); } catch (_) { json = { message: text }; } }
  if (response.status === 401 && url.startsWith("/console/api/")) {
    signedOut("Your session has ended: sign in again.");
  }
  return { status: response.status, json, headers: response.headers };
}

export const api = (method, path, body) => call(method, "/console/api/" + path, body);
export const can = (scope) => state.scopes.includes(scope);

// Extension points for the other modules: functions `(rule, tr)` that append cells to a rule's
// row (after "Signals", before "Active"; the module adds the matching <th> to the table head
// once), and the events "console:signed-in" (detail: the session) and "console:rules-loaded"
// (after every load of the rules, `state.rules` in evaluation order), "console:editor-opened"
// (detail: the rule, or null for a new one) and "console:saved" (detail: {rule, findings}, the
// written record and its Netacl-Findings header or null) on `document`.
export const rowDecorators = [];

function signedIn(info) {
  state.csrf = info.csrf_token;
  state.scopes = info.scopes || [];
  $("who").textContent = "Signed in as " + info.client_id +
    (can("update:network_acls") || can("create:network_acls") ? "" : " (read only)");
  $("new-rule").hidden = !can("create:network_acls");
  show("rules");
  $("rule-filter").focus(); // keyboard users start in the rules view, at its filter
  document.dispatchEvent(new CustomEvent("console:signed-in", { detail: info }));
  loadRules();
}

function signedOut(message) {
  state.csrf = null;
  state.scopes = [];
  state.rules = [];
  $("rules-body").replaceChildren();
  $("rules-note").textContent = "";
  $("signin-error").textContent = message || "";
  show("signin");
  $("client_id").focus();
}

async function signIn(event) {
  event.preventDefault();
  const body = { client_id: $("client_id").value, client_secret: $("client_secret").value };
  const r = await call("POST", "/console/session", body);
  $("client_secret").value = "";
  if (r.status === 201) { $("signin-error").textContent = ""; signedIn(r.json); }
  else $("signin-error").textContent = (r.json && (r.json.error_description || r.json.message)) || "Sign-in failed.";
}

async function signOut() {
  await call("DELETE", "/console/session");
  signedOut("Signed out.");
}

// ---- rules ----

export async function loadRules() {
  const r = await api("GET", "_netacl/v1/network-acls/watch?timeout_ms=0");
  if (r.status !== 200) {
    $("rules-error").textContent = (r.json && r.json.message) || ("Could not load the rules (" + r.status + ").");
    return;
  }
  $("rules-error").textContent = "";
  state.version = r.json.version;
  state.rules = (r.json.network_acls || []).slice().sort((a, b) =>
    a.priority - b.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  $("rules-version").textContent = "version " + state.version;
  renderRules();
  performance.clearMarks("console:rules-drawn"); // one mark: the latest drawing (timed by the tests)
  performance.mark("console:rules-drawn");
  document.dispatchEvent(new CustomEvent("console:rules-loaded"));
}

export function actionOf(rule) {
  const a = (rule.rule && rule.rule.action) || {};
  for (const k of ["block", "allow", "log", "redirect"]) if (a[k]) return k;
  return "?";
}

function signalsOf(rule) {
  const parts = [];
  for (const kind of ["match", "not_match"]) {
    const c = rule.rule && rule.rule[kind];
    if (!c) continue;
    for (const [key, value] of Object.entries(c)) {
      const n = Array.isArray(value) ? value.length : 1;
      parts.push((kind === "not_match" ? "not " : "") + key + " (" + n + ")");
    }
  }
  if (rule.rule && rule.rule.match_all) parts.push("match_all");
  return parts.join(", ");
}

function matches(rule, needle) {
  if (!needle) return true;
  const hay = [rule.id, rule.description, actionOf(rule), rule.rule && rule.rule.scope,
    JSON.stringify((rule.rule && rule.rule.match) || {}), JSON.stringify((rule.rule && rule.rule.not_match) || {})]
    .join(" ").toLowerCase();
  return hay.includes(needle);
}

// The control of the table that has the focus, as (row id, selector), so that a redrawn table
// (after a toggle, a load, the analysis' answer) gives the focus back to the same control.
function focusedControl() {
  const active = document.activeElement;
  const tr = active && active.closest && active.closest("#rules-body tr");
  if (!tr) return null;
  if (active === tr) return { id: tr.dataset.id, selector: null };
  if (active.dataset.control) return { id: tr.dataset.id, selector: '[data-control="' + active.dataset.control + '"]' };
  if (active.dataset.jump) return { id: tr.dataset.id, selector: '[data-jump="' + CSS.escape(active.dataset.jump) + '"]' };
  return null;
}

function rowOf(id) {
  return [...document.querySelectorAll("#rules-body tr")].find((tr) => tr.dataset.id === id) || null;
}

// Shows the row of rule `id` and gives it the focus: narrows the filter to the rule when it is
// not among the drawn rows. Returns the row (null when there is no such rule).
export function showRule(id) {
  let tr = rowOf(id);
  if (!tr && state.rules.some((r) => r.id === id)) {
    $("rule-filter").value = id;
    renderRules();
    tr = rowOf(id);
  }
  if (!tr) return null;
  for (const old of document.querySelectorAll("#rules-body tr.jumped")) old.classList.remove("jumped");
  tr.classList.add("jumped");
  tr.tabIndex = -1;
  tr.scrollIntoView({ block: "center" });
  tr.focus({ preventScroll: true });
  return tr;
}

export function renderRules() {
  const focus = focusedControl();
  const needle = $("rule-filter").value.trim().toLowerCase();
  const shown = state.rules.filter((r) => matches(r, needle));
  const body = $("rules-body");
  const rows = [];
  const d = state.decision;
  for (const rule of shown.slice(0, ROW_LIMIT)) {
    const tr = el("tr");
    tr.dataset.id = rule.id;
    if (d && d.rule_id === rule.id) tr.classList.add("deciding");
    if (d && (d.monitored || []).includes(rule.id)) tr.classList.add("monitored");
    tr.append(el("td", rule.priority), el("td", rule.description), el("td", actionOf(rule)),
      el("td", rule.rule && rule.rule.scope), el("td", signalsOf(rule)));
    for (const decorate of rowDecorators) decorate(rule, tr);
    const activeCell = el("td");
    const box = el("input");
    box.type = "checkbox";
    box.checked = !!rule.active;
    box.disabled = !can("update:network_acls");
    box.setAttribute("aria-label", "Active: " + rule.description);
    box.dataset.control = "active";
    box.addEventListener("change", () => toggle(rule, box));
    activeCell.append(box);
    const editCell = el("td");
    if (can("update:network_acls")) {
      const edit = el("button", "Edit");
      edit.type = "button";
      edit.setAttribute("aria-label", "Edit: " + rule.description);
      edit.dataset.control = "edit";
      edit.addEventListener("click", () => openEditor(rule));
      editCell.append(edit);
    }
    tr.append(activeCell, editCell);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  if (focus) {
    const tr = rowOf(focus.id);
    const target = tr && (focus.selector ? tr.querySelector(focus.selector) : tr);
    if (target) {
      if (target === tr) { tr.tabIndex = -1; tr.classList.add("jumped"); }
      target.focus({ preventScroll: true });
    }
  }
  $("rules-count").textContent = shown.length + " of " + state.rules.length + " rules";
  $("rules-more").textContent = shown.length > ROW_LIMIT
    ? "The first " + ROW_LIMIT + " are shown: refine the filter to see the others." : "";
}

async function toggle(rule, box) {
  const r = await api("PATCH", "api/v2/network-acls/" + encodeURIComponent(rule.id), { active: box.checked });
  if (r.status === 200) {
    rule.active = box.checked;
    $("rules-error").textContent = "";
    loadRules();
  } else {
    box.checked = !box.checked;
    $("rules-error").textContent = (r.json && r.json.message) || ("Not changed (" + r.status + ").");
  }
}

// ---- editor ----

function buildSignalFields() {
  for (const kind of ["match", "not_match"]) {
    const grid = document.querySelector('.signals[data-kind="' + kind + '"]');
    for (const [key, label] of SIGNALS) {
      const id = "f-" + kind + "-" + key;
      const l = el("label", label);
      l.htmlFor = id;
      const wrap = el("div");
      const input = el("textarea");
      input.id = id;
      input.rows = 1;
      input.dataset.path = "rule." + kind + "." + key;
      wrap.append(input, fieldError("rule." + kind + "." + key));
      grid.append(l, wrap);
    }
  }
}

function fieldError(path) {
  const p = el("p", "", "field-error");
  p.dataset.for = path;
  return p;
}

export function clearErrors() {
  for (const p of document.querySelectorAll(".field-error")) p.textContent = "";
  for (const i of document.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  $("editor-error").textContent = "";
}

export function openEditor(rule) {
  state.editing = rule || null;
  clearErrors();
  $("rules-note").textContent = "";
  $("editor-title").textContent = rule ? "Edit rule " + rule.id : "New rule";
  const r = (rule && rule.rule) || {};
  $("f-description").value = rule ? rule.description : "";
  $("f-priority").value = rule ? rule.priority : "";
  $("f-active").checked = rule ? !!rule.active : true;
  $("f-action").value = rule ? actionOf(rule) : "block";
  $("f-redirect_uri").value = (r.action && r.action.redirect_uri) || "";
  $("f-scope").value = r.scope || "tenant";
  for (const kind of ["match", "not_match"]) {
    for (const [key] of SIGNALS) {
      const values = (r[kind] && r[kind][key]) || [];
      $("f-" + kind + "-" + key).value = values.join("\n");
    }
  }
  // An existing rule: saved as a replace (PUT) or an update of the changed fields (PATCH),
  // and deleted (two steps) by a client holding delete:network_acls.
  $("write-mode").hidden = !rule;
  $("f-mode-replace").checked = true;
  $("preview-delete").hidden = !rule;
  $("delete-rule").hidden = !rule || !can("delete:network_acls");
  disarmDelete();
  show("editor");
  document.dispatchEvent(new CustomEvent("console:editor-opened", { detail: rule || null }));
  $("f-description").focus();
}

// Leaves the editor for the rules, the focus on the row of the rule that was open (or on
// "New rule"), so that the keyboard goes on where it was.
export function closeEditor() {
  const id = state.editing && state.editing.id;
  state.editing = null;
  show("rules");
  if (!(id && showRule(id))) focusNewRule();
}

function focusNewRule() {
  if (!$("new-rule").hidden) $("new-rule").focus(); else $("rule-filter").focus();
}

function splitValues(text, numeric) {
  return text.split(/[\n,]/).map((s) => s.trim()).filter((s) => s !== "")
    .map((s) => (numeric && /^[0-9]+$/.test(s) ? Number(s) : s));
}

export function ruleBody() {
  const action = $("f-action").value;
  const rule = { action: { [action]: true }, scope: $("f-scope").value };
  if (action === "redirect") rule.action.redirect_uri = $("f-redirect_uri").value;
  const keep = state.editing && state.editing.rule ? state.editing.rule : {};
  for (const kind of ["match", "not_match"]) {
    const c = {};
    for (const [key] of SIGNALS) {
      const values = splitValues($("f-" + kind + "-" + key).value, key === "asns");
      if (values.length) c[key] = values;
    }
    // Members the form does not edit (managed lists, signatures) are kept as they were.
    for (const key of ["auth0_managed", "http_message_signature"]) {
      if (keep[kind] && keep[kind][key] !== undefined) c[key] = keep[kind][key];
    }
    if (Object.keys(c).length) rule[kind] = c;
  }
  if (keep.match_all !== undefined) rule.match_all = keep.match_all;
  const priority = $("f-priority").value.trim();
  return {
    description: $("f-description").value,
    active: $("f-active").checked,
    priority: /^-?[0-9]+$/.test(priority) ? Number(priority) : priority,
    rule,
  };
}

// "Payload validation error: '...' on property rule.match.ipv4_cidrs[0]." -> the field whose
// data-path is the longest prefix of the property path (after `prefix`, e.g. the preview's
// "changes[0].network_acl."). False when no field is named (the message goes to the editor's
// banner).
export function showApiError(json, prefix = "") {
  const message = (json && json.message) || "The rule was not saved.";
  const m = /on property ([^ ]+?)\.?$/.exec(message);
  if (m && m[1].startsWith(prefix)) {
    const path = m[1].slice(prefix.length);
    let best = null;
    for (const input of document.querySelectorAll("#rule-form [data-path]")) {
      const p = input.dataset.path;
      if ((path === p || path.startsWith(p + ".") || path.startsWith(p + "[")) &&
          (!best || p.length > best.dataset.path.length)) best = input;
    }
    if (best) {
      best.setAttribute("aria-invalid", "true");
      const slot = document.querySelector('.field-error[data-for="' + best.dataset.path + '"]');
      if (slot) { slot.textContent = message; best.focus(); return true; }
    }
  }
  $("editor-error").textContent = message;
  return false;
}

// Equal as JSON values, whatever the order of the members.
function sameJson(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
}

// How the editor writes: "create" (a new rule), "replace" (PUT, the whole rule) or "update"
// (PATCH, only the fields the form changed).
export function writeMode() {
  if (!state.editing) return "create";
  return $("f-mode-update").checked ? "update" : "replace";
}

// The top-level fields of the form that differ from the rule being edited (a PATCH body).
export function changedFields() {
  const body = ruleBody();
  const changed = {};
  for (const key of ["description", "active", "priority", "rule"]) {
    if (!sameJson(body[key], state.editing[key])) changed[key] = body[key];
  }
  return changed;
}

export const NOTHING_CHANGED = "The form changes no field of the rule: nothing to update.";

async function saveRule(event) {
  event.preventDefault();
  clearErrors();
  const mode = writeMode();
  let r;
  if (mode === "update") {
    const patch = changedFields();
    if (!Object.keys(patch).length) { $("editor-error").textContent = NOTHING_CHANGED; return; }
    r = await api("PATCH", "api/v2/network-acls/" + encodeURIComponent(state.editing.id), patch);
  } else if (mode === "replace") {
    r = await api("PUT", "api/v2/network-acls/" + encodeURIComponent(state.editing.id), ruleBody());
  } else {
    r = await api("POST", "api/v2/network-acls", ruleBody());
  }
  if (r.status === 200 || r.status === 201) {
    // With findings about the written rule the editor stays open on it to show them.
    const findings = r.headers.get("Netacl-Findings");
    state.editing = null;
    const stay = findings && r.json && r.json.id;
    if (stay) openEditor(r.json); else show("rules");
    document.dispatchEvent(new CustomEvent("console:saved", { detail: { rule: r.json, findings } }));
    await loadRules();
    if (!stay && !(r.json && r.json.id && showRule(r.json.id))) focusNewRule();
  } else {
    showApiError(r.json);
  }
}

function disarmDelete() {
  const b = $("delete-rule");
  b.dataset.armed = "";
  b.textContent = "Delete rule";
}

// Two steps: the first press asks, the second deletes.
async function deleteRule() {
  const rule = state.editing;
  if (!rule) return;
  const b = $("delete-rule");
  if (b.dataset.armed !== "1") {
    clearErrors();
    b.dataset.armed = "1";
    b.textContent = "Confirm: delete " + rule.id;
    return;
  }
  disarmDelete();
  const r = await api("DELETE", "api/v2/network-acls/" + encodeURIComponent(rule.id));
  if (r.status === 204) {
    state.editing = null;
    show("rules");
    $("rules-note").textContent = "Deleted rule " + rule.id + " (priority " + rule.priority + ").";
    await loadRules();
    focusNewRule();
  } else {
    $("editor-error").textContent = (r.json && r.json.message) || ("Not deleted (" + r.status + ").");
  }
}

// ---- try a request ----

function tryRequest() {
  const line = $("t-line").value.trim();
  let request = {};
  if (line) request = JSON.parse(line);
  for (const input of document.querySelectorAll("#try-form [data-key]")) {
    const v = input.value.trim();
    if (v !== "") request[input.dataset.key] = input.dataset.key === "asn" && /^[0-9]+$/.test(v) ? Number(v) : v;
  }
  return request;
}

async function decide(event) {
  event.preventDefault();
  $("try-error").textContent = "";
  $("try-result").replaceChildren();
  let request;
  try { request = tryRequest(); } catch (e) {
    $("try-error").textContent = "The request line is not JSON: " + e.message;
    return;
  }
  const r = await api("POST", "_netacl/v1/dry-run", { request });
  const out = $("try-result");
  if (r.status !== 200) {
    out.replaceChildren();
    $("try-error").textContent = (r.json && r.json.message) || ("Not decided (" + r.status + ").");
    return;
  }
  const d = r.json.outcome || {};
  state.decision = d;
  const byId = new Map(state.rules.map((x) => [x.id, x]));
  const name = (id) => (byId.has(id) ? byId.get(id).description + " (" + id + ")" : id);
  // A rule's name, and a button that shows its row (focus on it) in the table below.
  const ruleItem = (id) => {
    const span = el("span", name(id));
    if (byId.has(id)) {
      const go = el("button", "show in the table", "link");
      go.type = "button";
      go.setAttribute("aria-label", "Show rule " + name(id) + " in the table");
      go.addEventListener("click", () => showRule(id));
      span.append(" ", go);
    }
    return span;
  };
  const list = el("dl");
  list.id = "decision";
  list.append(el("dt", "Decision"), el("dd", d.action, "decision-action"));
  const deciding = el("dd", null, "decision-rule");
  deciding.append(d.rule_id ? ruleItem(d.rule_id) : "none (no rule decided)");
  list.append(el("dt", "Deciding rule"), deciding);
  if (d.redirect_uri) list.append(el("dt", "Redirect to"), el("dd", d.redirect_uri));
  const monitored = el("dd", null, "decision-monitored");
  (d.monitored || []).forEach((id, i) => { if (i) monitored.append(", "); monitored.append(ruleItem(id)); });
  if (!(d.monitored || []).length) monitored.append("none");
  list.append(el("dt", "Monitored"), monitored);
  list.append(el("dt", "Rule set version"), el("dd", r.json.version));
  out.replaceChildren(list);
  renderRules();
  // The deciding rule is highlighted in the table: when the filter (or the row limit) hides
  // it, the filter is set to it.
  if (d.rule_id && byId.has(d.rule_id) && !rowOf(d.rule_id)) {
    $("rule-filter").value = d.rule_id;
    renderRules();
    out.append(el("p", "The filter was set to the deciding rule to show it in the table.", "muted"));
  }
}

// ---- wiring ----

function wire() {
  buildSignalFields();
  $("signin-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  $("nav-rules").addEventListener("click", () => { show("rules"); loadRules(); });
  $("nav-try").addEventListener("click", () => { show("try", "rules"); $("t-path").focus(); });
  $("rule-filter").addEventListener("input", renderRules);
  $("new-rule").addEventListener("click", () => openEditor(null));
  $("cancel-rule").addEventListener("click", closeEditor);
  $("delete-rule").addEventListener("click", deleteRule);
  $("rule-form").addEventListener("submit", saveRule);
  $("try-form").addEventListener("submit", decide);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !$("editor").hidden) closeEditor();
  });
}

async function boot() {
  wire();
  const r = await call("GET", "/console/session");
  if (r.status === 200) signedIn(r.json); else signedOut("");
}

boot();
