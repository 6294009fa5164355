// Drives the organization endpoints beyond create of `netacl serve` with the official Node.js SDK
// (auth0 7.x), unchanged: its resource clients (`auth0/organizations`, `auth0/connections`,
// `auth0/clients`, `auth0/clientGrants`, the package's own exports) take a plain-HTTP `baseUrl`
// and a token. organizations.list (checkpoint pages to the end), get, getByName, update, delete;
// enabledConnections and connections (two views of the same rows); clientGrants.list of an
// organization; the tenant's connections, clients and client grants. Refusals are checked as the
// SDK's typed errors, with the error body.
//
// Run by `crates/cli/tests/cli/organizations_node.rs` with NETACL_DOMAIN (host:port, the tenant
// domain), NETACL_CLIENT_ID, NETACL_CLIENT_SECRET and NETACL_DIRECTORY (the imported directory
// file). Prints "node sdk: all organization checks passed" and exits 0, or exits 1 on the first
// failed check.
'use strict';

const fs = require('fs');
const { Management, ManagementError } = require('auth0');
const { OrganizationsClient } = require('auth0/organizations');
const { ConnectionsClient } = require('auth0/connections');
const { ClientsClient } = require('auth0/clients');
const { ClientGrantsClient } = require('auth0/clientGrants');

const DOMAIN = process.env.NETACL_DOMAIN;
const CLIENT_ID = process.env.NETACL_CLIENT_ID;
const CLIENT_SECRET = process.env.NETACL_CLIENT_SECRET;
const DIRECTORY = JSON.parse(fs.readFileSync(process.env.NETACL_DIRECTORY, 'utf8'));

function check(condition, message) {
  if (!condition) {
    throw new Error(`FAIL: ${message}`);
  }
}

async function expectError(status, kind, call, what) {
  try {
    await call();
  } catch (err) {
    check(err.statusCode === status, `${what}: status ${err.statusCode}, expected ${status} (${err})`);
    // The SDK throws its typed error where the method declares the status, else ManagementError.
    check(
      err instanceof kind || err.constructor === ManagementError,
      `${what}: ${err.constructor.name} is not a ${kind.name}`,
    );
    check(err.body && err.body.statusCode === status, `${what}: body ${JSON.stringify(err.body)}`);
    return err.body;
  }
  throw new Error(`FAIL: ${what}: expected ${status}, the call succeeded`);
}

/** Every item of a page and the pages after it, as the SDK pages them. */
async function all(pagePromise) {
  const items = [];
  let page = await pagePromise;
  let pages = 1;
  items.push(...page.data);
  while (page.hasNextPage()) {
    page = await page.getNextPage();
    pages += 1;
    items.push(...page.data);
  }
  return { items, pages };
}

async function token() {
  const response = await fetch(`http://${DOMAIN}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      audience: `https://${DOMAIN}/api/v2/`,
    }),
  });
  check(response.status === 200, `token: ${response.status}`);
  return (await response.json()).access_token;
}

