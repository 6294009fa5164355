// Runs the deploy CLI's own organizations handler (auth0-deploy-cli 8.x, unchanged: its
// `OrganizationsHandler`, its paging client and its YAML dump of organizations, on the auth0 SDK
// copy it depends on) against `netacl serve` over plain HTTP: export, edit, import, re-export
// without drift, and a second import that changes nothing. The CLI's command line only speaks
// https, so its handler is driven directly, with the SDK's resource clients pointed at the
// server's `http://` base URL.
//
// Run by `crates/cli/tests/cli/organizations_node.rs` with NETACL_DOMAIN (host:port, the tenant
// domain), NETACL_CLIENT_ID, NETACL_CLIENT_SECRET and NETACL_DIRECTORY (the imported directory
// file). Prints "deploy cli: organizations export/import without drift" and exits 0, or exits 1
// on the first failed check.
'use strict';

const fs = require('fs');
const { createRequire } = require('module');
const assert = require('assert');

// The deploy CLI's modules, and the auth0 SDK as the deploy CLI resolves it.
const fromCli = createRequire(require.resolve('auth0-deploy-cli/package.json'));
const OrganizationsHandler = fromCli('./lib/tools/auth0/handlers/organizations').default;
const pagedClient = fromCli('./lib/tools/auth0/client').default;
const yamlOrganizations = fromCli('./lib/context/yaml/handlers/organizations').default;
const logger = fromCli('./lib/logger').default;
const { OrganizationsClient } = fromCli('auth0/organizations');
const { ConnectionsClient } = fromCli('auth0/connections');
const { ClientsClient } = fromCli('auth0/clients');
const { ClientGrantsClient } = fromCli('auth0/clientGrants');

const DOMAIN = process.env.NETACL_DOMAIN;
const DIRECTORY = JSON.parse(fs.readFileSync(process.env.NETACL_DIRECTORY, 'utf8'));

async function token() {
  const response = await fetch(`http://${DOMAIN}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: process.env.NETACL_CLIENT_ID,
      client_secret: process.env.NETACL_CLIENT_SECRET,
      audience: `https://${DOMAIN}/api/v2/`,
    }),
  });
  assert.strictEqual(response.status, 200, 'token');
  return (await response.json()).access_token;
}

/** A fresh handler (each deploy run starts with one) on a paged client, as the CLI builds it. */
function handler(options, config) {
  const client = pagedClient({
    organizations: new OrganizationsClient(options),
    connections: new ConnectionsClient(options),
    clients: new ClientsClient(options),
    clientGrants: new ClientGrantsClient(options),
  });
  return new OrganizationsHandler({ client, config: (key) => config[key] });
}

/** What `a0deploy export` writes for organizations (the YAML handler's dump, ids stripped). */
async function exportOrganizations(options) {
  const existing = await handler(options, {}).getType();
  const copy = JSON.parse(JSON.stringify(existing));
  const { organizations } = await yamlOrganizations.dump({ assets: { organizations: copy } });
  for (const org of organizations) {
    delete org.id; // stripIdentifiers
  }
  organizations.sort((a, b) => a.name.localeCompare(b.name));
  return organizations;
}

/** `a0deploy import` of `organizations`: the handler's processChanges, with its counts. */
async function importOrganizations(options, organizations) {
  const h = handler(options, { AUTH0_ALLOW_DELETE: true });
  await h.processChanges({ organizations: JSON.parse(JSON.stringify(organizations)) });
  return { created: h.created, updated: h.updated, deleted: h.deleted };
}

async function main() {
  logger.level = 'error';
  const options = { baseUrl: `http://${DOMAIN}/api/v2`, token: await token(), maxRetries: 0 };
  const [db, social, saml] = DIRECTORY.connections;
  const orgs = new OrganizationsClient(options);
  // The tenant as it is before the first export.
  const acme = await orgs.create({
    name: 'acme',
    display_name: 'Acme',
    metadata: { tier: 'gold' },
    branding: { colors: { primary: '#0059d6', page_background: '#ffffff' } },
    enabled_connections: [
      { connection_id: db.id, assign_membership_on_login: true },
      { connection_id: saml.id, show_as_button: false },
    ],
  });
  await orgs.connections.create(acme.id, { connection_id: social.id, is_enabled: false });
  await orgs.create({ name: 'beta', token_quota: { client_credentials: { enforce: true, per_day: 10 } } });
  await orgs.create({ name: 'gamma' });

  // Export.
  const exported = await exportOrganizations(options);
  assert.deepStrictEqual(exported.map((o) => o.name), ['acme', 'beta', 'gamma']);
  const exportedAcme = exported[0];
  assert.deepStrictEqual(exportedAcme.connections, [
    { name: db.name, assign_membership_on_login: true, show_as_button: true, is_signup_enabled: false, is_enabled: true },
    { name: saml.name, assign_membership_on_login: false, show_as_button: false, is_signup_enabled: false, is_enabled: true },
    { name: social.name, assign_membership_on_login: false, show_as_button: true, is_signup_enabled: false, is_enabled: false },
  ]);
  assert.deepStrictEqual(exportedAcme.client_grants, []);
  assert.strictEqual(exportedAcme.discovery_domains, undefined);
  assert.deepStrictEqual(exported[1].token_quota, { client_credentials: { enforce: true, per_day: 10 } });

  // Importing the export unchanged changes nothing.
  assert.deepStrictEqual(await importOrganizations(options, exported), { created: 0, updated: 0, deleted: 0 });

  // Edit: acme renamed for display, its metadata replaced, one connection changed, one removed,
  // one added; beta's quota dropped (null), gamma deleted, delta created with a connection.
  const edited = JSON.parse(JSON.stringify(exported));
  edited[0].display_name = 'Acme Corporation';
  edited[0].metadata = { tier: 'platinum' };
  edited[0].connections = [
    { name: db.name, assign_membership_on_login: false, show_as_button: true, is_signup_enabled: true, is_enabled: true },
    { name: social.name, assign_membership_on_login: false, show_as_button: true, is_signup_enabled: false, is_enabled: true },
  ];
  edited[1].token_quota = null;
  edited.splice(2, 1);
  edited.push({
    name: 'delta',
    display_name: 'Delta',
    connections: [{ name: saml.name, assign_membership_on_login: true, show_as_button: true, is_signup_enabled: false, is_enabled: true }],
    client_grants: [],
  });
  assert.deepStrictEqual(await importOrganizations(options, edited), { created: 1, updated: 2, deleted: 1 });

  // Re-export: exactly the edit (beta's null quota is gone), and importing it again is a no-op.
  const again = await exportOrganizations(options);
  const expected = JSON.parse(JSON.stringify(edited));
  delete expected[1].token_quota;
  expected.sort((a, b) => a.name.localeCompare(b.name));
  assert.deepStrictEqual(again, expected);
  assert.deepStrictEqual(await importOrganizations(options, again), { created: 0, updated: 0, deleted: 0 });

  console.log('deploy cli: organizations export/import without drift');
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
