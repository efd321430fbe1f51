"""The API reference for people (/docs): the OpenAPI document (GET /v1/openapi.json) rendered in the browser by
Redoc, vendored under static/vendor/redoc/ with its licence (no CDN). No sign-in: the document is public."""
from handlers.ui_base import UiHandler


class DocsHandler(UiHandler):
    role = "agent"
    # Redoc (styled-components) adds <style> elements and style attributes, and runs its search index in a
    # Worker made from a blob: URL; everything else stays as the site's CSP (docs/security.md "/docs").
    CSP = (f"{UiHandler.CSP}; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:; "
           "img-src 'self' data:")

    def get(self):
        self.render("docs.html", spec_url="/v1/openapi.json")
