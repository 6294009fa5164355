// Drives `netacl serve` with the official Node.js SDK (auth0 7.x), unchanged: network ACLs
// with `rule.match_all` and `match.auth0_managed` / `not_match.auth0_managed`, as the SDK's
// NetworkAclsClient sends them (it talks to any base URL, plain HTTP included).
//
// Run by crates/cli/tests/cli/serve_node_sdk.rs, which starts the real binary and passes
// NETACL_DOMAIN (host:port, also the tenant domain), NETACL_CLIENT_ID and NETACL_CLIENT_SECRET.
// The token and netacl's own endpoints (managed-list content, dry runs) are plain fetch calls:
// the SDK has no operation for them. Prints every request body the SDK sent, then
// "node sdk: all checks passed"; exits non-zero on the first failed check.
"use strict";

const assert = require("node:assert/strict");
const { Management, ManagementError } = require("auth0");
const { NetworkAclsClient } = require("auth0/networkAcls");
const { LogsClient } = require("auth0/logs");

const DOMAIN = process.env.NETACL_DOMAIN;
const BASE = `http://${DOMAIN}`;

// The SDK's requests, recorded on their way out (the SDK itself is not changed).
const sent = [];
async function recordingFetch(url, init) {
  if (init && init.body) {
    sent.push({ method: init.method, url: String(url), body: JSON.parse(init.body) });
  }
  return fetch(url, init);
}

async function token() {
  const response = await fetch(`${BASE}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      grant_type: "client_credentials",
      client_id: process.env.NETACL_CLIENT_ID,
      client_secret: process.env.NETACL_CLIENT_SECRET,
      audience: `https://${DOMAIN}/api/v2/`,
    }),
  });
  assert.equal(response.status, 200, "token");
  return (await response.json()).access_token;
}

