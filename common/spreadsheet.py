"""CSV cells that Parley writes for people to open in a spreadsheet program."""


def safe_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: a leading =, +, -, @ (a formula), tab or CR gets a quote
    before it. Used by every CSV Parley writes (campaign recipients, the import's error report)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
