"""Writes the starting inputs of the fuzz targets (scripts/fuzz.sh) into the directory given:
<dir>/flat-json, <dir>/card-art and <dir>/text, one file per input."""
import base64
import json
import os
import struct
import sys
import zlib

root = sys.argv[1]


def put(target: str, name: str, data: bytes) -> None:
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), "wb") as out:
        out.write(data)


# Request bodies as the app sends them (JSONEncoder writes "/" as "\/"), and plain.
certificates = [base64.b64encode(bytes((i * 7) % 256 for i in range(90))).decode(), base64.b64encode(b"\x30\x82\x01\x0a" + bytes(40)).decode()]
signed = {"externalCardId": "card-1", "walletType": "APPLE_PAY", "deviceType": "WATCH", "certificates": certificates,
          "nonce": base64.b64encode(b"nonce-0123456789").decode(), "nonceSignature": base64.b64encode(bytes(range(64))).decode()}
search = {"walletType": "APPLE_PAY", "tokenUniqueReferences": [f"DNITHE{i}" for i in range(3)]}
put("flat-json", "signed-cards", json.dumps(signed, separators=(",", ":")).replace("/", "\\/").encode())
put("flat-json", "signed-cards-spaced", json.dumps(signed, indent=2).encode())
put("flat-json", "search", json.dumps(search, separators=(",", ":")).encode())
put("flat-json", "base64", base64.b64encode(bytes(range(40))))


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png(width: int, height: int) -> bytes:
    row = b"\x00" + bytes((20, 60, 140)) * width
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height, 9)) + chunk(b"IEND", b""))


def pdf(media_box: str) -> bytes:
    content = b"0.05 0.2 0.45 rg 0 0 1536 969 re f"
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox " + media_box.encode() + b" /Resources << >> /Contents 4 0 R >>",
               b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


put("card-art", "apple-size.png", png(1536, 969))
put("card-art", "small.png", png(3, 2))
put("card-art", "landscape.pdf", pdf("[0 0 1536 969]"))
put("card-art", "portrait.pdf", pdf("[0 0 969 1536]"))

for name, text in [("time", "2026-11-22T11:50:00.123Z"), ("time-offset", "2026-11-22t12:50:00.123456+01:00"), ("expiration", "12/29"),
                   ("pan", "4111111111111111"), ("identifier", "card-001"), ("message", "no card 4111111111111111 (order 1234567890)"),
                   ("grouped", "cards 4111 1111 1111 1111 and 3782-822463-10005 at 2026-11-22 1234-5678")]:
    put("text", name, text.encode())
