"""README's "first fifteen minutes" as written (issue 26): its curl commands, run by bash against the real
server (with --allow-private-webhooks, as step 1 says), and its receiver.py, run as a file, which gets the
reply signed and verifies it; a forged POST is refused. Only the port numbers are changed (free ones)."""
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.parley_process import ParleyProcess, free_port, run_cli

ROOT = Path(__file__).resolve().parent.parent


def walkthrough():
    text = (ROOT / "README.md").read_text()
    return text.split("## The first fifteen minutes", 1)[1].split("\n## ", 1)[0]


def shell_lines(section):
    """The curl and export commands of the section's sh blocks, each with its indented continuation lines."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            if line[:1].isspace() and commands and commands[-1]:
                commands[-1] += "\n" + line
            elif line.startswith(("curl ", "export ")):
                commands.append(line)
            else:
                commands.append("")  # a comment or another command: not continued
    return [c for c in commands if c]


def lines_printed(stdout, count, within):
    """The next `count` lines a process prints (they may arrive in one read), failing after `within` seconds."""
    deadline, data = time.monotonic() + within, b""
    while data.count(b"\n") < count:
        assert select.select([stdout], [], [], max(0, deadline - time.monotonic()))[0], f"printed only {data!r}"
        data += os.read(stdout.fileno(), 65536)
    return data.decode().splitlines()


def test_the_first_fifteen_minutes_work_as_written(tmp_path):
    section = walkthrough()
    [receiver_code] = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "receiver.py").write_text(receiver_code)
    commands = shell_lines(section)
    port = free_port()

    # One BASE= names the server's address (issue 43 §12): every command uses $BASE, none hard-codes it.
    assert "BASE=https://localhost:8443" in section
    assert not [c for c in commands if "https://" in c], "a command hard-codes the server's address: use $BASE"

    def bash(line, env):
        line = line.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace(".venv/bin/python", sys.executable)
        out = subprocess.run(["bash", "-c", f"{line}\necho; env | grep ^PARLEY_WEBHOOK_SECRET= || true"],
                             capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
        assert out.returncode == 0, f"{line}\n{out.stderr}"
        return out.stdout

    with ParleyProcess(tmp_path / "data", "--allow-private-webhooks") as server:
        # The key the README has you generate in Settings > Account; an account of its own here.
        key = run_cli(server.data_dir, "create-account", "--name", "Shop", "--email", "shop@example.test")["api_key"]
        env = {**os.environ, "BASE": server.base, "KEY": key, "CURL_CA_BUNDLE": server.cert}
        assert '"email":"shop@example.test"' in bash(next(c for c in commands if "/v1/account?" in c), env).replace(" ", "")

        exported = bash(next(c for c in commands if c.startswith("export PARLEY_WEBHOOK_SECRET")), env)
        secret = exported.split("PARLEY_WEBHOOK_SECRET=", 1)[1].strip()
        assert secret.startswith("whsec_")
        receiver = subprocess.Popen([sys.executable, "receiver.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    env={**env, "PARLEY_WEBHOOK_SECRET": secret, "PORT": str(port)})
        try:
            time.sleep(0.5)  # the receiver binds its port
            assert "customChannelWebhookUrl" in bash(next(c for c in commands if "-X PATCH" in c), env)
            ping = bash(next(c for c in commands if "/v1/account/webhook-test" in c), env)
            assert '"httpStatus":204' in ping.replace(" ", ""), ping
            assert receiver.stdout.readline().strip() == "verified test event"
            inbound = bash(next(c for c in commands if "incoming_custom_channel_message" in c), env)
            assert '"success":true' in inbound.replace(" ", "") and "msg_" in inbound
            reply = bash(next(c for c in commands if "send_custom_channel_message" in c), env)
            assert '"success":true' in reply.replace(" ", "")
            ready, _, _ = select.select([receiver.stdout], [], [], 30)  # the delivery worker's POST arrives
            assert ready, "the receiver printed nothing within 30 s"
            line = receiver.stdout.readline()
            assert line.strip() == "verified reply to +14155552671 on webchat: Yes, 10 to 4."
            forged = next(c for c in commands if "forged" in c)
            assert bash(forged, env).split()[0] == "401"

            # The same receiver takes the handoff notification the PATCH above asked for (it crashed on one
            # with KeyError: 'toId'), beside the bot's handoff message to a new contact (a person answered the first).
            bash("""curl -k -X PATCH "$BASE/v1/account/settings?apiKey=$KEY" -H 'Content-Type: application/json' """
                 """-d '{"bot": {"active": true, "handoffKeywords": ["human"]}}'""", env)
            bash("""curl -k "$BASE/v1/incoming_custom_channel_message?apiKey=$KEY" -H 'Content-Type: application/json' """
                 """-d '{"customData": {"messageSid": "m-2", "fromId": "+14155552672", "toId": "shop", """
                 """"channel": "webchat", "body": "A human, please"}}'""", env)
            printed = lines_printed(receiver.stdout, 2, within=30)
            [notification] = [p for p in printed if "notification" in p]
            assert notification.startswith("verified conversation.handoff notification: {'contactId': 'ct_")
            assert [p for p in printed if p.startswith("verified reply to +14155552672 on webchat: ")], printed
        finally:
            receiver.kill()
            receiver.wait()
