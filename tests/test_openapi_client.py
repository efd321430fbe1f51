"""Issue 44 §7: a client generated from our OpenAPI document by openapi-python-client (the tool integrators use, run
in .venv-tools) works against the real server over HTTPS: it dropped Account over two schemas named
"AccountSettings", typed the inbound message's customData as the messageSid or the id alone, and posted to the
legacy alias. The document's webhooks (every payload Parley sends) are checked in tests/test_openapi.py."""
import json
import os
import subprocess
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from handlers import routes
from handlers.openapi import build_document
from tests.parley_process import first_run_receiver
from tests.waiting import until_sync

ROOT = Path(__file__).resolve().parent.parent
TOOLS_BIN = Path(os.environ.get("PARLEY_TOOLS_PYTHON", ROOT / ".venv-tools" / "bin" / "python")).parent


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The generated package's directory, and what the generator said."""
    if not (TOOLS_BIN / "openapi-python-client").exists():
        pytest.fail(f"{TOOLS_BIN}/openapi-python-client is missing: `make tools` installs requirements/tools.txt")
    where = tmp_path_factory.mktemp("client")
    (where / "openapi.json").write_text(json.dumps(build_document(routes())))
    out = subprocess.run([str(TOOLS_BIN / "openapi-python-client"), "generate", "--path", "openapi.json",
                          "--meta", "none", "--output-path", "client/parley_api_client"], cwd=where,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PATH": f"{TOOLS_BIN}:{os.environ['PATH']}"})
    assert out.returncode == 0, out.stdout + out.stderr
    return where / "client", out.stdout + out.stderr


def test_the_generator_drops_no_schema_and_no_operation(generated):
    package, said = generated
    assert "Unable to process schema" not in said and "duplicate" not in said, said
    # The only warnings left: the media link's */* (its content type is the file's), which no generator types.
    warnings = [part for part in said.split("\n\n") if "Cannot parse" in part or "Unable" in part]
    assert all("*/*" in part for part in warnings), warnings
    custom_channel = {p.stem for p in (package / "parley_api_client" / "api" / "custom_channel").glob("post_*.py")}
    assert custom_channel == {"post_incoming_custom_channel_message", "post_incoming_custom_channel_message_alias",
                              "post_send_custom_channel_message", "post_send_custom_channel_message_alias"}
    inbound = (package / "parley_api_client" / "api" / "custom_channel" / "post_incoming_custom_channel_message.py")
    assert '"url": "/v1/incoming_custom_channel_message"' in inbound.read_text()


def test_the_generated_client_creates_a_contact_posts_a_message_and_reads_the_account(generated, parley):
    package, _ = generated
    out = subprocess.run([str(TOOLS_BIN / "python"), str(ROOT / "tests" / "openapi_client_use.py"), str(package),
                          parley.base, parley.cert, parley.first_run["api_key"]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    used = json.loads(out.stdout.strip().splitlines()[-1])
    assert used["readFirstName"] == "Ada" and used["messageBody"] == "Hi from a client"
    assert used["messageContactId"] == used["contactId"]  # the inbound message reached the contact it created
    with parley.client(params={"apiKey": parley.first_run["api_key"]}) as client:
        assert client.get("/v1/account").json()["id"] == used["accountId"]


def test_every_payload_a_receiver_gets_is_described_by_the_documents_webhooks(parley):
    """Issue 44 §7: the document described no payload Parley sends. A real receiver's reply, notifications and
    ping are each valid against the document's webhooks entry of their kind."""
    document = build_document(routes())
    registry = Registry().with_resource("urn:parley", Resource(contents=document, specification=DRAFT202012))

    def schema_of(name):
        return {"$ref": f"urn:parley#/webhooks/{name}/post/requestBody/content/application~1json/schema"}

    with first_run_receiver(parley) as receiver, parley.client(params={"apiKey": parley.first_run["api_key"]}) as api:
        listened = ["contact.created", "contact.updated", "contact.tagged"]
        assert api.patch("/v1/account/settings", json={"notificationUrls": {
            name: receiver.url for name in listened}}).status_code == 200
        contact = api.post("/v1/contacts", json={"phone": "+14155550100", "firstName": "Ann"}).json()
        assert api.patch(f"/v1/contacts/{contact['id']}", json={"lastName": "Lee"}).status_code == 200
        listed = api.post("/v1/lists", json={"name": "Hooks"}).json()
        assert api.post(f"/v1/lists/{listed['id']}/contacts", json={"contactId": contact["id"]}).status_code in (200, 201)
        sent = api.post("/v1/send_custom_channel_message", json={"customData": {
            "fromId": "+14155550100", "customChannel": "sms", "body": "Your order is ready"}})
        assert sent.status_code == 200, sent.text
        # The test event waits for the deliveries' outbound slots (429 while they are in use).
        assert until_sync(lambda: len(receiver.requests) >= 4, seconds=30), receiver.requests
        assert until_sync(lambda: api.post("/v1/account/webhook-test").status_code == 200, seconds=30)
    kinds = sorted(body.get("event", "reply") for body in receiver.requests)
    assert kinds == sorted([*listened, "reply", "ping"])
    assert set(document["webhooks"]) >= {"reply", "ping", "contact.erased", "message.created", "conversation.handoff"}
    for body in receiver.requests:
        Draft202012Validator(schema_of(body.get("event", "reply")), registry=registry).validate(body)
