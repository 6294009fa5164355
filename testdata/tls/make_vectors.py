#!/usr/bin/env python3
"""Builds the project's own ClientHello vectors (own-vectors.jsonl) and their expected JA3/JA4.

The expected fingerprints are computed here, from the fields each ClientHello is built from,
by an implementation independent of the Rust parser: the Rust tests parse the bytes and must
arrive at the same values. Run from anywhere: `python3 testdata/tls/make_vectors.py`.
"""
import hashlib
import json
import os

GREASE = [0x0A0A + 0x1010 * i for i in range(16)]


def u8(v):
    return bytes([v])


def u16(v):
    return v.to_bytes(2, "big")


def vec8(b):
    return u8(len(b)) + b


def vec16(b):
    return u16(len(b)) + b


def ext_sni(name):
    return (0x0000, vec16(u8(0) + vec16(name.encode())))


def ext_alpn(values):
    return (0x0010, vec16(b"".join(vec8(v) for v in values)))


def ext_groups(groups):
    return (0x000A, vec16(b"".join(u16(g) for g in groups)))


def ext_point_formats(formats):
    return (0x000B, vec8(bytes(formats)))


def ext_sigalgs(algs):
    return (0x000D, vec16(b"".join(u16(a) for a in algs)))


def ext_versions(versions):
    return (0x002B, vec8(b"".join(u16(v) for v in versions)))


def ext_raw(kind, data=b""):
    return (kind, data)


class Hello:
    def __init__(self, legacy_version, ciphers, extensions, session_id=b"", with_ext_block=True):
        self.legacy_version = legacy_version
        self.ciphers = ciphers
        self.extensions = extensions  # list of (kind, data)
        self.session_id = session_id
        self.with_ext_block = with_ext_block

    def body(self):
        out = u16(self.legacy_version) + bytes(range(32)) + vec8(self.session_id)
        out += vec16(b"".join(u16(c) for c in self.ciphers)) + vec8(b"\x00")
        if self.with_ext_block:
            out += vec16(b"".join(u16(k) + vec16(d) for k, d in self.extensions))
        return out

    def handshake(self):
        body = self.body()
        return u8(1) + len(body).to_bytes(3, "big") + body

    def records(self, split=None, record_version=0x0301):
        """The handshake in records; `split` lists fragment sizes (the rest goes last)."""
        hs = self.handshake()
        frags = []
        for size in split or []:
            frags.append(hs[:size])
            hs = hs[size:]
        frags.append(hs)
        return b"".join(u8(22) + u16(record_version) + vec16(f) for f in frags)

    # --- the oracle: fingerprints from the fields, not from the bytes ---
    def kinds(self):
        return [k for k, _ in self.extensions]

    def field(self, kind):
        for k, d in self.extensions:
            if k == kind:
                return d
        return None

    def groups(self):
        d = self.field(0x000A)
        if d is None:
            return []
        return [int.from_bytes(d[i:i + 2], "big") for i in range(2, len(d), 2)]

    def point_formats(self):
        d = self.field(0x000B)
        return [] if d is None else list(d[1:])

    def sigalgs(self):
        d = self.field(0x000D)
        if d is None:
            return []
        return [int.from_bytes(d[i:i + 2], "big") for i in range(2, len(d), 2)]

    def versions(self):
        d = self.field(0x002B)
        if d is None:
            return None
        return [int.from_bytes(d[i:i + 2], "big") for i in range(1, len(d), 2)]

    def alpn_first(self):
        d = self.field(0x0010)
        if d is None or len(d) < 3:
            return None
        n = d[2]
        return d[3:3 + n]

    def sni(self):
        d = self.field(0x0000)
        if not d:
            return None
        n = int.from_bytes(d[3:5], "big")
        return d[5:5 + n].decode()

    def ja3_string(self):
        def join(vals):
            return "-".join(str(v) for v in vals if v not in GREASE)
        return ",".join([
            str(self.legacy_version), join(self.ciphers), join(self.kinds()),
            join(self.groups()), "-".join(str(v) for v in self.point_formats()),
        ])

    def ja4(self):
        versions = self.versions()
        version = self.legacy_version
        if versions is not None:
            real = [v for v in versions if v not in GREASE]
            if real:
                version = max(real)
        vcode = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3",
                 0x0002: "s2", 0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}.get(version, "00")
        ciphers = [c for c in self.ciphers if c not in GREASE]
        exts = [e for e in self.kinds() if e not in GREASE]
        alpn = self.alpn_first()
        if not alpn:
            a = "00"
        elif chr(alpn[0]).isascii() and chr(alpn[0]).isalnum() and chr(alpn[-1]).isascii() and chr(alpn[-1]).isalnum():
            a = chr(alpn[0]) + chr(alpn[-1])
        else:
            a = alpn.hex()[0] + alpn.hex()[-1]
        head = "t%s%s%02d%02d%s" % (vcode, "d" if 0 in exts else "i", min(len(ciphers), 99),
                                    min(len(exts), 99), a)

        def h(s):
            return hashlib.sha256(s.encode()).hexdigest()[:12]
        b = h(",".join("%04x" % c for c in sorted(ciphers))) if ciphers else "000000000000"
        rest = sorted(e for e in exts if e not in (0x0000, 0x0010))
        sig = [s for s in self.sigalgs() if s not in GREASE]
        text = ",".join("%04x" % e for e in rest)
        if sig:
            text += "_" + ",".join("%04x" % s for s in sig)
        c = h(text) if rest else "000000000000"
        return "%s_%s_%s" % (head, b, c)


