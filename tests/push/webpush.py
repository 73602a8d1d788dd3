#!/usr/bin/env python3
"""An independent reader of Shard's pushes, for the black-box tests.

`keys`: a browser's side of a subscription: prints {"p256dh", "auth",
"private"} (base64url), as a browser makes them (RFC 8291 section 3).

`open`: reads {"private", "auth", "vapid_public", "endpoint", "headers",
"body"} (body base64url) on stdin; checks the VAPID signature (RFC 8292)
with py-vapid's verifier and the claims (audience, expiry, contact), then
decrypts the body (aes128gcm, RFC 8188/8291) with http-ece and prints
{"payload": <the decrypted JSON>, "claims": <the JWT claims>}.

Written against the Python packages `http-ece` and `py-vapid`, not Shard's
own code: if both agree, the daemon speaks the standards.
"""

import base64
import json
import os
import sys
import time

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def keys() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    point = private.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    secret = private.private_numbers().private_value.to_bytes(32, "big")
    print(json.dumps({"p256dh": b64(point), "auth": b64(os.urandom(16)), "private": b64(secret)}))


def open_push() -> None:
    given = json.load(sys.stdin)
    headers = {name.lower(): value for name, value in given["headers"].items()}
    fail = lambda why: sys.exit(f"refused: {why}")

    authorization = headers.get("authorization", "")
    if not authorization.startswith("vapid "):
        fail(f"no VAPID authorization: {authorization!r}")
    fields = dict(
        part.strip().split("=", 1) for part in authorization[len("vapid "):].split(",")
    )
    if fields.get("k") != given["vapid_public"]:
        fail("the k= key is not the daemon's public key")
    token = fields["t"]
    try:
        verified = Vapid02.verify("vapid t={},k={}".format(token, fields["k"]))
    except Exception as error:  # a malformed token or key
        fail(f"the VAPID token does not verify: {error}")
    if not verified:
        fail("the VAPID signature does not verify")
    claims = json.loads(unb64(token.split(".")[1]))
    endpoint = given["endpoint"]
    audience = endpoint.split("/", 3)[0] + "//" + endpoint.split("/", 3)[2].split(":")[0]
    if claims.get("aud") != audience:
        fail(f"aud {claims.get('aud')!r} is not {audience!r}")
    if not (time.time() < claims.get("exp", 0) <= time.time() + 24 * 3600):
        fail(f"exp {claims.get('exp')} is not within a day")
    if not str(claims.get("sub", "")).startswith(("mailto:", "https://")):
        fail(f"sub {claims.get('sub')!r} is not a contact")
    if headers.get("content-encoding") != "aes128gcm":
        fail(f"content-encoding {headers.get('content-encoding')!r}")

    private = ec.derive_private_key(
        int.from_bytes(unb64(given["private"]), "big"), ec.SECP256R1()
    )
    body = unb64(given["body"])
    plain = http_ece.decrypt(
        body, private_key=private, auth_secret=unb64(given["auth"]), version="aes128gcm"
    )
    print(json.dumps({"payload": json.loads(plain), "claims": claims}))


if __name__ == "__main__":
    {"keys": keys, "open": open_push}[sys.argv[1]]()
