"""Run by tests/test_openapi_client.py in .venv-tools (where the generated client's httpx and attrs are): imports
the client openapi-python-client generated from our document and uses it as an integrator would. Prints JSON."""
import json
import ssl
import sys

sys.path.insert(0, sys.argv[1])
from parley_api_client import AuthenticatedClient
from parley_api_client.api.account import get_account
from parley_api_client.api.contacts import get_contacts_contact_id, post_contacts
from parley_api_client.api.custom_channel import post_incoming_custom_channel_message
from parley_api_client.api.messages import get_messages_message_id
from parley_api_client.models import Account, Contact, ContactCreate, InboundAccepted, InboundMessage
from parley_api_client.models import InboundCustomData, Message

base, cert, key = sys.argv[2:5]
client = AuthenticatedClient(base_url=base, token=key, verify_ssl=ssl.create_default_context(cafile=cert))
with client:
    contact = post_contacts.sync(client=client, body=ContactCreate(first_name="Ada", phone="+14155552671"))
    assert isinstance(contact, Contact), contact
    read = get_contacts_contact_id.sync(contact.id, client=client)
    custom = InboundCustomData(message_sid="gen-1", from_id="+14155552671", to_id="shop", body="Hi from a client")
    accepted = post_incoming_custom_channel_message.sync(client=client, body=InboundMessage(custom_data=custom))
    assert isinstance(accepted, InboundAccepted), accepted
    message = get_messages_message_id.sync(accepted.message_id, client=client)
    assert isinstance(message, Message), message
    account = get_account.sync(client=client)
    assert isinstance(account, Account), account
    print(json.dumps({"contactId": contact.id, "readFirstName": read.first_name, "messageContactId": message.contact_id,
                      "messageBody": message.body, "accountId": account.id}))