CHROME_CIPHERS = [0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8,
                  0xC013, 0xC014, 0x009C, 0x009D, 0x002F, 0x0035]
SIGALGS = [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601]


def tls13(sni="example.com", alpn=(b"h2", b"http/1.1"), grease=False, sigalgs=SIGALGS):
    ciphers = ([0x3A3A] if grease else []) + CHROME_CIPHERS
    exts = []
    if grease:
        exts.append(ext_raw(0xDADA))
    if sni is not None:
        exts.append(ext_sni(sni))
    exts += [ext_raw(0x0017), ext_raw(0xFF01, b"\x00"),
             ext_groups(([0x8A8A] if grease else []) + [0x001D, 0x0017, 0x0018]),
             ext_point_formats([0]), ext_raw(0x0023)]
    if alpn is not None:
        exts.append(ext_alpn(list(alpn)))
    exts += [ext_raw(0x0005, b"\x01\x00\x00\x00\x00")]
    if sigalgs is not None:
        exts.append(ext_sigalgs(([0x0A0A] if grease else []) + sigalgs))
    exts += [ext_raw(0x0012), ext_raw(0x0033, vec16(u16(0x001D) + vec16(bytes(32)))),
             ext_raw(0x002D, b"\x01\x01"),
             ext_versions(([0x7A7A] if grease else []) + [0x0304, 0x0303])]
    if grease:
        exts.append(ext_raw(0x4A4A, b"\x00"))
    return Hello(0x0303, ciphers, exts, session_id=bytes(32))


def tls12_only():
    exts = [ext_sni("legacy.example"), ext_raw(0xFF01, b"\x00"),
            ext_groups([0x0017, 0x0018, 0x0019]), ext_point_formats([0, 1, 2]),
            ext_raw(0x0023), ext_alpn([b"http/1.1"]), ext_sigalgs([0x0401, 0x0501, 0x0201])]
    return Hello(0x0303, [0xC02F, 0xC030, 0x009E, 0x00FF], exts)


def published_ja3():
    # The published JA3 example: 769,47-53-5-10-49161-49162-49171-49172-50-56-19-4,0-10-11,23-24-25,0
    exts = [ext_sni("ja3.example"), ext_groups([23, 24, 25]), ext_point_formats([0])]
    return Hello(0x0301, [47, 53, 5, 10, 49161, 49162, 49171, 49172, 50, 56, 19, 4], exts)


VECTORS = [
    ("tls13_grease", "TLS 1.3 with GREASE in ciphers, extensions, groups, signature algorithms "
     "and supported_versions", tls13(grease=True), None),
    ("tls13_no_grease", "the same client without GREASE: same JA4, same JA3",
     tls13(grease=False), None),
    ("tls13_no_sni", "TLS 1.3 to an IP address: no server_name", tls13(sni=None), None),
    ("tls13_no_alpn", "TLS 1.3 without ALPN", tls13(alpn=None), None),
    ("tls13_empty_first_alpn", "ALPN whose first value is empty", tls13(alpn=(b"", b"h2")), None),
    ("tls13_non_alnum_alpn", "ALPN bytes outside [0-9A-Za-z]: hex digits",
     tls13(alpn=(b"\xab\x01\xcd",)), None),
    ("tls13_single_char_alpn", "one-character ALPN", tls13(alpn=(b"x",)), None),
    ("tls13_no_sigalgs", "no signature_algorithms: no second underscore part",
     tls13(sigalgs=None), None),
    ("tls12_only", "TLS 1.2 only, no supported_versions", tls12_only(), None),
    ("tls13_fragmented", "the GREASE client split over four records (1, 3, 100 bytes, rest)",
     tls13(grease=True), [1, 3, 100]),
    ("tls12_fragmented_tiny", "the TLS 1.2 client split in 16-byte records", tls12_only(),
     [16] * 8),
    ("tls10_no_extensions", "TLS 1.0 with no extension block at all",
     Hello(0x0301, [0x002F, 0x0035, 0x000A], [], with_ext_block=False), None),
    ("tls10_empty_extensions", "TLS 1.0 with an empty extension block",
     Hello(0x0301, [0x002F], []), None),
    ("ssl3", "SSL 3.0", Hello(0x0300, [0x000A, 0x0005], [], with_ext_block=False), None),
    ("no_ciphers", "no cipher suites at all", Hello(0x0303, [], [ext_sni("x.example")]), None),
    ("many_ciphers", "120 cipher suites: the count caps at 99",
     Hello(0x0303, list(range(0x0100, 0x0100 + 120)), [ext_sni("x.example")]), None),
    ("published_ja3", "the published JA3 example client", published_ja3(), None),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "own-vectors.jsonl"), "w") as out:
        for name, description, hello, split in VECTORS:
            record = hello.records(split)
            ja3_string = hello.ja3_string()
            row = {
                "name": name,
                "description": description,
                "record_hex": record.hex(),
                "ja3_string": ja3_string,
                "ja3": hashlib.md5(ja3_string.encode()).hexdigest(),
                "ja4": hello.ja4(),
                "sni": hello.sni(),
            }
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
