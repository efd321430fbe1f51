"""Every setting, declared once with its help text: each is a CLI flag and a PARLEY_* variable."""
import argparse
import os
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(Path("data"), description="Directory for parley.db, tls/, media/ and secret.key.")
    database_url: str = Field("", description="Empty: the SQLite file parley.db in --data-dir. "
                                              "postgresql://user:password@host:port/database: that PostgreSQL "
                                              "database (migrated at first start; see docs/operations.md "
                                              "\"Running on PostgreSQL\").")
    database_pool_size: int = Field(10, ge=1, le=500, description="PostgreSQL only: connections the server keeps "
                                                                "open (each read or write holds one while it "
                                                                "runs).")
    host: str = Field("0.0.0.0", description="Address the HTTPS listener binds to.")
    port: int = Field(8443, ge=0, le=65535, description="HTTPS port.")
    http_port: int = Field(8080, ge=0, le=65535,
                           description="Plain-HTTP port that only rejects (403 HTTPS_REQUIRED, or 301 for "
                                       "browser page loads); 0 turns it off.")
    tls_cert: Optional[Path] = Field(None, description="PEM certificate (chain); without it a self-signed "
                                                        "certificate is generated in data/tls/.")
    tls_key: Optional[Path] = Field(None, description="PEM private key for --tls-cert.")
    tls_profile: Literal["intermediate", "modern"] = Field(
        "intermediate", description="Mozilla TLS configuration for the HTTPS listener and Parley's own outgoing "
                                    "connections (webhooks, the AI provider): intermediate (TLS 1.2 and 1.3) or "
                                    "modern (TLS 1.3 only).")
    public_url: Optional[str] = Field(None, description="Public base URL (https://host:port) used in links and "
                                                         "the self-signed certificate; default https://localhost:PORT.")
    rate_limit: int = Field(600, ge=1, description="Requests per API key per minute; one account's own limit is "
                                                    "set with `parley set-rate-limit`.")
    allow_private_webhooks: bool = Field(False, description="Allow webhook URLs on loopback/private addresses "
                                                            "and plain http (local development and tests only).")
    behind_proxy: bool = Field(False, description="Trust X-Forwarded-Proto/-For from a reverse proxy on "
                                                  "loopback; the plain-HTTP port then serves proxied HTTPS.")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest JSON body accepted by API endpoints (413 above).")
    max_media_bytes: int = Field(16_777_216, ge=1024,
                                 description="Largest decoded media file in a custom-channel message (413 above), a "
                                             "chat upload or an email attachment (a bigger attachment is named in its "
                                             "message, not kept).")
    max_import_bytes: int = Field(209_715_200, ge=1024,
                                  description="Largest CSV file accepted by Contacts > Import (413 above; nothing "
                                              "of it is kept).")
    import_drafts_per_account: int = Field(5, ge=1, description="Contacts > Import uploads an account may have "
                                                                "waiting to be started (uploads still arriving "
                                                                "count); another is refused (409) until one is "
                                                                "started or discarded.")
    import_preview_max_bytes: int = Field(2_097_152, ge=1_048_576,
                                          description="Bytes of a file the import preview reads at most (its "
                                                      "sample: the first 1,000 rows in them).")
    import_preview_max_lines: int = Field(20_000, ge=1000, description="Lines of a file the import preview reads "
                                                                       "at most, blank ones included.")
    import_preview_readers: int = Field(2, ge=1, description="Import previews read at once, over all accounts "
                                                             "(and one per account); a page view beyond that "
                                                             "shows no preview and says to reload.")
    max_buffered_body_bytes: int = Field(134_217_728, ge=65536,
                                         description="Request bodies held in memory at once, across all "
                                                     "connections (503 with Retry-After above).")
    max_header_bytes: int = Field(16384, ge=1024, description="Largest request line plus headers (431 above).")
    max_connections: int = Field(1000, ge=1, description="Open connections at most (kept below the file "
                                                         "limit); at the cap the longest-idle one is closed.")
    tls_handshake_timeout_seconds: float = Field(10.0, gt=0, description="A connection that has not "
                                                                         "completed TLS by then is closed.")
    idle_timeout_seconds: float = Field(30.0, gt=0, description="A connection that sends no complete request "
                                                                "headers for this long is closed (idle "
                                                                "keep-alive, or headers that never finish).")
    body_timeout_seconds: float = Field(60.0, gt=0, description="A request body that has not fully arrived "
                                                                "by then is abandoned and the connection closed.")
    media_url_ttl_seconds: int = Field(604_800, ge=60, description="How long a signed media URL (GET /v1/media/…) "
                                                                   "stays valid after it is issued.")
    shutdown_grace_seconds: float = Field(10.0, ge=0, description="How long shutdown waits for requests in flight.")
    log_level: str = Field("info", description="Log level: debug, info, warning or error.")
    webhook_timeout_seconds: float = Field(15.0, gt=0, description="Time limit for one webhook delivery "
                                                                   "attempt (connect + answer).")
    mail_timeout_seconds: float = Field(15.0, gt=0, description="Time limit for one connection to an account's "
                                                                "mail server (connect, TLS, login, one mail sent), "
                                                                "and for each step of Settings > Email's Test.")
    mail_poll_seconds: float = Field(60.0, gt=0, description="The email channel: how often a mailbox whose IMAP "
                                                             "server has no IDLE is looked at for new mail (with "
                                                             "IDLE, new mail is imported as it arrives).")
    write_queue_limit: int = Field(10_000, ge=1, description="Writes that may wait for the SQLite writer at once; "
                                                             "beyond that a write answers 503 at once.")
    writer_stall_seconds: float = Field(15.0, gt=0, description="A write transaction that runs longer than this "
                                                                "gets the writer process replaced; its writes "
                                                                "answer 503 saying whether they were stored.")
    retention_interval_seconds: float = Field(3600.0, gt=0, description="How often the cleanup runs (see "
                                                                        "docs/operations.md \"Retention\").")
    retention_webhook_days: int = Field(30, ge=0, description="Days to keep delivered and finally failed webhooks "
                                                              "and their delivery attempts; 0 keeps them for ever.")
    retention_orphan_media_hours: float = Field(24.0, gt=0, description="Hours before a media file that no "
                                                                        "message names is deleted.")
    retention_batch_size: int = Field(200, ge=1, description="Rows the cleanup deletes per write transaction "
                                                             "(small, so requests never wait long behind it).")
    reports_interval_seconds: float = Field(60.0, gt=0, description="How often the Reports' summaries fold in "
                                                                     "new messages and delivery attempts (a report "
                                                                     "reads the rows not folded yet itself).")
    delivery_concurrency: int = Field(16, ge=1, description="Webhook deliveries in flight at once, overall.")
    delivery_concurrency_per_account: int = Field(4, ge=1, description="Webhook deliveries in flight at once "
                                                                       "per account, so that one slow receiver "
                                                                       "cannot hold every slot.")
    bot_concurrency: int = Field(8, ge=1, description="Inbound messages the bot works on at once (each may wait "
                                                      "for the AI provider); more wait their turn.")
    bot_concurrency_per_account: int = Field(2, ge=1, description="Of those, at most this many per account "
                                                                  "(POST /v1/bot/test included), so that one "
                                                                  "account's slow AI provider cannot hold every "
                                                                  "slot.")
    bot_history_messages: int = Field(20, ge=1, le=200, description="Most recent messages of the conversation "
                                                                    "sent to the bot's AI provider.")
    bot_history_chars: int = Field(8000, ge=10, description="At most this many characters of the conversation "
                                                             "are sent to the bot's AI provider (older messages "
                                                             "are left out first).")
    live_sockets_per_session: int = Field(8, ge=1, description="Live-event WebSockets (open admin pages) one "
                                                               "signed-in session keeps at most; a newer one "
                                                               "closes the oldest.")
    live_sockets_per_account: int = Field(50, ge=1, description="Live-event WebSockets one account keeps at "
                                                                "most, across its sessions; a newer one closes "
                                                                "the oldest.")
    live_sockets_share: float = Field(0.5, gt=0, lt=1, description="Share of --max-connections that live-event "
                                                                   "WebSockets may hold in all (503 above): the "
                                                                   "rest is kept for the API and the pages.")
    event_retention_days: float = Field(7.0, gt=0, description="How long events are kept (deleted by the retention "
                                                               "cleanup): GET /v1/events answers a cursor older "
                                                               "than that 410 CURSOR_EXPIRED, and an inbox page "
                                                               "offline for longer reloads.")
    events_long_polls_per_key: int = Field(10, ge=1, description="GET /v1/events long-polls (wait) one API key "
                                                                 "keeps waiting at once on a process (429 above).")
    events_long_polls_per_account: int = Field(20, ge=1, description="GET /v1/events long-polls one account keeps "
                                                                     "waiting at once on a process, across its "
                                                                     "keys (429 above).")
    events_long_polls_share: float = Field(0.25, gt=0, lt=1, description="Share of --max-connections that GET "
                                                                         "/v1/events long-polls may hold at once on "
                                                                         "a process, across accounts (429 with "
                                                                         "Retry-After above): with "
                                                                         "--live-sockets-share, the rest is kept "
                                                                         "for the API and the pages.")

    secret_key_file: Optional[Path] = Field(None, description="The key that encrypts secrets at rest and signs "
                                                              "session and XSRF cookies; default secret.key in "
                                                              "--data-dir (made at first start). Every process "
                                                              "serving one database must use the same key.")
    worker_lease_seconds: float = Field(30.0, ge=1, description="Several processes on one database: a background "
                                                                "job (campaigns, imports, cleanup…) or a webhook "
                                                                "being delivered is another process's to take "
                                                                "over this long after its owner stopped renewing "
                                                                "it (died). A delivery's lease adds "
                                                                "--webhook-timeout-seconds. A server that starts "
                                                                "frees at once what a process that died on the "
                                                                "same machine held.")

    @field_validator("database_url")
    @classmethod
    def _postgres_or_nothing(cls, url):
        if url and url.split(":", 1)[0] not in ("postgresql", "postgres"):
            raise ValueError("database_url: empty (the SQLite file) or postgresql://user:password@host:port/database")
        return url

    @model_validator(mode="after")
    def _room_for_the_api(self):
        if self.live_sockets_share + self.events_long_polls_share >= 1:
            raise ValueError("live_sockets_share + events_long_polls_share must stay below 1: the rest of "
                             "--max-connections is the API's")
        return self

    @property
    def events_long_polls_max(self):
        """GET /v1/events long-polls waiting at once on a process, at most."""
        return max(1, int(self.max_connections * self.events_long_polls_share))

    @property
    def base_url(self):
        return (self.public_url or f"https://localhost:{self.port}").rstrip("/")

    @property
    def max_media_request_bytes(self):
        """The largest request body: an embedded file of max_media_bytes as base64 plus the JSON around it."""
        return max(self.max_body_bytes, self.max_media_bytes * 4 // 3 + 65536)

    @property
    def db_path(self):
        return self.data_dir / "parley.db"

    @property
    def uses_postgres(self):
        return self.database_url.split(":", 1)[0] in ("postgresql", "postgres")


def flag(name):
    return "--" + name.replace("_", "-")


def env_name(name):
    return "PARLEY_" + name.upper()


def add_arguments(parser):
    """One flag per setting; defaults come from PARLEY_* variables, then the model."""
    for name, field in Settings.model_fields.items():
        env = os.environ.get(env_name(name))
        help_text = f"{field.description} [env {env_name(name)}; default {field.default}]"
        if field.annotation is bool:
            parser.add_argument(flag(name), dest=name, action=argparse.BooleanOptionalAction,
                                default=None if env is None else env.lower() in ("1", "true", "yes", "on"),
                                help=help_text)
        else:
            parser.add_argument(flag(name), dest=name, default=env, help=help_text)


def given(ns):
    """The settings set by a flag or a PARLEY_* variable (the others are the model's defaults)."""
    return {name for name in Settings.model_fields if getattr(ns, name, None) is not None}


def from_namespace(ns):
    values = {name: getattr(ns, name) for name in given(ns)}
    return Settings(**values)


def markdown_table():
    """The settings table of docs/operations.md (scripts/settings_table.py writes it there; a test compares)."""
    rows = ["| flag | variable | default | what it does |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = "off" if field.default is False else "—" if field.default is None else field.default
        rows.append(f"| `{flag(name)}` | `{env_name(name)}` | `{default}` | {field.description} |")
    return "\n".join(rows) + "\n"
