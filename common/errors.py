"""Domain errors; only handlers/base.py turns them into HTTP responses."""


class DomainError(Exception):
    status = 400
    code = "VALIDATION_ERROR"

    def __init__(self, message: str, code: str | None = None, headers: dict[str, str] | None = None,
                 field: str | None = None, existing_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.headers = headers or {}
        self.field = field  # the input field at fault, when one is (the import's error report names it)
        self.existing_id = existing_id  # a Conflict's other record (the contact that has this phone), if any


class Invalid(DomainError):
    status, code = 400, "VALIDATION_ERROR"


class Unauthorized(DomainError):
    status, code = 401, "UNAUTHORIZED"


class Forbidden(DomainError):
    status, code = 403, "FORBIDDEN"


class NotFound(DomainError):
    status, code = 404, "NOT_FOUND"


class Conflict(DomainError):
    status, code = 409, "CONFLICT"


class PayloadTooLarge(DomainError):
    status, code = 413, "PAYLOAD_TOO_LARGE"


class RateLimited(DomainError):
    status, code = 429, "RATE_LIMITED"


class Unavailable(DomainError):
    status, code = 503, "UNAVAILABLE"


class IdempotencyKeyReused(DomainError):
    """The Idempotency-Key was already used with other parameters (docs/design.md#api-decisions "Credits")."""
    status, code = 422, "IDEMPOTENCY_KEY_REUSED"


class InsufficientCredits(Conflict):
    """A spend larger than the balance: nothing was spent."""
    code = "INSUFFICIENT_CREDITS"
