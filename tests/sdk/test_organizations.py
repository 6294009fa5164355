"""Drives the organization endpoints beyond create of `netacl serve` with the official Python SDK
(auth0-python 6.x), unchanged: organizations.list (checkpoint pager to the end), get, get_by_name,
update, delete; organizations.enabled_connections and organizations.connections (list, add /
create, get, update, delete: two views of the same rows); organizations.client_grants.list;
connections.list, clients.list and client_grants.list. Every refusal the SDK turns into its typed
error is checked with the error body.

Run by `crates/cli/tests/cli/tenant_sdk.rs`, which imports testdata/directory.json with
`netacl directory import`, starts the real binary and passes NETACL_DOMAIN (host:port, the tenant
domain), NETACL_CLIENT_ID, NETACL_CLIENT_SECRET and NETACL_DIRECTORY (the imported file).
Exits non-zero on the first failed check.
"""
import json
import os
import sys

from auth0.authentication import GetToken
from auth0.management import Auth0
from auth0.management.core.api_error import ApiError
from auth0.management.errors import BadRequestError, ConflictError, NotFoundError

DOMAIN = os.environ["NETACL_DOMAIN"]
CLIENT_ID = os.environ["NETACL_CLIENT_ID"]
CLIENT_SECRET = os.environ["NETACL_CLIENT_SECRET"]
DIRECTORY = os.environ["NETACL_DIRECTORY"]


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}", file=sys.stderr)
        sys.exit(1)


def expect_error(status, kind, call, what):
    try:
        call()
    except ApiError as err:
        check(err.status_code == status, f"{what}: status {err.status_code}, expected {status}")
        # The SDK raises its typed error where the method declares the status, else ApiError.
        check(isinstance(err, kind) or type(err) is ApiError,
              f"{what}: {type(err).__name__} is not a {kind.__name__}")
        body = err.body if isinstance(err.body, dict) else {}
        check(body.get("statusCode") == status, f"{what}: error body {err.body!r}")
        return body
    check(False, f"{what}: expected {status}, the call succeeded")
    return {}


