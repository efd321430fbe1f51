"""Admin web UI pages (server-rendered HTML forms on UiHandler): sign-in and account settings."""
