#!/usr/bin/env python3
"""Writes ed25519-vectors.json: test vectors of doclog's signed actions made
without doclog's code, so the Go package is checked against an independent
implementation of the canonical form (RFC 8785, written out below) and of
Ed25519 (libsodium, through PyNaCl).

Run it with PyNaCl installed (pip install pynacl) from this directory:

    python3 gen_vectors.py > ed25519-vectors.json

The seeds are fixed, and Ed25519 signatures are deterministic, so a run
writes the same file every time.
"""

import base64
import json
import math
import sys
from decimal import Decimal

import nacl.signing

PURPOSE = "doclog.action-signature.v1"


def es_number(f):
    """A double as ECMAScript's Number.prototype.toString writes it (RFC 8785
    section 3.2.2.3)."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError("no JSON form")
    if f == 0:
        return "0"
    if f < 0:
        return "-" + es_number(-f)
    # repr gives the shortest digits that round-trip, as ECMAScript asks;
    # Decimal splits them from the exponent.
    t = Decimal(repr(f)).as_tuple()
    digits = "".join(map(str, t.digits)).lstrip("0")
    exp = t.exponent + (len(t.digits) - len("".join(map(str, t.digits)).rstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    n = k + exp  # the decimal point sits n digits from the left
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    if k == 1:
        return digits + "e" + sign + str(abs(e))
    return digits[0] + "." + digits[1:] + "e" + sign + str(abs(e))


ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def es_string(s):
    """A string as RFC 8785 writes it: the two-character escapes, \\u00xx for
    the other control characters, everything else as it is."""
    out = ['"']
    for ch in s:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canonical(v):
    """RFC 8785 canonical JSON of a value as json.loads returns it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        if abs(v) > 2**53 - 1:
            raise ValueError("integer beyond 2^53-1")
        return es_number(float(v))
    if isinstance(v, float):
        return es_number(v)
    if isinstance(v, str):
        return es_string(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(e) for e in v) + "]"
    if isinstance(v, dict):
        # Members sorted by the UTF-16 code units of their names.
        keys = sorted(v, key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(es_string(k) + ":" + canonical(v[k]) for k in keys) + "}"
    raise TypeError(type(v))


def signed_form(doc_id, doc_type, action):
    return {
        "purpose": PURPOSE,
        "documentId": doc_id,
        "documentType": doc_type,
        "action": {
            "id": action["id"],
            "type": action["type"],
            "scope": action["scope"],
            "timestampUtcMs": action["timestampUtcMs"],
            "input": action.get("input"),
        },
    }


CASES = [
    {
        "name": "ledger entry",
        "seed": bytes(range(32)),
        "keyId": "till-7",
        "documentId": "ledger-2026-q4",
        "documentType": "doclog/ledger",
        "branch": "main",
        "action": {"id": "01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e01", "type": "ADD_ENTRY", "scope": "global",
                   "timestampUtcMs": 1764460800000, "input": {"memo": "tea", "amount": 12}},
    },
    {
        "name": "no input, a context left out",
        "seed": bytes([0x9d] * 32),
        "keyId": "editor@example.org",
        "documentId": "note-1",
        "documentType": "doclog/json",
        "action": {"id": "a-2", "type": "SET_NAME", "scope": "document", "timestampUtcMs": 0,
                   "context": {"user": "ana", "traceId": "4bf92f3577b34da6"}},
    },
    {
        "name": "text and numbers canonicalized",
        "seed": bytes.fromhex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"),
        "keyId": "k/2026-12",
        "documentId": "doc \"quoted\" \u00e9",
        "documentType": "acme/inventory",
        "branch": "feature/x",
        "action": {"id": "\u00e9t\u00e9", "type": "SET", "scope": "local", "timestampUtcMs": 9007199254740991,
                   "input": {"z": [1.0, 2.5, -0.0, 1e21, 1e-7, 0.000001, 123456789012, 4.35, 3e-100],
                             "\u00e9": "tab\tnew\nline\u0001\u007f\\\u2028",
                             "\U0001F600": "astral sorts before U+FB01 in UTF-16",
                             "\ufb01": True, "a": None, "": {"b": [], "a": {}}}},
    },
]


def main():
    vectors = []
    for c in CASES:
        key = nacl.signing.SigningKey(c["seed"])
        form = canonical(signed_form(c["documentId"], c["documentType"], c["action"]))
        msg = form.encode("utf-8")
        sig = key.sign(msg).signature
        key.verify_key.verify(msg, sig)
        action = dict(c["action"])
        action["signature"] = {"keyId": c["keyId"], "algorithm": "ed25519", "value": base64.b64encode(sig).decode()}
        v = {
            "name": c["name"],
            "seed": c["seed"].hex(),
            "publicKey": base64.b64encode(bytes(key.verify_key)).decode(),
            "keyId": c["keyId"],
            "documentId": c["documentId"],
            "documentType": c["documentType"],
        }
        if "branch" in c:
            v["branch"] = c["branch"]
        v["action"] = action
        v["canonical"] = form
        v["canonicalBase64"] = base64.b64encode(msg).decode()
        v["signature"] = action["signature"]["value"]
        vectors.append(v)
    out = {
        "description": "Signed actions (doclog.action-signature.v1): for each vector, the Ed25519 key pair from its seed (RFC 8032), the canonical form of the action (RFC 8785 canonical JSON, UTF-8; canonicalBase64 holds its exact bytes) and its signature. branch, where given, is the branch of the job carrying the action, which the signature does not cover. Made by gen_vectors.py with libsodium; the signing package's tests reproduce every byte.",
        "purpose": PURPOSE,
        "vectors": vectors,
    }
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
