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


def png_of_type(colour_type: int, bit_depth: int, width: int = 1536, height: int = 969) -> bytes:
    """A valid PNG of any legal colour type and bit depth: horizontal bands, a palette for type 3."""
    samples = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour_type]
    row_bytes = (width * samples * bit_depth + 7) // 8
    rows = b"".join(b"\x00" + bytes([(y // 97) * 17 % 256]) * row_bytes for y in range(height))
    palette = chunk(b"PLTE", bytes(range(0, 48))) if colour_type == 3 else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0))
            + palette + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def pdf_of(objects: list) -> bytes:
    """Objects 1, 2, … with a correct cross-reference table; object 1 is the catalog."""
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


CONTENT = b"0.05 0.2 0.45 rg 0 0 1536 969 re f"
CONTENT_STREAM = b"<< /Length %d >>\nstream\n" % len(CONTENT) + CONTENT + b"\nendstream"


def pdf(media_box: str) -> bytes:
    return pdf_of([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                   b"<< /Type /Page /Parent 2 0 R /MediaBox " + media_box.encode() + b" /Resources << >> /Contents 4 0 R >>",
                   CONTENT_STREAM])


put("card-art", "apple-size.png", png(1536, 969))
put("card-art", "small.png", png(3, 2))
put("card-art", "landscape.pdf", pdf("[0 0 1536 969]"))
put("card-art", "portrait.pdf", pdf("[0 0 969 1536]"))
for colour_type, bit_depth in [(0, 1), (0, 16), (2, 8), (3, 4), (4, 8), (6, 16)]:
    put("card-art", f"type{colour_type}-depth{bit_depth}.png", png_of_type(colour_type, bit_depth))
put("card-art", "two-level-tree.pdf", pdf_of([
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Pages /Parent 2 0 R /Kids [4 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 1536 969] /Resources << >> /Contents 5 0 R >>",
    CONTENT_STREAM]))
put("card-art", "inherited-box-and-rotate.pdf", pdf_of([
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [0 0 3072 1938] /Rotate 0 >>",
    b"<< /Type /Pages /Parent 2 0 R /Kids 5 0 R /Count 1 /CropBox [0 0 1536 969] >>",
    b"<< /Type /Page /Parent 3 0 R /Resources << >> /Contents 6 0 R >>",
    b"[4 0 R]",
    CONTENT_STREAM]))

for name, text in [("time", "2026-11-22T11:50:00.123Z"), ("time-offset", "2026-11-22t12:50:00.123456+01:00"), ("expiration", "12/29"),
                   ("pan", "4111111111111111"), ("identifier", "card-001"), ("message", "no card 4111111111111111 (order 1234567890)"),
                   ("grouped", "cards 4111 1111 1111 1111 and 3782-822463-10005 at 2026-11-22 1234-5678")]:
    put("text", name, text.encode())
