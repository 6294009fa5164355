// Drives network ACL keys and signed-proxy rules of `netacl serve` with the official Node.js SDK
// (auth0 7.x), unchanged, as an application uses it: one `ManagementClient` built from the
// domain and the client credentials (the SDK gets its own token over https), then
// `client.keys.networkAcls` (list, create, get, delete) and `client.networkAcls` with
// `match.http_message_signature` / `not_match.http_message_signature` (create, get, list,
// update, set). Refusals are checked as the SDK's typed errors carrying the API's message. Every
// answer the SDK received is checked for the key material (base64, base64url and hex): none
// may carry it.
//
// Run by crates/cli/tests/cli/network_acl_keys_node.rs, which starts the real binary with TLS and
// passes NETACL_DOMAIN (localhost:PORT, the tenant domain), NETACL_CLIENT_ID,
// NETACL_CLIENT_SECRET, NETACL_KEY_A and NETACL_KEY_B (the materials, standard base64; 32 and
// 64 bytes) and NODE_EXTRA_CA_CERTS (the test CA). Prints what the SDK put on the wire, then
// "node sdk: network ACL key checks passed"; exits 1 on the first failed check.
"use strict";

const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const { ManagementClient, Management, ManagementError } = require("auth0");

const DOMAIN = process.env.NETACL_DOMAIN;
const MATERIAL_A = process.env.NETACL_KEY_A;
const MATERIAL_B = process.env.NETACL_KEY_B;

// Every request the SDK sent and every answer it got, recorded (the SDK itself is unchanged).
const sent = [];
const answers = [];
async function recordingFetch(url, init) {
  if (init && typeof init.body === "string") {
    sent.push({ method: init.method, url: String(url), body: init.body });
  }
  const response = await fetch(url, init);
  const text = await response.clone().text();
  answers.push({
    what: `${(init && init.method) || "GET"} ${new URL(String(url)).pathname} -> ${response.status}`,
    text: `${JSON.stringify([...response.headers])}\n${text}`,
  });
  return response;
}

/** The forms a key's material could leak in. */
function encodings(base64) {
  const bytes = Buffer.from(base64, "base64");
  return [
    bytes.toString("base64"),
    bytes.toString("base64").replace(/=+$/, ""),
    bytes.toString("base64url"),
    bytes.toString("hex"),
    bytes.toString("hex").toUpperCase(),
  ];
}

async function expectError(status, kind, call, what) {
  try {
    await call();
  } catch (err) {
    assert.ok(err instanceof ManagementError, `${what}: ${err}`);
    assert.equal(err.statusCode, status, `${what}: status (${JSON.stringify(err.body)})`);
    assert.ok(err instanceof kind, `${what}: ${err.constructor.name} is not a ${kind.name}`);
    assert.equal(err.body.statusCode, status, `${what}: body ${JSON.stringify(err.body)}`);
    return err.body;
  }
  assert.fail(`${what}: expected ${status}, the call succeeded`);
}

async function allAcls(client) {
  const out = [];
  let page = await client.networkAcls.list({ per_page: 50 });
  for (;;) {
    out.push(...page.data);
    if (!page.hasNextPage()) return out;
    page = await page.getNextPage();
  }
}

const sha256hex = (base64) =>
  crypto.createHash("sha256").update(Buffer.from(base64, "base64")).digest("hex");

