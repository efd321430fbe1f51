"""What a users row says of its user that several storage modules ask in SQL: invited, removed, able to sign in.
A leaf module: storage.users imports storage.mail, which needs these too."""

INVITED = "!invited"  # the password hash of a user who has not used the invitation: matches no password
REMOVED = "!removed"  # the password hash of a removed user: matches no password


def signs_in(alias: str = "") -> str:
    """SQL: the user can sign in (active, not removed, the invitation accepted). alias: the users table's, if any."""
    u = f"{alias}." if alias else ""
    return f"{u}active = 1 AND {u}removed_at IS NULL AND {u}password_hash <> '{INVITED}'"
