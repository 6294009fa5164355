// Managed lists beside the rules: every name with where its content comes from, and, for a
// client holding update:network_acls, an editor that replaces a stored list's entries (one a
// line) or deletes them. A list loaded from a file on the server is read-only here, as in the
// API (409).
import { $, el, show, api, can } from "./console.js";
import { showFieldError, loadKeys } from "./keys.js";

let editing = null;

export async function loadLists() {
  const body = $("lists-body");
  $("lists-error").textContent = "";
  const r = await api("GET", "_netacl/v1/managed-lists");
  if (r.status !== 200) {
    body.replaceChildren();
    $("lists-error").textContent = (r.json && r.json.message) || ("Lists unavailable (" + r.status + ").");
    return;
  }
  const rows = (r.json.managed_lists || []).map((list) => {
    const tr = el("tr");
    tr.dataset.name = list.name;
    tr.append(el("td", list.name), el("td", list.source), el("td", list.entries, "entries"),
      el("td", list.rules), el("td", list.updated_at || ""));
    const actions = el("td");
    if (can("update:network_acls") && list.source !== "file") {
      const edit = el("button", "Edit");
      edit.type = "button";
      edit.setAttribute("aria-label", "Edit list: " + list.name);
      edit.addEventListener("click", () => openList(list.name));
      actions.append(edit);
    }
    tr.append(actions);
    return tr;
  });
  body.replaceChildren(...rows);
}

async function openList(name) {
  const r = await api("GET", "_netacl/v1/managed-lists/" + encodeURIComponent(name));
  const form = $("list-form");
  if (r.status !== 200) {
    $("lists-error").textContent = (r.json && r.json.message) || ("List unavailable (" + r.status + ").");
    return;
  }
  editing = name;
  for (const p of form.querySelectorAll(".field-error, .form-error")) p.textContent = "";
  $("list-title").textContent = "Entries of " + name;
  $("l-items").value = (r.json.items || []).join("\n");
  form.hidden = false;
  $("l-items").focus();
}

function closeList() {
  editing = null;
  $("list-form").hidden = true;
}

// `items[3]` in a message names the 4th non-empty line: say so.
function withLine(json) {
  if (!json || !json.message) return json;
  const m = /items\[(\d+)\]/.exec(json.message);
  return m ? { ...json, message: json.message + " (line " + (Number(m[1]) + 1) + " of the non-empty lines)" } : json;
}

async function saveList(event) {
  event.preventDefault();
  if (!editing) return;
  const items = $("l-items").value.split("\n").map((s) => s.trim()).filter((s) => s !== "");
  const r = await api("PUT", "_netacl/v1/managed-lists/" + encodeURIComponent(editing), { items });
  if (r.status === 200) {
    $("lists-note").textContent = "List " + editing + " saved: " + items.length + " entries.";
    closeList();
    loadLists();
  } else {
    showFieldError($("list-form"), withLine(r.json), "The list was not saved (" + r.status + ").");
  }
}

async function deleteList() {
  if (!editing) return;
  const button = $("l-delete");
  if (button.dataset.armed !== "1") {
    button.dataset.armed = "1";
    button.textContent = "Confirm delete";
    return;
  }
  button.dataset.armed = "";
  button.textContent = "Delete entries";
  const r = await api("DELETE", "_netacl/v1/managed-lists/" + encodeURIComponent(editing));
  if (r.status === 204 || r.status === 200) {
    $("lists-note").textContent = "List " + editing + " deleted.";
    closeList();
    loadLists();
  } else {
    showFieldError($("list-form"), r.json, "The list was not deleted (" + r.status + ").");
  }
}

function wire() {
  $("nav-keys").addEventListener("click", () => {
    closeList();
    show("keys");
    loadKeys();
    loadLists();
  });
  $("list-form").addEventListener("submit", saveList);
  $("l-cancel").addEventListener("click", closeList);
  $("l-delete").addEventListener("click", deleteList);
}

wire();
