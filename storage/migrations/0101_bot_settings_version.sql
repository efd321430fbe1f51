-- Every stored bot gets a settings version (services/bot_settings.VERSION, new on every save): the bot keeps
-- one compiled keyword matcher per version (services/bot_match.py) instead of compiling per message.
UPDATE accounts SET settings = json_set(settings, '$.bot.version', lower(hex(randomblob(8))))
 WHERE json_type(settings, '$.bot') = 'object';
