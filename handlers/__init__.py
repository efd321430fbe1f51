"""HTTP only: parse, authenticate, call a service, shape the response."""


def routes():
    """The whole URL table."""
    from handlers import account
    return [
        (r"/v1/account", account.AccountHandler),
        (r"/v1/account/settings", account.AccountSettingsHandler),
        (r"/v1/account/webhook-secret", account.WebhookSecretHandler),
        (r"/v1/account/webhook-secret/rotate", account.WebhookSecretRotateHandler),
    ]
