"""Drives `netacl serve` with the official Python SDK (auth0-python 6.x), unchanged.

Run by `crates/cli/tests/cli/serve_sdk.rs`, which starts the real binary and passes:
NETACL_DOMAIN (host:port; the tenant domain, so issuer and audience match what the SDK sends),
NETACL_CLIENT_ID and NETACL_CLIENT_SECRET (the bootstrap client). Exits non-zero on the first
failed check.
"""
import os
import sys

from auth0.authentication import GetToken
from auth0.management import Auth0, NetworkAclAction, NetworkAclMatch, NetworkAclRule
from auth0.management.core.api_error import ApiError
from auth0.management.errors import BadRequestError, ConflictError, NotFoundError

DOMAIN = os.environ["NETACL_DOMAIN"]
CLIENT_ID = os.environ["NETACL_CLIENT_ID"]
CLIENT_SECRET = os.environ["NETACL_CLIENT_SECRET"]


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}", file=sys.stderr)
        sys.exit(1)


def expect_error(status, kind, call, what):
    """The call fails with `status`; `kind` is the SDK's error class when the SDK maps that
    status for this operation (it raises its generic ApiError for the others)."""
    try:
        call()
    except ApiError as err:
        check(err.status_code == status, f"{what}: status {err.status_code}, expected {status}")
        check(isinstance(err, kind), f"{what}: {type(err).__name__} is not a {kind.__name__}")
        body = err.body if isinstance(err.body, dict) else {}
        check(body.get("statusCode") == status, f"{what}: error body {err.body!r}")
        return body
    check(False, f"{what}: expected {status}, the call succeeded")
    return {}


def all_acls(client):
    """Every network ACL, paging with the SDK's pager until an empty page."""
    return [acl for acl in client.network_acls.list(per_page=3)]


def main():
    # Token: the SDK's client-credentials call over plain HTTP.
    token = GetToken(DOMAIN, CLIENT_ID, client_secret=CLIENT_SECRET, protocol="http")
    response = token.client_credentials(f"https://{DOMAIN}/api/v2/")
    check(response.get("token_type") == "Bearer", f"token response {response!r}")
    client = Auth0(
        base_url=f"http://{DOMAIN}/api/v2", token=response["access_token"], max_retries=0
    )
    acls = client.network_acls

    check(all_acls(client) == [], "starts empty")

    # create (typed models and plain dicts), 7 records so that paging takes several pages.
    acls.create(
        description="sdk block",
        active=True,
        priority=10,
        rule=NetworkAclRule(
            action=NetworkAclAction(block=True),
            scope="management",
            match=NetworkAclMatch(ipv_4_cidrs=["198.51.100.0/24"], geo_country_codes=["NL"]),
        ),
    )
    for priority in range(20, 26):
        acls.create(
            description=f"sdk log {priority}",
            active=priority % 2 == 0,
            priority=priority,
            rule={
                "action": {"log": True},
                "scope": "tenant",
                "not_match": {"asns": [64500 + priority]},
            },
        )
    listed = all_acls(client)
    check(len(listed) == 7, f"list pages through all 7, got {len(listed)}")
    priorities = [acl.priority for acl in listed]
    check(priorities == sorted(priorities), f"ascending priority: {priorities}")
    first = listed[0]
    check(first.description == "sdk block", f"first record {first!r}")
    check(first.id.startswith("acl_") and len(first.id) == 26, f"id {first.id}")
    check(first.created_at == first.updated_at, "created_at == updated_at on create")

    # get
    got = acls.get(first.id)
    check(got.id == first.id and got.rule.match.ipv_4_cidrs == ["198.51.100.0/24"], f"get {got!r}")

    # set (replace)
    acls.set(
        first.id,
        description="sdk replaced",
        active=False,
        priority=11,
        rule=NetworkAclRule(
            action=NetworkAclAction(redirect=True, redirect_uri="https://example.com/blocked"),
            scope="authentication",
            not_match=NetworkAclMatch(geo_country_codes=["US"]),
        ),
    )
    replaced = acls.get(first.id)
    check(replaced.description == "sdk replaced" and replaced.priority == 11, f"set {replaced!r}")
    check(replaced.rule.action.redirect_uri == "https://example.com/blocked", "redirect kept")
    check(replaced.created_at == first.created_at, "set keeps created_at")

    # update (merge)
    updated = acls.update(first.id, description="sdk updated", active=True)
    check(updated.description == "sdk updated" and updated.active is True, f"update {updated!r}")
    check(updated.priority == 11, "update keeps the other fields")

    # errors
    body = expect_error(
        400,
        BadRequestError,
        lambda: acls.create(
            description="bad",
            active=True,
            rule={"action": {"block": True}, "scope": "tenant", "match": {"asns": [1, 1]}},
        ),
        "duplicate items",
    )
    check(body.get("errorCode") == "invalid_body", f"invalid_body: {body!r}")
    check("rule.match.asns" in body.get("message", ""), f"property path: {body!r}")
    body = expect_error(400, ApiError, lambda: acls.get("not-an-id"), "malformed id")
    check(body.get("errorCode") == "invalid_uri", f"invalid_uri: {body!r}")
    body = expect_error(404, NotFoundError, lambda: acls.get("acl_" + "1" * 22), "unknown id")
    check(body.get("errorCode") == "inexistent_network_acl", f"404 code: {body!r}")
    expect_error(404, NotFoundError, lambda: acls.delete("acl_" + "2" * 22), "delete unknown")
    before = all_acls(client)
    expect_error(
        409,
        ConflictError,
        lambda: acls.create(
            description="clash",
            active=True,
            priority=20,
            rule={"action": {"block": True}, "scope": "tenant", "match": {"asns": [1]}},
        ),
        "taken priority",
    )
    check(all_acls(client) == before, "a 409 writes nothing")

    # delete
    for acl in all_acls(client):
        acls.delete(acl.id)
    check(all_acls(client) == [], "all deleted")
    expect_error(404, NotFoundError, lambda: acls.get(first.id), "deleted record")

    # The tenant's logs: the writes above, listed with the SDK's pager (offset pages with
    # totals, until an empty page) and read one by one; a search by type.
    logs = [event for event in client.logs.list(per_page=4, sort="date:1")]
    check(len(logs) >= 10, f"one event per write: {len(logs)}")
    check(logs[0].type == "sapi" and logs[0].client_id == CLIENT_ID, f"first event {logs[0]!r}")
    check(any(e.type == "fapi" for e in logs), "the refused writes are fapi events")
    one = client.logs.get(logs[-1].log_id)
    check(one.log_id == logs[-1].log_id and one.details["request"]["method"] == "delete",
          f"one event {one!r}")
    failures = [event for event in client.logs.list(search="type:fapi")]
    check(failures and all(e.type == "fapi" for e in failures), f"search {failures!r}")
    expect_error(404, NotFoundError, lambda: client.logs.get("0" * 20), "unknown log id")
    print("sdk: all checks passed")


if __name__ == "__main__":
    main()
