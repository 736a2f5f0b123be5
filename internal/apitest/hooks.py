"""Schemathesis hooks of the API contract test (contract_test.go).

schemathesis.toml lets a schema-valid request be answered 400, 413, 422 or
429, because a few refusals depend on what no static schema can say. This check
takes that leeway back for everything else: a schema-valid request may be
refused only with one of the codes below, so a document that allows what the
server refuses still fails the run.
"""

import json
import os
import re

import schemathesis

# What may refuse a request the document allows, by status.
#
# 400 invalid_parameter on cursor: a cursor is opaque; only one this API
#   returned is valid.
# 413: the limits on actions per job, an action's input, the encoded job
#   record and a request's body are configured per deployment
#   (docs/ingest.md); a load job's operations, each an action with its
#   origin's ids and hash, reach the body's limit long before their count's.
# 422: a document type, its actions, their scopes and their inputs are the
#   model registry's, which is not part of the document; and action ids
#   must be unique within a job, which JSON Schema cannot say of a property.
#   A load job's operations carry their actions under operations[i].action.
# 429 executor_lag: ingest's backpressure (docs/ingest.md), which depends on
#   how far behind the executors are, not on the request; a run submits jobs
#   as fast as it can, on a machine it shares with the executors. It must
#   carry a Retry-After in whole seconds.
#
# A consistency token is base64url-encoded JSON, which a string schema cannot
# describe either; rather than allow its refusal, before_call sends a valid
# token in place of every generated one.
ALLOWED = {
    400: {"invalid_parameter": re.compile(r"^cursor$")},
    413: {"too_many_actions": None, "input_too_large": None, "record_too_large": None, "body_too_large": None},
    429: {"executor_lag": None},
    422: {
        "unknown_document_type": re.compile(r"^documentType$"),
        "unknown_action": re.compile(r"^(actions\[\d+\]|operations\[\d+\]\.action)\.type$"),
        "invalid_scope": re.compile(r"^(actions\[\d+\]|operations\[\d+\]\.action)\.scope$"),
        "invalid_input": re.compile(r"^(actions\[\d+\]|operations\[\d+\]\.action)\.input(\..+)?$"),
        "invalid_field": re.compile(r"^(actions\[\d+\]|operations\[\d+\]\.action)\.id$"),
    },
}

# The read store's consistency token of the seeded example document
# (contract_test.go sets it).
CONSISTENCY_TOKEN = os.environ.get("CONTRACT_CONSISTENCY_TOKEN", "")


@schemathesis.check
def refused_only_for_what_the_document_cannot_say(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    allowed = ALLOWED.get(response.status_code)
    if allowed is None:
        return None  # positive_data_acceptance judges the other statuses
    try:
        error = json.loads(response.content)["error"]
        code, field = error["code"], error.get("field", "")
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"a {response.status_code} without the JSON error body: {response.content[:200]!r}")
    if code not in allowed:
        raise AssertionError(
            f"a schema-valid request was refused {response.status_code} {code} ({error.get('message')}): "
            "the document allows what the server refuses"
        )
    if response.status_code == 429:
        # Headers come with lowercased names and a list of values each.
        retry = response.headers.get("retry-after", [])
        if len(retry) != 1 or not re.fullmatch(r"[1-9][0-9]*", retry[0]):
            raise AssertionError(f"a 429 {code} without one Retry-After in whole seconds: {retry!r}")
    pattern = allowed[code]
    if pattern is not None and not pattern.match(field):
        raise AssertionError(
            f"a schema-valid request was refused {response.status_code} {code} on {field!r} ({error.get('message')}): "
            "the document allows what the server refuses"
        )
    return None


@schemathesis.hook
def before_call(ctx, case, kwargs):
    """Makes schema-valid requests meaningful and quick.

    The read store: a generated consistency token never decodes, so every
    schema-valid read carrying one would end in 400 before the handler's
    work; it gets the seeded document's token instead (the read waits for
    it, which the projections have reached already). Invalid requests keep
    their generated tokens.

    Ingest: a pending job's status with ?wait= is held open for the whole
    wait, up to the server's cap of 30s, and a generated wait is mostly
    long: a run would spend its time waiting. A schema-valid wait becomes
    50ms, which still takes the long-poll path; the parsing of every form of
    wait is the read store's to prove (it shares the parser and sends its
    waits as generated) and a Go test's. Invalid waits are sent as
    generated.
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    if isinstance(case.query, dict):
        if case.method == "GET" and case.path == "/v1/jobs/{id}" and "wait" in case.query:
            case.query["wait"] = "50ms"
        if "consistencyToken" in case.query:
            case.query["consistencyToken"] = CONSISTENCY_TOKEN
    if case.headers is not None and "X-Consistency-Token" in case.headers:
        case.headers["X-Consistency-Token"] = CONSISTENCY_TOKEN
