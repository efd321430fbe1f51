"""HTTP only: parse, authenticate, call a service, shape the response."""


def routes():
    """The whole URL table."""
    from handlers import account
    from handlers import contacts, lists
    return [
        (r"/v1/account", account.AccountHandler),
        (r"/v1/account/settings", account.AccountSettingsHandler),
        (r"/v1/account/webhook-secret", account.WebhookSecretHandler),
        (r"/v1/account/webhook-secret/rotate", account.WebhookSecretRotateHandler),
        (r"/v1/contacts", contacts.ContactsHandler),
        (r"/v1/contacts/([^/]+)", contacts.ContactHandler),
        (r"/v1/lists", lists.ListsHandler),
        (r"/v1/lists/([^/]+)", lists.ListHandler),
        (r"/v1/lists/([^/]+)/contacts", lists.ListContactsHandler),
    ]
