#!/usr/bin/env python3
"""Drives a Gatehouse node's admin API through a client generated from the OpenAPI document the
node serves (openapi-python-client, package `gatehouse_api` on PYTHONPATH): draft -> revision ->
diff -> stage -> release -> rollback. Prints one JSON object with what each step answered; any
step that fails raises.

  cycle.py URL TOKEN UPSTREAM_TARGET
"""

import json
import sys

from gatehouse_api import AuthenticatedClient
from gatehouse_api.api.default import (
    create_revision,
    diff_revisions,
    get_draft,
    get_releases,
    put_entry,
    release_revision,
    rollback_revision,
    stage_revision,
)
from gatehouse_api.models import (
    Diff,
    Draft,
    DraftWritten,
    NewRevision,
    PutEntryBody,
    PutEntrySection,
    ReleaseChange,
    ReleaseHistory,
    RevisionMeta,
    StageTo,
)


def expect(value, kind, step):
    if not isinstance(value, kind):
        raise SystemExit(f"{step}: expected {kind.__name__}, got {value!r}")
    return value


def main():
    url, token, target = sys.argv[1:4]
    client = AuthenticatedClient(base_url=url, token=token, raise_on_unexpected_status=True)
    seen = {}
    draft = expect(get_draft.sync(client=client), Draft, "get draft")
    seen["draft_version"] = draft.version
    first = expect(create_revision.sync(client=client, body=NewRevision(message="baseline")), RevisionMeta, "revision 1")
    seen["first"] = first.number
    written = expect(
        put_entry.sync(
            PutEntrySection.UPSTREAMS,
            "u",
            client=client,
            body=PutEntryBody.from_dict({"targets": [target]}),
            if_match=f'"{draft.version}"',
        ),
        DraftWritten,
        "put upstreams.u",
    )
    seen["written_version"] = written.version
    second = expect(create_revision.sync(client=client, body=NewRevision(message="to the new target")), RevisionMeta, "revision 2")
    seen["second"] = second.number
    diff = expect(diff_revisions.sync(first.number, str(second.number), client=client), Diff, "diff")
    seen["diff_has_target"] = f"+    - {target}" in diff.unified
    staged = expect(stage_revision.sync(second.number, client=client, body=StageTo(label="canary")), ReleaseChange, "stage")
    seen["staged"] = staged.to_dict()
    released = expect(release_revision.sync(second.number, client=client), ReleaseChange, "release")
    seen["released"] = released.to_dict()
    rolled = expect(rollback_revision.sync(first.number, client=client), ReleaseChange, "rollback")
    seen["rolled_back"] = rolled.to_dict()
    history = expect(get_releases.sync(client=client), ReleaseHistory, "releases")
    seen["history"] = [e.to_dict() for e in history.history]
    seen["released_now"] = history.released
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
