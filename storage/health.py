"""SQL for the health check."""
from storage.db import reads


@reads
def ping(cx):
    """One round trip to the database."""
    return cx.execute("SELECT 1").fetchone()[0] == 1
