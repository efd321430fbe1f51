"""Several server processes on one database in one test: another process's services, opened in this process."""
import server


def second_process(io_loop, settings, tmp_path):
    """Another server process's services on the same database, with its own data directory (another host)."""
    other = settings.model_copy(update={"data_dir": tmp_path / "host-b",
                                        "secret_key_file": settings.data_dir / "secret.key"})
    return io_loop.run_sync(lambda: server.open_services(other))
