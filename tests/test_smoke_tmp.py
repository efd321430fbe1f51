async def test_account(api, account):
    r = await api.get("/v1/account", key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["id"] == account["account_id"]

def test_e2e(tmp_path):
    from tests.parley_process import ParleyProcess
    with ParleyProcess(tmp_path / "data") as p:
        with p.client() as c:
            r = c.get("/v1/account", params={"apiKey": p.first_run["api_key"]})
            assert r.status_code == 200
