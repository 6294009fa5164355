"""Drives the tenant endpoints of `netacl serve` with the official Python SDK (auth0-python 6.x),
unchanged: organizations.create (and its 409), groups.members.get paged to the end,
users.sessions.list paged to the end, branding.update / branding.get, keys.signing (list, get,
rotate, revoke).

Run by `crates/cli/tests/cli/tenant_sdk.rs`, which imports testdata/directory.json with
`netacl directory import`, starts the real binary and passes NETACL_DOMAIN (host:port, the tenant
domain), NETACL_CLIENT_ID, NETACL_CLIENT_SECRET and NETACL_DIRECTORY (the imported file, to
compare against). Exits non-zero on the first failed check.
"""
import json
import os
import sys

from auth0.authentication import GetToken
from auth0.management import Auth0
from auth0.management.core.api_error import ApiError
from auth0.management.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnauthorizedError,
)

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
        check(isinstance(err, kind), f"{what}: {type(err).__name__} is not a {kind.__name__}")
        body = err.body if isinstance(err.body, dict) else {}
        check(body.get("statusCode") == status, f"{what}: error body {err.body!r}")
        return body
    check(False, f"{what}: expected {status}, the call succeeded")
    return {}


def main():
    with open(DIRECTORY, encoding="utf-8") as f:
        directory = json.load(f)
    token = GetToken(DOMAIN, CLIENT_ID, client_secret=CLIENT_SECRET, protocol="http")
    response = token.client_credentials(f"https://{DOMAIN}/api/v2/")
    client = Auth0(base_url=f"http://{DOMAIN}/api/v2", token=response["access_token"], max_retries=0)

    # organizations.create, with every kind of member, then the same name again: 409.
    db, saml = directory["connections"][0], directory["connections"][2]
    org = client.organizations.create(
        name="acme",
        display_name="Acme Corporation",
        branding={"logo_url": "https://cdn.acme.example/logo.png",
                  "colors": {"primary": "#0059d6", "page_background": "#ffffff"}},
        metadata={"tier": "gold"},
        enabled_connections=[
            {"connection_id": db["id"], "assign_membership_on_login": True},
            {"connection_id": saml["id"], "show_as_button": False},
        ],
        token_quota={"client_credentials": {"enforce": True, "per_day": 1000}},
    )
    check(org.id is not None and org.id.startswith("org_") and len(org.id) == 20, f"id {org.id!r}")
    check(org.name == "acme" and org.display_name == "Acme Corporation", f"org {org!r}")
    enabled = org.enabled_connections or []
    check(len(enabled) == 2, f"enabled connections {enabled!r}")
    check(enabled[0].connection.name == db["name"], f"connection {enabled[0]!r}")
    check(enabled[1].connection.strategy == "samlp", f"connection {enabled[1]!r}")
    check(enabled[1].show_as_button is False and enabled[0].show_as_button is True, "defaults")
    body = expect_error(409, ConflictError, lambda: client.organizations.create(name="acme"),
                        "organization name taken")
    check(body.get("errorCode") == "conflict", f"409 body {body!r}")
    body = expect_error(400, BadRequestError,
                        lambda: client.organizations.create(name="Not-Lowercase"), "bad name")
    check(body.get("errorCode") == "invalid_body", f"400 body {body!r}")

    # groups.members.get, paged to the end with the SDK's pager.
    big = directory["groups"][0]["id"]
    want = [m["id"] for m in directory["members"] if m["group_id"] == big]
    got = [m.id for m in client.groups.members.get(big, take=100)]
    check(got == want, f"members: {len(got)} paged, {len(want)} expected")
    pages = list(client.groups.members.get(big, take=100, fields="id,type").iter_pages())
    check(len(pages) == (len(want) + 99) // 100, f"{len(pages)} pages")
    first = pages[0].items[0]
    check(first.id == want[0] and first.connection_id is None, f"projection {first!r}")
    expect_error(404, NotFoundError, lambda: list(client.groups.members.get("grp_9ZbGfPu9TCHmbkDc")),
                 "unknown group")
    expect_error(400, BadRequestError, lambda: list(client.groups.members.get("grp_bad")),
                 "malformed group id")

    # users.sessions.list, paged to the end (the user id has a `|`, sent percent-encoded).
    heavy = directory["users"][0]["user_id"]
    want = [s["id"] for s in directory["sessions"] if s["user_id"] == heavy]
    got = [s.id for s in client.users.sessions.list(heavy, take=100)]
    check(got == want, f"sessions: {len(got)} paged, {len(want)} expected")
    page = client.users.sessions.list(heavy, take=5, include_totals=True)
    total = getattr(page.response, "total", None)
    check(total == len(want), f"include_totals: total {total!r}, expected {len(want)}")
    one = next(iter(client.users.sessions.list(heavy, take=1)))
    check(one.user_id == heavy and one.device.initial_ip, f"session {one!r}")
    expect_error(404, NotFoundError, lambda: list(client.users.sessions.list("auth0|nobody")),
                 "unknown user")

    # branding.update merges; branding.get reads the whole object back.
    settings = client.branding.update(colors={"primary": "#0059d6"},
                                      logo_url="https://cdn.acme.example/logo.png")
    check(settings.colors.primary == "#0059d6", f"branding {settings!r}")
    settings = client.branding.update(
        colors={"page_background": {"type": "linear-gradient", "start": "#000000",
                                    "end": "#ffffff", "angle_deg": 35}},
        font={"url": "https://cdn.acme.example/inter.woff2"},
    )
    check(settings.colors.primary == "#0059d6", f"merged primary {settings!r}")
    check(settings.logo_url == "https://cdn.acme.example/logo.png", f"kept logo {settings!r}")
    check(settings.font.url == "https://cdn.acme.example/inter.woff2", f"font {settings!r}")
    again = client.branding.get()
    check(again.colors.primary == "#0059d6" and again.font.url == settings.font.url, "get")
    expect_error(400, BadRequestError, lambda: client.branding.update(logo_url="http://insecure.example"),
                 "http logo")

    # keys.signing: list, get, rotate, revoke the previous key (its tokens stop at once).
    keys = client.keys.signing.list()
    check(len(keys) == 1 and keys[0].current and keys[0].cert.startswith("-----BEGIN CERTIFICATE"),
          f"signing keys {keys!r}")
    first = keys[0].kid
    check(client.keys.signing.get(first).kid == first, "get the current key")
    check("PRIVATE" not in json.dumps([k.dict() for k in keys], default=str), "no private material")
    rotated = client.keys.signing.rotate()
    check(rotated.kid != first and rotated.cert.startswith("-----BEGIN CERTIFICATE"),
          f"rotate {rotated!r}")
    check(client.keys.signing.get(first).previous, "the first key is previous")
    expect_error(404, NotFoundError, lambda: client.keys.signing.get("nope"), "unknown kid")
    response = token.client_credentials(f"https://{DOMAIN}/api/v2/")
    fresh = Auth0(base_url=f"http://{DOMAIN}/api/v2", token=response["access_token"], max_retries=0)
    revoked = fresh.keys.signing.revoke(first)
    check(revoked.kid == first, f"revoke {revoked!r}")
    check(fresh.keys.signing.get(first).revoked, "revoked")
    expect_error(401, UnauthorizedError, lambda: client.keys.signing.list(),
                 "a token of the revoked key")
    check(len(fresh.keys.signing.list()) == 2, "two keys listed")

    print("sdk: all tenant checks passed")


if __name__ == "__main__":
    main()