async function main() {
  const options = { baseUrl: `http://${DOMAIN}/api/v2`, token: await token(), maxRetries: 0 };
  const orgs = new OrganizationsClient(options);
  const [db, social, saml] = DIRECTORY.connections;

  // Seven organizations, listed to the end by checkpoint pages (take=3: three pages).
  const made = [];
  for (let i = 0; i < 7; i += 1) {
    const org = await orgs.create({
      name: `node-${i}`,
      display_name: `Node ${i}`,
      enabled_connections: [{ connection_id: db.id }],
    });
    made.push(org.id);
  }
  const listed = await all(orgs.list({ take: 3 }));
  check(JSON.stringify(listed.items.map((o) => o.id)) === JSON.stringify(made), 'list order');
  check(listed.pages === 3, `${listed.pages} pages`);
  check(listed.items[0].enabled_connections === undefined, 'no enabled_connections in the list');
  const defaults = await all(orgs.list());
  check(defaults.items.length === 7 && defaults.pages === 1, 'default paging');
  const iterated = [];
  for await (const org of await orgs.list({ take: 2 })) {
    iterated.push(org.id);
  }
  check(iterated.length === 7, `async iteration: ${iterated.length}`);
  await expectError(400, Management.BadRequestError, () => orgs.list({ take: 0 }), 'take 0');
  await expectError(400, Management.BadRequestError, () => orgs.list({ from: '!!' }), 'bad from');

  // get, getByName, update, delete.
  const first = await orgs.get(made[0]);
  check(first.name === 'node-0' && first.display_name === 'Node 0', `get ${JSON.stringify(first)}`);
  check((await orgs.getByName('node-1')).id === made[1], 'getByName');
  await expectError(404, Management.NotFoundError, () => orgs.get('org_0000000000000000'), 'unknown id');
  await expectError(404, Management.NotFoundError, () => orgs.getByName('nobody'), 'unknown name');
  const updated = await orgs.update(made[0], {
    display_name: 'Node Zero',
    metadata: { tier: 'gold' },
    token_quota: { client_credentials: { per_hour: 5 } },
  });
  check(updated.display_name === 'Node Zero' && updated.metadata.tier === 'gold', 'update');
  const cleared = await orgs.update(made[0], { token_quota: null });
  check(cleared.token_quota === undefined, `token_quota null removes it: ${JSON.stringify(cleared)}`);
  let body = await expectError(409, Management.ConflictError, () => orgs.update(made[0], { name: 'node-1' }), 'taken name');
  check(body.errorCode === 'conflict', JSON.stringify(body));
  body = await expectError(400, Management.BadRequestError, () => orgs.update(made[0], { owner: 'x' }), 'unknown member');
  check(body.message === "Payload validation error: 'Additional properties not allowed: owner'.", body.message);
  await orgs.delete(made[6]);
  await expectError(404, Management.NotFoundError, () => orgs.delete(made[6]), 'deleted twice');

  // An organization's connections through both views.
  const oid = made[1];
  const enabled = await all(orgs.enabledConnections.list(oid));
  check(enabled.items.length === 1 && enabled.items[0].connection.name === db.name, 'enabled list');
  const added = await orgs.enabledConnections.add(oid, { connection_id: saml.id, show_as_button: false });
  check(added.connection.strategy === 'samlp' && added.show_as_button === false, 'add');
  const created = await orgs.connections.create(oid, {
    connection_id: social.id,
    is_enabled: false,
    organization_access_level: 'limited',
  });
  check(created.is_enabled === false && created.organization_access_level === 'limited', 'create');
  const every = await all(orgs.connections.list(oid, { per_page: 2 }));
  check(JSON.stringify(every.items.map((c) => c.connection_id)) === JSON.stringify([db.id, saml.id, social.id]), 'all view');
  const disabled = await all(orgs.connections.list(oid, { is_enabled: false }));
  check(disabled.items.length === 1 && disabled.items[0].connection_id === social.id, 'is_enabled filter');
  await expectError(404, Management.NotFoundError, () => orgs.enabledConnections.get(oid, social.id), 'disabled in enabled view');
  const one = await orgs.connections.get(oid, social.id);
  check(one.connection.name === social.name, 'get one');
  const enabledNow = await orgs.connections.update(oid, social.id, { is_enabled: true });
  check(enabledNow.is_enabled === true, 'enable');
  const flags = await orgs.enabledConnections.update(oid, social.id, { is_signup_enabled: true });
  check(flags.is_signup_enabled === true, 'update through the enabled view');
  body = await expectError(409, Management.ConflictError, () => orgs.enabledConnections.add(oid, { connection_id: db.id }), 'added twice');
  check(body.errorCode === 'conflict', JSON.stringify(body));
  await orgs.enabledConnections.delete(oid, saml.id);
  await orgs.connections.delete(oid, social.id);
  await expectError(404, Management.NotFoundError, () => orgs.connections.delete(oid, social.id), 'removed twice');
  const left = await all(orgs.connections.list(oid));
  check(left.items.length === 1 && left.items[0].connection_id === db.id, 'after removals');

  // Client grants of an organization (none); the tenant's connections, clients and grants.
  const orgGrants = await all(orgs.clientGrants.list(oid));
  check(orgGrants.items.length === 0, 'organization client grants');
  await expectError(404, Management.NotFoundError, () => orgs.clientGrants.list('org_0000000000000000'), 'unknown organization');
  const connections = await all(new ConnectionsClient(options).list({ take: 1 }));
  check(connections.items.length === DIRECTORY.connections.length, `connections ${connections.items.length}`);
  check(connections.pages === DIRECTORY.connections.length, `connection pages ${connections.pages}`);
  const clients = await all(new ClientsClient(options).list());
  check(clients.items.length === 1 && clients.items[0].client_id === CLIENT_ID, 'clients');
  check(!JSON.stringify(clients.items).includes(CLIENT_SECRET), 'no secret');
  const grants = await all(new ClientGrantsClient(options).list());
  check(grants.items.length === 1 && grants.items[0].client_id === CLIENT_ID, 'grants');
  check(grants.items[0].scope.includes('read:organizations'), 'the grant carries the scopes');
  check(grants.items[0].audience === `https://${DOMAIN}/api/v2/`, 'audience');

  console.log('node sdk: all organization checks passed');
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