def main():
    with open(DIRECTORY, encoding="utf-8") as f:
        directory = json.load(f)
    db, social, saml = directory["connections"][:3]
    token = GetToken(DOMAIN, CLIENT_ID, client_secret=CLIENT_SECRET, protocol="http")
    response = token.client_credentials(f"https://{DOMAIN}/api/v2/")
    client = Auth0(base_url=f"http://{DOMAIN}/api/v2", token=response["access_token"], max_retries=0)
    orgs = client.organizations

    # Seven organizations, listed to the end by the SDK's checkpoint pager (take=3: three pages).
    made = []
    for i in range(7):
        org = orgs.create(name=f"org-{i}", display_name=f"Org {i}",
                          enabled_connections=[{"connection_id": db["id"]}])
        made.append(org.id)
    listed = [o.id for o in orgs.list(take=3)]
    check(listed == made, f"list: {listed} != {made}")
    pages = list(orgs.list(take=3).iter_pages())
    check(len(pages) == 3, f"{len(pages)} pages of 3")
    check([o.id for o in orgs.list()] == made, "default paging")
    check(getattr(pages[0].items[0], "enabled_connections", None) is None,
          "the list does not carry enabled_connections")
    expect_error(400, BadRequestError, lambda: list(orgs.list(take=101)), "take over 100")
    expect_error(400, BadRequestError, lambda: list(orgs.list(from_="not-a-checkpoint")), "bad from")

    # get, get_by_name, update, delete.
    first = orgs.get(made[0])
    check(first.name == "org-0" and first.display_name == "Org 0", f"get {first!r}")
    check(orgs.get_by_name("org-1").id == made[1], "get_by_name")
    expect_error(404, NotFoundError, lambda: orgs.get("org_0000000000000000"), "unknown id")
    expect_error(404, NotFoundError, lambda: orgs.get_by_name("nobody"), "unknown name")
    body = expect_error(400, BadRequestError, lambda: orgs.get("not-an-id"), "malformed id")
    check(body.get("errorCode") == "invalid_uri", f"{body!r}")
    updated = orgs.update(made[0], display_name="Org Zero", metadata={"tier": "gold"},
                          token_quota={"client_credentials": {"enforce": True, "per_day": 100}},
                          branding={"colors": {"primary": "#0059d6", "page_background": "#ffffff"}})
    check(updated.display_name == "Org Zero" and updated.metadata == {"tier": "gold"},
          f"update {updated!r}")
    check(updated.token_quota.client_credentials.per_day == 100, f"quota {updated!r}")
    check(orgs.get(made[0]).branding.colors.primary == "#0059d6", "update is stored")
    body = expect_error(409, ConflictError, lambda: orgs.update(made[0], name="org-1"), "taken name")
    check(body.get("errorCode") == "conflict", f"{body!r}")
    body = expect_error(400, BadRequestError, lambda: orgs.update(made[0], name="Not-Lowercase"),
                        "bad name")
    check("on property name" in body.get("message", ""), f"{body!r}")
    renamed = orgs.update(made[0], name="org-zero")
    check(renamed.name == "org-zero", f"rename {renamed!r}")
    orgs.delete(made[6])
    expect_error(404, NotFoundError, lambda: orgs.get(made[6]), "deleted")
    expect_error(404, NotFoundError, lambda: orgs.delete(made[6]), "deleted twice")
    check([o.id for o in orgs.list(take=50)] == made[:6], "list after delete")

    # An organization's connections: enabled_connections and connections, one set of rows.
    oid = made[1]
    enabled = list(orgs.enabled_connections.list(oid))
    check([c.connection_id for c in enabled] == [db["id"]], f"enabled {enabled!r}")
    check(enabled[0].connection.name == db["name"], f"connection {enabled[0]!r}")
    added = orgs.enabled_connections.add(oid, connection_id=saml["id"], show_as_button=False)
    check(added.connection.strategy == "samlp" and added.show_as_button is False, f"add {added!r}")
    created = orgs.connections.create(oid, connection_id=social["id"], is_enabled=False,
                                      organization_connection_name="Social",
                                      organization_access_level="readonly")
    check(created.is_enabled is False and created.organization_connection_name == "Social",
          f"create {created!r}")
    every = list(orgs.connections.list(oid))
    check([c.connection_id for c in every] == [db["id"], saml["id"], social["id"]],
          f"all view {every!r}")
    check([c.connection_id for c in orgs.connections.list(oid, is_enabled=False)] == [social["id"]],
          "is_enabled filter")
    check([c.connection_id for c in orgs.enabled_connections.list(oid, per_page=1)]
          == [db["id"], saml["id"]], "enabled view, one per page")
    expect_error(404, NotFoundError, lambda: orgs.enabled_connections.get(oid, social["id"]),
                 "disabled connection in the enabled view")
    one = orgs.connections.get(oid, social["id"])
    check(one.organization_access_level == "readonly", f"get {one!r}")
    changed = orgs.connections.update(oid, social["id"], is_enabled=True, is_signup_enabled=True)
    check(changed.is_enabled is True and changed.is_signup_enabled is True, f"update {changed!r}")
    check(orgs.enabled_connections.get(oid, social["id"]).is_signup_enabled is True,
          "enabled through the other view")
    flags = orgs.enabled_connections.update(oid, saml["id"], assign_membership_on_login=True)
    check(flags.assign_membership_on_login is True, f"enabled update {flags!r}")
    body = expect_error(409, ConflictError,
                        lambda: orgs.connections.create(oid, connection_id=db["id"]), "added twice")
    check(body.get("errorCode") == "conflict", f"{body!r}")
    body = expect_error(400, BadRequestError,
                        lambda: orgs.enabled_connections.add(oid, connection_id="con_Missing000000001"),
                        "unknown connection")
    check("on property connection_id" in body.get("message", ""), f"{body!r}")
    orgs.enabled_connections.delete(oid, saml["id"])
    orgs.connections.delete(oid, social["id"])
    expect_error(404, NotFoundError, lambda: orgs.connections.delete(oid, social["id"]), "removed")
    check([c.connection_id for c in orgs.connections.list(oid)] == [db["id"]], "after removals")
    expect_error(404, NotFoundError, lambda: list(orgs.connections.list("org_0000000000000000")),
                 "unknown organization")

    # Client grants of an organization (none), the tenant's connections, clients and grants.
    check(list(orgs.client_grants.list(oid)) == [], "organization client grants")
    expect_error(404, NotFoundError,
                 lambda: list(orgs.client_grants.list("org_0000000000000000")), "unknown org grants")
    connections = list(client.connections.list(take=1))
    check(sorted(c.id for c in connections) == sorted(c["id"] for c in directory["connections"]),
          f"connections {len(connections)}")
    check({c.name for c in client.connections.list(strategy="samlp")} == {saml["name"]},
          "strategy filter")
    clients = list(client.clients.list())
    check([c.client_id for c in clients] == [CLIENT_ID], f"clients {clients!r}")
    check(CLIENT_SECRET not in repr(clients), "no secret")
    grants = list(client.client_grants.list())
    check(len(grants) == 1 and grants[0].client_id == CLIENT_ID, f"grants {grants!r}")
    check(grants[0].audience == f"https://{DOMAIN}/api/v2/", f"audience {grants[0]!r}")
    check("read:organizations" in grants[0].scope, "the grant carries the client's scopes")
    print("sdk: all organization checks passed")


if __name__ == "__main__":
    main()