async function main() {
  assert.ok(DOMAIN && MATERIAL_A && MATERIAL_B, "NETACL_DOMAIN, NETACL_KEY_A, NETACL_KEY_B");
  const client = new ManagementClient({
    domain: DOMAIN,
    clientId: process.env.NETACL_CLIENT_ID,
    clientSecret: process.env.NETACL_CLIENT_SECRET,
    maxRetries: 0,
    fetch: recordingFetch,
  });
  const keys = client.keys.networkAcls;
  assert.deepEqual(await keys.list(), { keys: [] }, "no keys at first");

  // create: the record, exactly; the fingerprint is the lowercase hex SHA-256 of the bytes.
  const a = await keys.create({ name: "edge-proxy-a", alg: "hmac-sha256", value: MATERIAL_A });
  assert.deepEqual(
    Object.keys(a).sort(),
    ["alg", "created_at", "fingerprint", "id", "name", "updated_at"],
    `the record's members: ${JSON.stringify(a)}`
  );
  assert.match(a.id, /^nak_[1-9A-HJ-NP-Za-km-z]{22}$/, "id");
  assert.equal(a.name, "edge-proxy-a");
  assert.equal(a.alg, "hmac-sha256");
  assert.equal(a.fingerprint, sha256hex(MATERIAL_A), "fingerprint");
  assert.equal(a.updated_at, a.created_at, "keys are immutable");
  // The 64-byte key sent without its base64 padding.
  const b = await keys.create({
    name: "edge-proxy-b",
    alg: "hmac-sha256",
    value: MATERIAL_B.replace(/=+$/, ""),
  });
  assert.equal(b.fingerprint, sha256hex(MATERIAL_B), "fingerprint of the unpadded key");
  assert.notEqual(a.id, b.id);

  // list (newest first) and get answer the same records.
  assert.deepEqual(await keys.list(), { keys: [b, a] }, "list, newest first");
  assert.deepEqual(await keys.get(a.id), a, "get");

  // Refusals: the SDK's typed errors with the API's message; nothing written.
  let body = await expectError(
    409,
    Management.ConflictError,
    () => keys.create({ name: "edge-proxy-a", alg: "hmac-sha256", value: MATERIAL_B }),
    "a taken name"
  );
  assert.equal(body.error, "Conflict");
  assert.equal(body.errorCode, "conflict");
  assert.equal(body.message, "A network ACL key with this name already exists.");
  body = await expectError(
    400,
    Management.BadRequestError,
    () => keys.create({ name: "sha512", alg: "hmac-sha512", value: MATERIAL_A }),
    "another algorithm"
  );
  assert.match(body.message, /\balg\b/, body.message);
  const short = crypto.randomBytes(16).toString("base64");
  body = await expectError(
    400,
    Management.BadRequestError,
    () => keys.create({ name: "short", alg: "hmac-sha256", value: short }),
    "a 16-byte key"
  );
  assert.match(body.message, /\bvalue\b/, body.message);
  assert.ok(!JSON.stringify(body).includes(short), "the refusal does not quote the value");
  body = await expectError(
    400,
    Management.BadRequestError,
    () => keys.create({ name: "bad", alg: "hmac-sha256", value: "not base64!" }),
    "a value that is not base64"
  );
  assert.match(body.message, /\bvalue\b/, body.message);
  body = await expectError(
    400,
    Management.BadRequestError,
    () => keys.create({ name: "extra", alg: "hmac-sha256", value: MATERIAL_A, kid: "x" }),
    "an unknown member"
  );
  assert.match(body.message, /Additional properties not allowed: kid/, body.message);
  const unknownKey = "nak_1111111111111111111111";
  body = await expectError(404, Management.NotFoundError, () => keys.get(unknownKey), "unknown key");
  assert.equal(body.errorCode, "inexistent_network_acl_key");
  assert.deepEqual(await keys.list(), { keys: [b, a] }, "refused writes change nothing");

  // Rules naming the keys, through client.networkAcls (its create answers nothing: the records
  // are read back from the list).
  await client.networkAcls.create({
    description: "only through the proxy",
    active: true,
    priority: 90,
    rule: {
      action: { block: true },
      scope: "tenant",
      not_match: { http_message_signature: { keys: [{ id: a.id }] } },
    },
  });
  await client.networkAcls.create({
    description: "log what proxy b signed",
    active: true,
    priority: 10,
    rule: {
      action: { log: true },
      scope: "authentication",
      match: { http_message_signature: { keys: [{ id: b.id }] }, ipv4_cidrs: ["192.0.2.0/24"] },
    },
  });
  const listed = await allAcls(client);
  assert.deepEqual(
    listed.map((acl) => acl.priority),
    [10, 90],
    "ascending priority"
  );
  const [logSignedByB, onlyThroughProxy] = listed;
  assert.deepEqual(onlyThroughProxy.rule, {
    action: { block: true },
    scope: "tenant",
    not_match: { http_message_signature: { keys: [{ id: a.id }] } },
  });
  assert.deepEqual(logSignedByB.rule.match, {
    http_message_signature: { keys: [{ id: b.id }] },
    ipv4_cidrs: ["192.0.2.0/24"],
  });
  const got = await client.networkAcls.get(onlyThroughProxy.id);
  assert.deepEqual(got, onlyThroughProxy, "get answers the listed record");

  // update (PATCH: the rule replaced whole) and set (PUT): the references kept as written.
  const updated = await client.networkAcls.update(onlyThroughProxy.id, {
    rule: {
      action: { block: true },
      scope: "tenant",
      not_match: { http_message_signature: { keys: [{ id: a.id }, { id: b.id }] } },
    },
  });
  assert.deepEqual(updated.rule.not_match.http_message_signature.keys, [{ id: a.id }, { id: b.id }]);
  await client.networkAcls.set(logSignedByB.id, {
    description: "allow what proxy b signed",
    active: true,
    priority: 11,
    rule: {
      action: { allow: true },
      scope: "authentication",
      match: { http_message_signature: { keys: [{ id: b.id }] } },
    },
  });
  const replaced = await client.networkAcls.get(logSignedByB.id);
  assert.equal(replaced.priority, 11);
  assert.deepEqual(replaced.rule.match, { http_message_signature: { keys: [{ id: b.id }] } });
  assert.deepEqual(await keys.list(), { keys: [b, a] }, "listing keys leaves the references");
  assert.deepEqual(
    (await client.networkAcls.get(onlyThroughProxy.id)).rule.not_match.http_message_signature,
    { keys: [{ id: a.id }, { id: b.id }] },
    "the references survive key listing and rule replacement"
  );

  // Refused rules: an unknown key id is the SDK's 400 naming the property; nothing written.
  const before = await allAcls(client);
  body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      client.networkAcls.create({
        description: "unknown key",
        active: true,
        priority: 50,
        rule: {
          action: { block: true },
          scope: "tenant",
          not_match: { http_message_signature: { keys: [{ id: unknownKey }] } },
        },
      }),
    "a rule naming an unknown key"
  );
  assert.match(body.message, /rule\.not_match\.http_message_signature\.keys\[0\]\.id/, body.message);
  body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      client.networkAcls.update(logSignedByB.id, {
        rule: {
          action: { allow: true },
          scope: "authentication",
          match: { http_message_signature: { keys: [{ id: b.id }, { id: unknownKey }] } },
        },
      }),
    "an update naming an unknown key"
  );
  assert.match(body.message, /rule\.match\.http_message_signature\.keys\[1\]\.id/, body.message);
  body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      client.networkAcls.set(logSignedByB.id, {
        description: "empty key list",
        active: true,
        priority: 11,
        rule: { action: { allow: true }, scope: "tenant", match: { http_message_signature: { keys: [] } } },
      }),
    "an empty key list"
  );
  assert.match(body.message, /rule\.match\.http_message_signature\.keys/, body.message);
  body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      client.networkAcls.set(logSignedByB.id, {
        description: "the same key twice",
        active: true,
        priority: 11,
        rule: {
          action: { allow: true },
          scope: "tenant",
          match: { http_message_signature: { keys: [{ id: b.id }, { id: b.id }] } },
        },
      }),
    "the same key twice"
  );
  assert.match(body.message, /rule\.match\.http_message_signature\.keys/, body.message);
  assert.deepEqual(await allAcls(client), before, "refused rule writes change nothing");

  // Delete while referenced: the SDK's 409 with the API's message naming the rule; nothing
  // deleted.
  body = await expectError(
    409,
    Management.ConflictError,
    () => keys.delete(a.id),
    "deleting a referenced key"
  );
  assert.equal(body.errorCode, "conflict");
  assert.match(body.message, /referenced by network ACLs/, body.message);
  assert.ok(body.message.includes(onlyThroughProxy.id), body.message);
  assert.deepEqual(await keys.get(a.id), a, "the referenced key is still there");

  // Once no rule names it, the key goes (204), and it is gone.
  await client.networkAcls.update(onlyThroughProxy.id, {
    rule: {
      action: { block: true },
      scope: "tenant",
      not_match: { http_message_signature: { keys: [{ id: b.id }] } },
    },
  });
  await keys.delete(a.id);
  await expectError(404, Management.NotFoundError, () => keys.get(a.id), "deleted key");
  assert.deepEqual(await keys.list(), { keys: [b] }, "one key left");
  // b is named by both rules: deleting one rule is not enough.
  await client.networkAcls.delete(logSignedByB.id);
  await expectError(409, Management.ConflictError, () => keys.delete(b.id), "still named by one rule");
  await client.networkAcls.delete(onlyThroughProxy.id);
  await keys.delete(b.id);
  assert.deepEqual(await keys.list(), { keys: [] }, "all keys deleted");
  assert.deepEqual(await allAcls(client), [], "all rules deleted");

  // What the SDK put on the wire for the new shapes.
  for (const s of sent) {
    const path = new URL(s.url).pathname;
    if (path.endsWith("/keys/network-acls")) {
      const members = Object.keys(JSON.parse(s.body)).join(",");
      console.log(`sdk sent: ${s.method} ${path} {${members}}`);
    } else if (s.body.includes("http_message_signature")) {
      console.log(`sdk sent: ${s.method} ${path} ${JSON.stringify(JSON.parse(s.body).rule)}`);
    }
  }
  assert.ok(
    sent.some((s) => s.body.includes('"http_message_signature":{"keys":[{"id":"nak_')),
    "http_message_signature sent as {keys: [{id}]}"
  );

  // No answer the SDK received (token, keys, rules, errors) carried either key's material.
  assert.ok(answers.length > 30, `${answers.length} answers recorded`);
  for (const material of [MATERIAL_A, MATERIAL_B]) {
    for (const form of encodings(material)) {
      for (const answer of answers) {
        assert.ok(!answer.text.includes(form), `key material in the answer to ${answer.what}`);
      }
    }
  }
  console.log(`${answers.length} answers checked: no key material in any`);
  console.log("node sdk: network ACL key checks passed");
}

main().catch((err) => {
  console.error(`FAIL: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
