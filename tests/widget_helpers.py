"""The website chat widget in tests: an account's widget enabled, and a visitor's chat frame calling its API."""


async def enable(api, account, **settings):
    """The account's widget enabled (with these settings); returns its id."""
    r = await api.patch("/v1/account/settings", {"widget": {"enabled": True, "allowedOrigins": ["https://shop.example"],
                                                            **settings}}, key=account["api_key"])
    assert r.code == 200, r.body
    return (await api.get("/v1/account/widget", key=account["api_key"])).json["widgetId"]


class Visitor:
    """A browser's chat frame: its token, sent as X-Parley-Visitor."""

    def __init__(self, api, widget_id, token=None, user_agent="Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"):
        self.api, self.base, self.token, self.user_agent = api, f"/widget/{widget_id}", token, user_agent

    def headers(self, extra=None):
        return {"User-Agent": self.user_agent, **({"X-Parley-Visitor": self.token} if self.token else {}),
                **(extra or {})}

    async def history(self):
        r = await self.api.get(f"{self.base}/messages", headers=self.headers())
        assert r.code == 200, r.body
        return r.json

    async def send(self, body, **extra):
        r = await self.api.post(f"{self.base}/messages", {"body": body, **extra}, headers=self.headers())
        if r.code == 201 and r.json["token"]:
            self.token = r.json["token"]
        return r

    async def updates(self, after, wait=0):
        return await self.api.get(f"{self.base}/updates?after={after}&wait={wait}", headers=self.headers())

    async def identify(self, user_id, hash, **extra):
        r = await self.api.post(f"{self.base}/identify", {"id": user_id, "hash": hash, **extra}, headers=self.headers())
        assert r.code == 200, r.body
        if r.json["verified"]:
            self.token = r.json["token"]
        return r.json
