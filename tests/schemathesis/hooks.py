"""Schemathesis hooks of netacl's conformance run (tests/schemathesis/run.sh).

Every check stays on. The hooks narrow nothing the server is answerable for; they only drop
failures the document itself explains, and say so (each dropped failure is written to the file
in NETACL_ST_DROPPED and counted at the end of the run):

- ST202 (a schema-valid request refused) when the operation declares, in
  `x-netacl-refusals-beyond-schema`, a regular expression matching the 400's message: a rule no
  JSON Schema can state (a reference to another record of the body, a connection that must
  exist, an id used twice). Any other 400 still fails the run.
- ST201 (a schema-violating request accepted) for a form body whose violation never reached the
  server: a form cannot carry `null`, nor an empty object or array as a property or a member of
  one (schemathesis's `deepObject` serialiser leaves them out), so when what went over the wire
  is valid against the form schema, the server was right to accept it.
- ST302 (a created resource not found) for an organization's connection last removed through
  its other view: `/organizations/{id}/enabled_connections/{connection_id}` and
  `/organizations/{id}/connections/{connection_id}` are one set of rows under two paths (README,
  organizations; `crates/server/src/organization_connections.rs`), so a DELETE through either
  removes the connection from both, while schemathesis counts a DELETE only against its own
  path. The hooks follow the removals and re-adds of every (organization, connection) pair and
  drop the 404 only when the pair's last event was a removal.

It also caps the long poll's wait: a request with `since` and a `timeout_ms` that is absent (the
default is 25 s) or a valid value above 1000 is sent with `timeout_ms=1000`, in every phase, so
long polls cannot spend the run's time budget (nor trip the 10 s response-time check); the
bounds are still tested (out-of-range and non-integer values are sent as generated).
"""

import json
import os
import re

import jsonschema_rs
import schemathesis
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.openapi.checks import EnsureResourceAvailability, RejectedPositiveData

with open(os.environ["NETACL_OPENAPI_JSON"], encoding="utf-8") as document_file:
    DOCUMENT = json.load(document_file)

DROPPED_LOG = os.environ.get("NETACL_ST_DROPPED")
FORM = "application/x-www-form-urlencoded"
LONGEST_WAIT_MS = 1000


# The two views of an organization's connections: (collection path, record path).
CONNECTION_VIEWS = (
    ("/api/v2/organizations/{id}/enabled_connections",
     "/api/v2/organizations/{id}/enabled_connections/{connection_id}"),
    ("/api/v2/organizations/{id}/connections",
     "/api/v2/organizations/{id}/connections/{connection_id}"),
)
CONNECTION_RECORDS = {record for _, record in CONNECTION_VIEWS}
CONNECTION_COLLECTIONS = {collection for collection, _ in CONNECTION_VIEWS}
# (organization id, connection id) pairs whose last successful change was a removal.
REMOVED_CONNECTIONS = set()


def _operation(case):
    return DOCUMENT["paths"].get(case.operation.path, {}).get(case.operation.method.lower(), {})


def _dropped(kind, case, why):
    if DROPPED_LOG:
        with open(DROPPED_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"kind": kind, "operation": case.operation.label, "why": why}) + "\n")


def _wire_view(value, level=1):
    """What the form serialiser sends of `value` (a body, level 1): nulls are left out; an
    object or array that sends nothing (empty, or all of it left out) is left out at the first
    two levels (a `deepObject` property and its members) and sent as an empty string below."""
    def sent(item):
        if item is None:
            return None
        view = _wire_view(item, level + 1)
        if isinstance(view, (dict, list)) and not view:
            return None if level <= 2 else ""
        return view

    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            view = sent(item)
            if view is not None:
                out[key] = view
        return out
    if isinstance(value, list):
        return [view for view in map(sent, value) if view is not None]
    return value


def _form_schema_validator(case):
    media = _operation(case).get("requestBody", {}).get("content", {}).get(FORM)
    if not media:
        return None
    root = {"$ref": media["schema"]["$ref"], "components": DOCUMENT["components"]}
    return jsonschema_rs.validator_for(root)


@schemathesis.hook
def after_call(context, case, response):
    if not 200 <= response.status_code < 300:
        return
    method = case.operation.method.upper()
    path = case.operation.path
    params = case.path_parameters or {}
    if method == "DELETE" and path in CONNECTION_RECORDS:
        REMOVED_CONNECTIONS.add((params.get("id"), params.get("connection_id")))
    elif method == "POST" and path in CONNECTION_COLLECTIONS and isinstance(case.body, dict):
        REMOVED_CONNECTIONS.discard((params.get("id"), case.body.get("connection_id")))


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if isinstance(failure, EnsureResourceAvailability) and response.status_code == 404:
        params = case.path_parameters or {}
        pair = (params.get("id"), params.get("connection_id"))
        if case.operation.path in CONNECTION_RECORDS and pair in REMOVED_CONNECTIONS:
            _dropped("ST302", case, f"connection {pair[1]} of {pair[0]} was removed through its other view")
            return False
        return True
    if isinstance(failure, RejectedPositiveData) and response.status_code == 400:
        try:
            message = json.loads(response.content)["message"]
        except (ValueError, KeyError, TypeError):
            return True
        for refusal in _operation(case).get("x-netacl-refusals-beyond-schema", []):
            if re.search(refusal["message"], message):
                _dropped("ST202", case, f"{refusal['why']} ({message})")
                return False
        return True
    if isinstance(failure, AcceptedNegativeData) and case.media_type == FORM:
        validator = _form_schema_validator(case)
        if validator is not None and isinstance(case.body, dict):
            sent = _wire_view(case.body)
            if validator.is_valid(sent):
                _dropped("ST201", case, f"the form sent was valid: {json.dumps(sent)[:300]}")
                return False
    return True


@schemathesis.hook
def before_call(context, case, kwargs):
    query = case.query
    if not isinstance(query, dict) or "since" not in query:
        return
    wait = query.get("timeout_ms")
    if wait is None or (isinstance(wait, int) and not isinstance(wait, bool) and LONGEST_WAIT_MS < wait <= 60000):
        query["timeout_ms"] = LONGEST_WAIT_MS
