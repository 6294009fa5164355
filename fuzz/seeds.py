#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/TARGET/NAME), from the project's own
test data and from ClientHellos made here by Python's ssl module (OpenSSL). Run from the
repository root: python3 fuzz/seeds.py. The files are committed; libFuzzer adds its own inputs
beside them (ignored by git)."""
import json
import os
import random
import ssl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def client_hellos():
    """The first flight of an OpenSSL client: a ClientHello record, with and without SNI/ALPN."""
    for name, sni, alpn, maximum in [
        ("tls13-sni-alpn", "example.com", ["h2", "http/1.1"], ssl.TLSVersion.TLSv1_3),
        ("tls12-sni", "api.example.com", None, ssl.TLSVersion.TLSv1_2),
        ("tls13-no-sni", None, ["http/1.1"], ssl.TLSVersion.TLSv1_3),
    ]:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.maximum_version = maximum
        if alpn:
            context.set_alpn_protocols(alpn)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(incoming, outgoing, server_hostname=sni)
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        record = outgoing.read()
        # The first byte is the segment size the reader is fed in (0: one segment).
        write("client_hello", name, bytes([0]) + record)
        write("client_hello", name + "-segments-of-7", bytes([7]) + record)


def validation_bodies():
    folder = os.path.join(ROOT, "testdata", "validation")
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".json"):
            continue
        with open(os.path.join(folder, file)) as f:
            cases = json.load(f)
        for index, case in enumerate(cases[:12]):
            write("bodies", f"{file[:-5]}-{index}", json.dumps(case["body"]))
    extra = {
        "branding": {"colors": {"primary": "#0059d6", "page_background": {"type": "linear-gradient", "start": "#fff", "end": "#000", "angle_deg": 45}}, "favicon_url": "https://example.com/f.ico", "logo_url": "https://example.com/l.png", "font": {"url": "https://example.com/f.woff"}},
        "organization": {"name": "acme", "display_name": "Acme", "branding": {"logo_url": "https://example.com/l.png", "colors": {"primary": "#000000", "page_background": "#ffffff"}}, "metadata": {"tier": "gold"}, "enabled_connections": [{"connection_id": "con_0123456789abcdef", "assign_membership_on_login": True}]},
        "organization-connection": {"connection_id": "con_0123456789abcdef", "assign_membership_on_login": False, "show_as_button": True, "is_signup_enabled": False, "is_enabled": True, "organization_connection_name": "acme", "organization_access_level": "full"},
        "directory": {"users": [{"user_id": "auth0|1", "email": "a@example.com", "connection": "Username-Password-Authentication"}], "groups": [], "connections": []},
        "managed-list": {"items": ["10.0.0.0/8", "2001:db8::/32", "e7d705a3286e19ea42f587b344ee6865", "t13d1516h2_8daaf6152771_b186095e22b6"]},
        "network-acl-key": {"name": "edge-proxy", "alg": "hmac-sha256", "value": "c2VjcmV0LWtleS1tYXRlcmlhbC0wMTIzNDU2Nzg5YWJjZGVm"},
        "rule-file": {"network_acls": [{"id": "acl_2ZbGfPu9TCHmbkDc8Qv3rL", "description": "", "active": True, "priority": 1, "rule": {"action": {"redirect": True, "redirect_uri": "https://example.com/x"}, "scope": "management", "match_all": True}}]},
    }
    for name, body in extra.items():
        write("bodies", name, json.dumps(body))


def request_lines():
    lines = [
        '{"path": "/api/v2/users", "client_ip": "198.51.100.7", "asn": 64500}',
        '{"scope":"management","client_ip":"2001:db8::1","connecting_ip":"[::1]","country":"US","subdivision":"US-NY","ja3":"e7d705a3286e19ea42f587b344ee6865","ja4":"t13d1516h2_8daaf6152771_b186095e22b6","user_agent":"curl/8.0","hostname":"a.example.com"}',
        '{"user_agent": "caf\\u00e9 \\"x\\"", "asn": null}',
        '  {"asn": 4294967295}  ',
        '{"asn": 1e3}',
        '["management",null,"198.51.100.7"]',
        '{}',
    ]
    for index, line in enumerate(lines):
        write("request_line", f"line-{index}", line)


def forwarded():
    # First byte: bit 0 the header (0 X-Forwarded-For, 1 Forwarded), bits 1-2 the peer.
    headers = [
        (0, "203.0.113.9, 10.1.1.1"),
        (0, "café, 203.0.113.5\n10.0.0.3"),
        (0, "[2001:db8::7]:443, unknown"),
        (1, 'for=198.51.100.1;proto=https, for="[2001:db8::1]:4711"'),
        (1, 'for=", for=203.0.113.5'),
        (3, 'for=_hidden;by=10.0.0.1, for="\\[2001:db8::9\\]"'),
    ]
    for index, (control, text) in enumerate(headers):
        write("forwarded", f"header-{index}", bytes([control]) + text.encode())


def paths():
    for index, path in enumerate([
        "/api/v2/users", "/api/v2//../users", "/%%361pi/v2/users", "/%61pi/v2/users?x=/a",
        "/api\\v2\\users", "/api/v2/users;jsessionid=1", "/a/./b/../../api/v2/%2e%2e/v2/x",
        "/oauth/token", "/authorize?redirect_uri=/api/v2", "/%2Fapi/v2", "/caf%C3%A9/%E2%82%AC",
    ]):
        write("paths", f"path-{index}", path)


def forms():
    for index, form in enumerate([
        "description=edge+block&active=true&priority=7&rule[action][block]=true&rule[scope]=tenant"
        "&rule[match][ipv4_cidrs][]=192.0.2.0%2F24&rule[not_match][asns][]=64500",
        "description=x&active=false&rule=%7B%22action%22%3A%7B%22log%22%3Atrue%7D%7D",
        "colors[primary]=%23fff&colors[page_background][type]=linear-gradient&colors[page_background][angle_deg]=45",
        "name=acme&branding[colors][primary]=%23000&metadata[tier]=gold&enabled_connections=%5B%5D",
        "connection_id=con_1&is_enabled=true&show_as_button=false",
        "items[]=10.0.0.0%2F8&items[]=2001:db8::%2F32",
        "items=%5B%22192.0.2.1%22%5D",
    ]):
        write("form_body", f"form-{index}", form)


def evaluator():
    rng = random.Random(11)
    for index in range(8):
        write("evaluator", f"random-{index}", bytes(rng.randrange(256) for _ in range(96 + 64 * index)))


def maxmind():
    for name in ["netacl-test-asn.mmdb", "netacl-test-city.mmdb"]:
        with open(os.path.join(ROOT, "testdata", "mmdb", name), "rb") as f:
            write("maxmind", name, f.read())


def spoe_frames():
    """What HAProxy sends an SPOE agent: HAPROXY-HELLO then NOTIFY frames (SPOP 2.0), read whole
    (first byte 0) or in 7-byte reads."""

    def varint(n):
        # HAProxy's encoding: below 240 one byte; else 4 bits in the first, then 7-bit groups.
        if n < 240:
            return bytes([n])
        out = [0xF0 | (n & 0x0F)]
        n = (n - 240) >> 4
        while n >= 128:
            out.append(0x80 | (n & 0x7F))
            n = (n - 128) >> 7
        out.append(n)
        return bytes(out)

    def string(x):
        x = x.encode()
        return bytes([8]) + varint(len(x)) + x

    def kv(key, value):
        return varint(len(key)) + key.encode() + value

    def frame(kind, stream, frame_id, payload):
        body = bytes([kind]) + (1).to_bytes(4, "big") + varint(stream) + varint(frame_id) + payload
        return len(body).to_bytes(4, "big") + body

    hello = frame(1, 0, 0, kv("supported-versions", string("2.0"))
                  + kv("max-frame-size", bytes([3]) + varint(1000))
                  + kv("capabilities", string("pipelining")))
    args = [
        ("src", bytes([6, 192, 0, 2, 7])),
        ("method", string("GET")),
        ("host", string("app.example.test")),
        ("path", string("/authorize?x=1")),
        ("ua", string("curl/8")),
        ("hello_version", bytes([3]) + varint(771)),
        ("ciphers", bytes([9, 4, 0x13, 1, 0x13, 2])),
    ]
    name = b"netacl-request"
    message = varint(len(name)) + name + bytes([len(args)]) + b"".join(kv(k, v) for k, v in args)
    notify = frame(3, 1, 1, message)
    write("spoe_frames", "hello-notify", b"\x00" + hello + notify)
    write("spoe_frames", "hello-notify-in-7-byte-reads", b"\x07" + hello + notify + notify)


def check_requests():
    """Envoy's ext_authz CheckRequest, protobuf-encoded as in a gRPC frame: an HTTP request from
    an IPv4 and an IPv6 client, with headers and a TLS session."""

    def varint(n):
        out = bytearray()
        while True:
            byte = n & 0x7F
            n >>= 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def field(number, payload):
        if isinstance(payload, str):
            payload = payload.encode()
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def check(source, host, path, headers):
        socket_address = field(2, source)
        peer = field(1, field(1, socket_address))
        header_entries = b"".join(field(3, field(1, k) + field(2, v)) for k, v in headers)
        http = field(2, "GET") + header_entries + field(4, path) + field(5, host) + field(6, "https")
        attributes = field(1, peer) + field(4, field(2, http)) + field(12, field(1, host))
        return field(1, attributes)

    write("check_request", "ipv4-with-headers", check("192.0.2.7", "app.example.test", "/authorize?x=1",
                                                      [("user-agent", "curl/8"), ("x-forwarded-for", "198.51.100.9")]))
    write("check_request", "ipv6", check("2001:db8::7", "app.example.test", "/", []))


client_hellos()
validation_bodies()
request_lines()
forwarded()
paths()
forms()
evaluator()
maxmind()
spoe_frames()
check_requests()
