"""A stand-in for a browser's push service (RFC 8030), for tests/it/push.rs.

It plays the browser's side too: it makes the subscription's keys (P-256 and a
16-byte auth secret) as a browser does, prints them, and then reads every push it
takes with code hitl does not share: the body decrypted by http_ece (RFC 8291's
aes128gcm), the VAPID JWT (RFC 8292) checked with cryptography's ECDSA. Each push
is printed as one line of JSON. A path under /gone/ answers 410, as a service does
for a subscription that has ended; anything else 201.
"""

import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


browser_key = ec.generate_private_key(ec.SECP256R1())
auth_secret = bytes(range(16))
p256dh = browser_key.public_key().public_bytes(
    serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
)
out_lock = threading.Lock()


def check_vapid(header: str, origin: str) -> dict:
    """RFC 8292: `vapid t=JWT, k=KEY`, the JWT's ES256 signature under KEY."""
    if not header.startswith("vapid "):
        return {"verified": False, "why": f"not a vapid scheme: {header[:20]!r}"}
    params = dict(
        part.strip().split("=", 1) for part in header[len("vapid "):].split(",")
    )
    token, key = params["t"], params["k"]
    head, claims, signature = token.split(".")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(key))
    sig = unb64(signature)
    der = encode_dss_signature(
        int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
    )
    try:
        public.verify(der, f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
        verified = True
    except InvalidSignature:
        verified = False
    claims = json.loads(unb64(claims))
    now = time.time()
    return {
        "verified": verified,
        "header": json.loads(unb64(head)),
        "claims": claims,
        "k": key,
        "aud_ok": claims.get("aud") == origin,
        "exp_ok": now < claims.get("exp", 0) <= now + 24 * 3600,
        "sub_ok": str(claims.get("sub", "")).startswith(("mailto:", "https:")),
    }


class Service(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        origin = f"http://127.0.0.1:{self.server.server_port}"
        seen = {
            "path": self.path,
            "content_encoding": self.headers.get("content-encoding"),
            "content_type": self.headers.get("content-type"),
            "ttl": self.headers.get("ttl"),
            "urgency": self.headers.get("urgency"),
            "topic": self.headers.get("topic"),
            "size": len(body),
        }
        try:
            plain = http_ece.decrypt(
                body,
                private_key=browser_key,
                auth_secret=auth_secret,
                version="aes128gcm",
            )
            seen["message"] = json.loads(plain)
        except Exception as e:  # the test reads why
            seen["decrypt_error"] = repr(e)
        try:
            seen["vapid"] = check_vapid(self.headers.get("authorization", ""), origin)
        except Exception as e:
            seen["vapid"] = {"verified": False, "why": repr(e)}
        gone = self.path.startswith("/gone/")
        self.send_response(410 if gone else 201)
        self.send_header("content-length", "0")
        self.end_headers()
        with out_lock:
            print(json.dumps(seen), flush=True)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Service)
print(
    json.dumps({"port": server.server_port, "p256dh": b64(p256dh), "auth": b64(auth_secret)}),
    flush=True,
)
threading.Thread(target=server.serve_forever, daemon=True).start()
# Until the test closes our stdin.
sys.stdin.read()
