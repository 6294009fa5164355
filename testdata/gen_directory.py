#!/usr/bin/env python3
"""Writes testdata/directory.json: a deterministic, realistic directory for `netacl directory
import` and the tenant API tests.

    python3 testdata/gen_directory.py            # rewrites testdata/directory.json
    python3 testdata/gen_directory.py --check    # fails if the committed file differs

Contents: 3 connections, 50 users, 4 groups (one, "acme-employees", with 3,040 members, most of
them provisioned by the SAML connection), and 1,150 sessions, 1,050 of them belonging to the first
user (auth0|64f0a1b2c3d4e5f601234567). The format is described in testdata/README.md
("Directory data"). No dependencies beyond the standard library; the pseudo-random choices come
from a fixed xorshift generator, so the output never changes.
"""
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

OUT = Path(__file__).with_name("directory.json")
BASE = datetime(2026, 1, 5, 8, 0, 0, tzinfo=timezone.utc)
ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

HEAVY_USER = "auth0|64f0a1b2c3d4e5f601234567"
BIG_GROUP_MEMBERS = 3040
HEAVY_USER_SESSIONS = 1050


class Rng:
    """xorshift64*: tiny, fixed, reproducible everywhere."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF or 1

    def next(self):
        x = self.state
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return self.next() % n

    def choice(self, items):
        return items[self.below(len(items))]

    def chars(self, alphabet, n):
        return "".join(alphabet[self.below(len(alphabet))] for _ in range(n))


def ts(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


FIRST = ["Ada", "Grace", "Linus", "Margaret", "Ken", "Barbara", "Dennis", "Frances", "Edsger",
         "Radia", "Tim", "Sophie", "Alan", "Hedy", "John", "Katherine", "Niklaus", "Lynn",
         "Vint", "Joan", "Guido", "Anita", "Bjarne", "Shafi", "Leslie"]
LAST = ["Lovelace", "Hopper", "Torvalds", "Hamilton", "Thompson", "Liskov", "Ritchie", "Allen",
        "Dijkstra", "Perlman", "Berners-Lee", "Wilson", "Turing", "Lamarr", "Backus", "Johnson",
        "Wirth", "Conway", "Cerf", "Clarke", "van Rossum", "Borg", "Stroustrup", "Goldwasser",
        "Lamport"]
AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
]
ASNS = ["3320", "7922", "16509", "13335", "64500"]
CLIENTS = ["kbyuFDidLLm280LIwVFiazOqjO3ty8KH", "nD5kR0gqGqXVcDq2zVJQ4q1i8oXwV2uB",
           "Zx3mH8c2QY7pLr0Wt5sVb9nKd1gJf6aE"]


def main():
    rng = Rng(0x6E6574_61636C)
    connections = [
        {"id": "con_" + rng.chars(ALNUM, 16), "name": "Username-Password-Authentication",
         "strategy": "auth0"},
        {"id": "con_" + rng.chars(ALNUM, 16), "name": "google-oauth2", "strategy": "google-oauth2"},
        {"id": "con_" + rng.chars(ALNUM, 16), "name": "acme-saml", "strategy": "samlp"},
    ]
    db, google, saml = connections

    users = []
    for i in range(50):
        first, last = FIRST[i % len(FIRST)], LAST[(i * 7) % len(LAST)]
        email = f"{first}.{last}".lower().replace(" ", "").replace("-", "") + f"{i}@example.com"
        if i == 0:
            user_id = HEAVY_USER
        elif i < 40:
            user_id = "auth0|" + rng.chars("0123456789abcdef", 24)
        elif i < 48:
            user_id = "google-oauth2|" + rng.chars("0123456789", 21)
            email = email.replace("example.com", "gmail.example")
        else:
            email = email.replace("example.com", "acme.example")
            user_id = "samlp|acme-saml|" + email
        users.append({"user_id": user_id, "email": email, "name": f"{first} {last}",
                      "created_at": ts(BASE + timedelta(hours=i * 5, seconds=rng.below(3600)))})

    def group_id():
        return "grp_" + rng.chars(BASE58, 14 + rng.below(9))

    groups = [
        {"id": group_id(), "name": "acme-employees", "description": "Everyone at Acme (synced from acme-saml)",
         "created_at": ts(BASE)},
        {"id": group_id(), "name": "engineering", "description": "Product engineering",
         "created_at": ts(BASE + timedelta(days=1))},
        {"id": group_id(), "name": "support", "description": "Customer support",
         "created_at": ts(BASE + timedelta(days=2))},
        {"id": group_id(), "name": "admins", "created_at": ts(BASE + timedelta(days=3))},
    ]
    employees, engineering, support, admins = groups

    members = []
    at = BASE + timedelta(days=4)

    def member(group, mid, member_type, kind, connection=None):
        nonlocal at
        at += timedelta(seconds=1 + rng.below(90))
        m = {"group_id": group["id"], "id": mid, "member_type": member_type, "type": kind}
        if connection:
            m["connection_id"] = connection["id"]
        m["created_at"] = ts(at)
        members.append(m)

    # The big group: imported users first, then employees the SAML connection provisioned.
    for u in users[:40]:
        member(employees, u["user_id"], "user", "tenant")
    for n in range(BIG_GROUP_MEMBERS - 40):
        member(employees, f"samlp|acme-saml|employee{n:05d}@acme.example", "user", "connection", saml)
    for u in users[1:25]:
        member(engineering, u["user_id"], "user", "connection", db)
    for u in users[25:40]:
        member(support, u["user_id"], "user", "tenant")
    member(support, engineering["id"], "group", "tenant")
    for u in users[:3]:
        member(admins, u["user_id"], "user", "organization")

    sessions = []

    def session(user, n):
        created = BASE + timedelta(days=10, minutes=n * 37 + rng.below(30))
        authenticated = created + timedelta(seconds=rng.below(5))
        updated = created + timedelta(minutes=rng.below(600))
        ip = f"198.51.100.{1 + rng.below(254)}"
        last_ip = ip if rng.below(3) else f"203.0.113.{1 + rng.below(254)}"
        agent = rng.choice(AGENTS)
        methods = [{"name": "pwd", "timestamp": ts(authenticated), "type": "password"}]
        if rng.below(4) == 0:
            methods.append({"name": "mfa", "timestamp": ts(authenticated + timedelta(seconds=20)),
                            "type": "otp"})
        s = {
            "id": rng.chars(ALNUM, 32),
            "user_id": user["user_id"],
            "created_at": ts(created),
            "updated_at": ts(updated),
            "authenticated_at": ts(authenticated),
            "idle_expires_at": ts(updated + timedelta(days=3)),
            "expires_at": ts(created + timedelta(days=30)),
            "last_interacted_at": ts(updated),
            "device": {"initial_user_agent": agent, "initial_ip": ip,
                       "initial_asn": rng.choice(ASNS), "last_user_agent": agent,
                       "last_ip": last_ip, "last_asn": rng.choice(ASNS)},
            "clients": [{"client_id": rng.choice(CLIENTS)}],
            "authentication": {"methods": methods},
            "cookie": {"mode": "persistent" if rng.below(5) else "non-persistent"},
            "session_metadata": {"source": "import", "region": rng.choice(["eu", "us", "ap"])},
        }
        sessions.append(s)

    for n in range(HEAVY_USER_SESSIONS):
        session(users[0], n)
    n = HEAVY_USER_SESSIONS
    while len(sessions) < HEAVY_USER_SESSIONS + 100:
        session(users[1 + (n % 49)], n)
        n += 1

    data = {"connections": connections, "users": users, "groups": groups, "members": members,
            "sessions": sessions}
    # One record a line: small diffs, easy to grep.
    parts = []
    for key, records in data.items():
        body = ",\n".join("  " + json.dumps(r, separators=(", ", ": ")) for r in records)
        parts.append(f'"{key}": [\n{body}\n]')
    text = "{\n" + ",\n".join(parts) + "\n}\n"
    json.loads(text)  # well-formed

    if "--check" in sys.argv[1:]:
        if OUT.read_text() != text:
            sys.exit(f"{OUT} is stale: run python3 {Path(__file__).name}")
        return
    OUT.write_text(text)
    print(f"wrote {OUT}: {len(connections)} connections, {len(users)} users, {len(groups)} groups, "
          f"{len(members)} members, {len(sessions)} sessions")


if __name__ == "__main__":
    main()