async function netacl(accessToken, method, path, body) {
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function all(acls) {
  const out = [];
  let page = await acls.list({ per_page: 50 });
  for (;;) {
    out.push(...page.data);
    if (!page.hasNextPage()) return out;
    page = await page.getNextPage();
  }
}

async function expectError(status, kind, call, what) {
  try {
    await call();
  } catch (err) {
    assert.ok(err instanceof ManagementError, `${what}: ${err}`);
    assert.equal(err.statusCode, status, `${what}: status`);
    assert.ok(err instanceof kind, `${what}: ${err.constructor.name} is not a ${kind.name}`);
    return err.body;
  }
  assert.fail(`${what}: expected ${status}, the call succeeded`);
}

async function main() {
  const accessToken = await token();
  const acls = new NetworkAclsClient({
    baseUrl: `${BASE}/api/v2`,
    token: accessToken,
    maxRetries: 0,
    fetch: recordingFetch,
  });
  assert.deepEqual(await all(acls), [], "starts empty");

  // create: a deny-all under an allow list, and rules naming managed lists.
  await acls.create({
    description: "node deny all",
    active: true,
    priority: 90,
    rule: { action: { block: true }, scope: "tenant", match_all: true },
  });
  await acls.create({
    description: "node allow relay",
    active: true,
    priority: 10,
    rule: {
      action: { allow: true },
      scope: "authentication",
      match: { auth0_managed: ["auth0.icloud_relay_proxy"] },
    },
  });
  await acls.create({
    description: "node block management off the VPN",
    active: true,
    priority: 20,
    rule: {
      action: { block: true },
      scope: "management",
      not_match: { auth0_managed: ["auth0.vpn"] },
    },
  });
  const listed = await all(acls);
  assert.equal(listed.length, 3, "three records");
  assert.deepEqual(
    listed.map((acl) => acl.priority),
    [10, 20, 90],
    "ascending priority"
  );
  const [relay, offVpn, denyAll] = listed;
  assert.equal(denyAll.rule.match_all, true, "match_all read back");
  assert.equal(denyAll.rule.match, undefined, "no match with match_all");
  assert.deepEqual(relay.rule.match.auth0_managed, ["auth0.icloud_relay_proxy"]);
  assert.deepEqual(offVpn.rule.not_match.auth0_managed, ["auth0.vpn"]);

  // get, set (replace), update (merge)
  const got = await acls.get(denyAll.id);
  assert.equal(got.rule.match_all, true);
  await acls.set(relay.id, {
    description: "node allow relay or proxy",
    active: true,
    priority: 11,
    rule: {
      action: { allow: true },
      scope: "authentication",
      match: { auth0_managed: ["auth0.icloud_relay_proxy", "auth0.proxy"] },
    },
  });
  const replaced = await acls.get(relay.id);
  assert.deepEqual(replaced.rule.match.auth0_managed, [
    "auth0.icloud_relay_proxy",
    "auth0.proxy",
  ]);
  const updated = await acls.update(denyAll.id, {
    rule: { action: { log: true }, scope: "tenant", match_all: true },
  });
  assert.equal(updated.rule.action.log, true);
  assert.equal(updated.rule.match_all, true);
  await acls.update(denyAll.id, {
    rule: { action: { block: true }, scope: "tenant", match_all: true },
  });

  // The lists' content comes from the operator (netacl's endpoint), and decides.
  let answer = await netacl(accessToken, "PUT", "/_netacl/v1/managed-lists/auth0.icloud_relay_proxy", {
    items: ["172.16.0.0/12"],
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  const decide = async (request) =>
    (await netacl(accessToken, "POST", "/_netacl/v1/dry-run", { request })).body.outcome;
  assert.equal((await decide({ client_ip: "172.20.0.1" })).rule_id, relay.id, "relay allowed");
  assert.equal((await decide({ client_ip: "192.0.2.1" })).rule_id, denyAll.id, "the rest denied");
  assert.equal(
    (await decide({ path: "/api/v2/users", client_ip: "172.20.0.1" })).rule_id,
    offVpn.id,
    "management off the (unconfigured) VPN list is blocked"
  );

  // Refused bodies: 400 with the property path, nothing written.
  const before = await all(acls);
  let body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      acls.create({
        description: "both",
        active: true,
        priority: 30,
        rule: {
          action: { block: true },
          scope: "tenant",
          match_all: true,
          match: { asns: [1] },
        },
      }),
    "match_all with match"
  );
  assert.match(body.message, /match_all cannot be combined with match/);
  body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      acls.create({
        description: "unknown list",
        active: true,
        priority: 31,
        rule: { action: { block: true }, scope: "tenant", match: { auth0_managed: ["auth0.botnet"] } },
      }),
    "unknown list name"
  );
  assert.match(body.message, /rule\.match\.auth0_managed\[0\]/);
  body = await expectError(
    400,
    Management.BadRequestError,
    () =>
      acls.create({
        description: "false",
        active: true,
        priority: 32,
        rule: { action: { block: true }, scope: "tenant", match_all: false },
      }),
    "match_all false"
  );
  assert.match(body.message, /rule\.match_all/);
  assert.deepEqual(await all(acls), before, "refused writes change nothing");

  // What the SDK put on the wire for the new shapes.
  const shapes = sent
    .filter((s) => JSON.stringify(s.body).match(/match_all|auth0_managed/))
    .map((s) => `${s.method} ${new URL(s.url).pathname} ${JSON.stringify(s.body.rule)}`);
  for (const shape of shapes) console.log(`sdk sent: ${shape}`);
  assert.ok(shapes.some((s) => s.includes('"match_all":true')), "match_all sent as true");
  assert.ok(
    shapes.some((s) => s.includes('"auth0_managed":["auth0.icloud_relay_proxy"]')),
    "auth0_managed sent as an array of names"
  );

  for (const acl of await all(acls)) await acls.delete(acl.id);
  assert.deepEqual(await all(acls), [], "all deleted");
  answer = await netacl(accessToken, "DELETE", "/_netacl/v1/managed-lists/auth0.icloud_relay_proxy");
  assert.equal(answer.status, 204);

  // The tenant's logs, listed with the SDK's pager (offset pages with totals until an empty
  // page) and read one by one; a search (the SDK sends it as `search`).
  const logs = new LogsClient({ baseUrl: `${BASE}/api/v2`, token: accessToken, maxRetries: 0 });
  const events = [];
  let logPage = await logs.list({ per_page: 5, sort: "date:1" });
  for (;;) {
    events.push(...logPage.data);
    if (!logPage.hasNextPage()) break;
    logPage = await logPage.getNextPage();
  }
  assert.ok(events.length >= 8, `one event per write: ${events.length}`);
  assert.equal(events[0].type, "sapi");
  assert.equal(events[0].client_id, process.env.NETACL_CLIENT_ID);
  assert.ok(events.some((e) => e.type === "fapi"), "refused writes are fapi events");
  const one = await logs.get(events[events.length - 1].log_id);
  assert.equal(one.log_id, events[events.length - 1].log_id);
  assert.equal(one.details.request.method, "delete");
  const failures = (await logs.list({ search: "type:fapi" })).data;
  assert.ok(failures.length > 0 && failures.every((e) => e.type === "fapi"), "search");
  await expectError(404, ManagementError, () => logs.get("0".repeat(20)), "unknown log id");
  console.log("node sdk: all checks passed");
}

main().catch((err) => {
  console.error(`FAIL: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
