"""HTTP only: parse, authenticate, call a service, shape the response."""


def routes():
    """The whole URL table."""
    from handlers import account
    from handlers import campaigns
    from handlers import contacts, lists
    from handlers import custom_channel, messages
    from handlers import subaccounts
    from handlers import live, openapi
    from handlers.ui import agency, contact_import, contacts as ui_contacts, inbox, session, settings as ui_settings
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
        (r"/v1/incoming_custom_channel_message", custom_channel.IncomingMessageHandler),
        (r"/incomingCustomChannelMessage", custom_channel.IncomingMessageHandler),
        (r"/v1/send_custom_channel_message", custom_channel.SendMessageHandler),
        (r"/v1/sendCustomChannelMessage", custom_channel.SendMessageHandler),
        (r"/v1/messages/([^/]+)", messages.MessageHandler),
        (r"/v1/messages/([^/]+)/retry", messages.MessageRetryHandler),
        (r"/v1/contacts/([^/]+)/messages", messages.ContactMessagesHandler),
        (r"/v1/media/([0-9a-f]{64})", messages.MediaHandler),
        (r"/v1/subaccounts", subaccounts.SubaccountsHandler),
        (r"/v1/subaccounts/credits", subaccounts.SubaccountCreditsHandler),
        (r"/v1/subaccounts/([^/]+)", subaccounts.SubaccountHandler),
        (r"/v1/subaccounts/([^/]+)/transactions", subaccounts.SubaccountTransactionsHandler),
        (r"/v1/campaigns", campaigns.CampaignsHandler),
        (r"/v1/campaigns/([^/]+)", campaigns.CampaignHandler),
        (r"/v1/campaigns/([^/]+)/(pause|resume|cancel|retry-failed)", campaigns.CampaignActionHandler),
        (r"/v1/campaigns/([^/]+)/recipients", campaigns.RecipientsHandler),
        (r"/v1/campaigns/([^/]+)/recipients\.csv", campaigns.RecipientsCsvHandler),
        (r"/v1/openapi\.json", openapi.OpenApiHandler),
        # Admin web UI (HTML forms; session cookie + XSRF). Unknown paths stay JSON 404s.
        (r"/", session.HomeHandler),
        (r"/login", session.LoginHandler),
        (r"/logout", session.LogoutHandler),
        (r"/settings", ui_settings.SettingsHandler),
        (r"/settings/api-key", ui_settings.ApiKeyHandler),
        (r"/settings/webhook", ui_settings.CustomChannelWebhookHandler),
        (r"/settings/notifications", ui_settings.NotificationUrlsHandler),
        (r"/settings/webhook-secret", ui_settings.WebhookSecretHandler),
        (r"/settings/webhook-secret/rotate", ui_settings.WebhookSecretRotateHandler),
        (r"/settings/password", ui_settings.PasswordHandler),
        (r"/agency", agency.AgencyHandler),
        (r"/agency/subaccounts", agency.SubaccountCreateHandler),
        (r"/agency/subaccounts/([^/]+)", agency.SubaccountPageHandler),
        (r"/agency/subaccounts/([^/]+)/grant", agency.SubaccountGrantHandler),
        (r"/agency/subaccounts/([^/]+)/auto-recharge", agency.SubaccountAutoRechargeHandler),
        (r"/agency/subaccounts/([^/]+)/auto-recharge/off", agency.SubaccountAutoRechargeOffHandler),
        (r"/contacts/import", contact_import.ImportsHandler),
        (r"/contacts/import/upload", contact_import.ImportUploadHandler),
        (r"/contacts/import/([^/]+)", contact_import.ImportJobHandler),
        (r"/contacts/import/([^/]+)/preview", contact_import.ImportOptionsHandler),
        (r"/contacts/import/([^/]+)/start", contact_import.ImportStartHandler),
        (r"/contacts/import/([^/]+)/cancel", contact_import.ImportCancelHandler),
        (r"/contacts/import/([^/]+)/progress", contact_import.ImportProgressHandler),
        (r"/contacts/import/([^/]+)/errors\.csv", contact_import.ImportErrorsHandler),
        (r"/inbox", inbox.InboxHandler),
        (r"/inbox/conversations", inbox.ConversationListHandler),
        (r"/inbox/(ct_[0-9a-z]+)", inbox.ThreadHandler),
        (r"/inbox/(ct_[0-9a-z]+)/messages", inbox.ThreadMessagesHandler),
        (r"/inbox/(ct_[0-9a-z]+)/messages/(msg_[0-9a-z]+)", inbox.ThreadMessageHandler),
        (r"/inbox/(ct_[0-9a-z]+)/messages/(msg_[0-9a-z]+)/retry", inbox.RetryHandler),
        (r"/inbox/(ct_[0-9a-z]+)/reply", inbox.ReplyHandler),
        (r"/inbox/(ct_[0-9a-z]+)/read", inbox.ReadHandler),
        (r"/inbox/(ct_[0-9a-z]+)/resume-bot", inbox.ResumeBotHandler),
        (r"/inbox/(ct_[0-9a-z]+)/bot", inbox.BotStateHandler),
        (r"/contacts", ui_contacts.ContactsHandler),
        (r"/contacts/(ct_[0-9a-z]+)", ui_contacts.ContactHandler),
        (r"/contacts/(ct_[0-9a-z]+)/lists", ui_contacts.ContactListsHandler),
        (r"/lists", ui_contacts.ListsHandler),
        (r"/lists/(lst_[0-9a-z]+)", ui_contacts.ListHandler),
        # The UI's live events (session cookie, same origin): see handlers/live.py.
        (r"/ws", live.LiveEventsHandler),
    ]
