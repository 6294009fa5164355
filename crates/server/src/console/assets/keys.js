// Network ACL keys beside the rules: list, create, rotate (a new key, then the old one deleted
// once no rule names it), delete. The material is write-only: the page sends it once, in the
// create request, clears the field as soon as the API has answered, and never shows, stores or
// logs it; the API answers only the fingerprint.
import { $, el, state, api, can } from "./console.js";

// The API's message, at the field its property path names (`... on property value.`).
export function showFieldError(form, json, fallback) {
  for (const p of form.querySelectorAll(".field-error")) p.textContent = "";
  for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  const message = (json && json.message) || fallback;
  const m = /on property ([^ ]+?)\.?(?:\s|$)/.exec(message);
  const path = m ? m[1].replace(/\[\d+\]$/, "") : null;
  const input = path && form.querySelector('[data-path="' + path + '"]');
  const slot = path && form.querySelector('.field-error[data-for="' + path + '"]');
  if (input && slot) {
    input.setAttribute("aria-invalid", "true");
    slot.textContent = message;
    input.focus();
  } else {
    form.querySelector(".form-error").textContent = message;
  }
}

function clearFieldErrors(form) {
  for (const p of form.querySelectorAll(".field-error, .form-error")) p.textContent = "";
  for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
}

// 32 random bytes, standard base64: a fresh HMAC-SHA256 key.
function generate() {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text);
}

function rulesNaming(keyId) {
  return state.rules.filter((r) => ["match", "not_match"].some((kind) => {
    const sig = r.rule && r.rule[kind] && r.rule[kind].http_message_signature;
    return sig && (sig.keys || []).some((k) => k.id === keyId);
  }));
}

export async function loadKeys() {
  const body = $("keys-body");
  $("keys-error").textContent = "";
  $("key-form").hidden = !can("create:network_acl_keys");
  if (!can("read:network_acl_keys")) {
    body.replaceChildren();
    $("keys-error").textContent = "Listing keys needs the read:network_acl_keys scope.";
    return;
  }
  const r = await api("GET", "api/v2/keys/network-acls");
  if (r.status !== 200) {
    body.replaceChildren();
    $("keys-error").textContent = (r.json && r.json.message) || ("Keys unavailable (" + r.status + ").");
    return;
  }
  const rows = (r.json.keys || []).map((key) => {
    const tr = el("tr");
    tr.dataset.id = key.id;
    const naming = rulesNaming(key.id);
    tr.append(el("td", key.name), el("td", key.id), el("td", key.fingerprint, "mono"),
      el("td", key.created_at), el("td", naming.length ? naming.map((x) => x.description).join(", ") : "none"));
    const actions = el("td");
    if (can("create:network_acl_keys")) {
      const rotate = el("button", "Rotate");
      rotate.type = "button";
      rotate.setAttribute("aria-label", "Rotate: " + key.name);
      rotate.addEventListener("click", () => {
        $("k-name").value = key.name + "-next";
        $("k-value").value = generate();
        $("key-note").textContent = "Rotating " + key.name + ": create the new key, name both in " +
          "the rules (" + (naming.length || "no") + " name it now), move the proxy to the new one, " +
          "then remove the old id from the rules and delete the old key.";
        $("k-name").focus();
      });
      actions.append(rotate);
    }
    if (can("delete:network_acl_keys")) {
      const del = el("button", "Delete");
      del.type = "button";
      del.className = "danger";
      del.setAttribute("aria-label", "Delete: " + key.name);
      del.addEventListener("click", () => deleteKey(key, del));
      actions.append(del);
    }
    tr.append(actions);
    return tr;
  });
  body.replaceChildren(...rows);
  $("keys-count").textContent = rows.length + (rows.length === 1 ? " key" : " keys");
}

// Two steps: the first click asks, the second deletes.
async function deleteKey(key, button) {
  if (button.dataset.armed !== "1") {
    button.dataset.armed = "1";
    button.textContent = "Confirm delete";
    return;
  }
  const r = await api("DELETE", "api/v2/keys/network-acls/" + encodeURIComponent(key.id));
  if (r.status === 204) {
    $("key-note").textContent = "Key " + key.name + " deleted.";
    loadKeys();
  } else {
    button.dataset.armed = "";
    button.textContent = "Delete";
    $("keys-error").textContent = (r.json && r.json.message) || ("Not deleted (" + r.status + ").");
  }
}

async function createKey(event) {
  event.preventDefault();
  const form = $("key-form");
  clearFieldErrors(form);
  const body = { name: $("k-name").value, alg: "hmac-sha256", value: $("k-value").value };
  const r = await api("POST", "api/v2/keys/network-acls", body);
  body.value = "";
  if (r.status === 201) {
    // The material leaves the page: only the fingerprint the API answered is shown.
    $("k-value").value = "";
    $("k-name").value = "";
    $("key-note").textContent = "Key " + r.json.name + " created (" + r.json.id + "), fingerprint " +
      r.json.fingerprint + ". Its material is not shown again.";
    loadKeys();
  } else {
    showFieldError(form, r.json, "The key was not created (" + r.status + ").");
  }
}

function wire() {
  $("key-form").addEventListener("submit", createKey);
  $("k-generate").addEventListener("click", () => { $("k-value").value = generate(); });
}

wire();
