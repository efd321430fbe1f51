"""Contacts > Import: upload a CSV (streamed to disk), map its columns with a preview, start, watch the
progress (polled as JSON by static/import.js), cancel, download the error report."""
import asyncio
import contextlib

import tornado.web
from tornado.web import authenticated

from common.errors import Conflict, Forbidden, Invalid, NotFound, RateLimited, Unavailable
from handlers.base import BaseHandler
from handlers.ui_base import UiHandler
from handlers.bodies import FileBody
from services import contact_import, lists, regions
from services.csv_import import FIELDS

STATUS_LABELS = {"uploaded": "Waiting for you to start it", "queued": "Queued", "running": "Importing",
                 "completed": "Completed", "cancelled": "Cancelled", "failed": "Failed",
                 "interrupted": "Interrupted"}
REPORT_CHUNK = 64 * 1024
UPLOAD_MIN_BYTES_PER_SECOND = 256 * 1024  # the slowest upload given time to finish


class ImportPage(UiHandler):
    """The import pages' shared parts: the data directory, and the job page's rendering (the signed-in
    account is UiHandler.account_id)."""
    role = "agent"

    @property
    def data_dir(self):
        return self.application.settings_obj.data_dir

    def render_page(self, template, status=200, **context):
        self.render(template, status=status, status_labels=STATUS_LABELS, fields=FIELDS,
                    field_labels=contact_import.FIELD_LABELS, **context)

    async def render_job(self, job, status=200, error=None, form=None):
        context = {"job": job, "progress": contact_import.progress(job), "preview": None, "lists": [],
                   "regions": [], "form": form or self.form_of(job), "target_list": None}
        if job["status"] == "uploaded":
            context["lists"] = await contact_import.list_choices(self.services.db, self.account_id)
            # Built once per process (~90 ms: phonenumbers' locale table), off the event loop.
            context["regions"] = await contact_import.run_blocking(regions.region_choices)
            try:
                context["preview"] = await contact_import.preview(self.services, job)
            except Invalid as exc:
                error = error or f"The file cannot be read: {exc.message}"
            except (RateLimited, Unavailable) as exc:  # no room to read it now: the page, without the preview
                error = error or f"No preview: {exc.message}."
                status = status if status != 200 else exc.status
                for name, value in exc.headers.items():
                    self.set_header(name, value)
        elif job["list_id"]:  # the list it fills (gone if deleted since)
            with contextlib.suppress(NotFound):
                context["target_list"] = await lists.get_list(self.services.db, self.account_id, job["list_id"])
        self.render_page("contact_import_job.html", status=status,
                         flashes=[{"kind": "error", "text": error}] if error else [], **context)

    @staticmethod
    def form_of(job):
        mapping = {f: "" if i is None else str(i) for f, i in job["mapping"].items()}
        return {**mapping, "defaultCountry": job["default_region"] or "",
                "list": "new" if job["new_list_name"] else job["list_id"] or "", "newListName": job["new_list_name"] or ""}


class ImportsHandler(ImportPage):
    """GET /contacts/import: the upload form and the account's recent imports."""

    @authenticated
    async def get(self):
        max_bytes = self.application.settings_obj.max_import_bytes
        self.render_page("contact_import.html", jobs=await contact_import.recent_jobs(self.services.db, self.account_id),
                         max_bytes=max_bytes, max_mb=round(max_bytes / 2**20, 1))


class JsonAnswers:
    """Errors as JSON ({"error": {code, message}}): these answers are read by import.js, not shown as pages."""
    write_error = BaseHandler.write_error


class ImportUploadHandler(JsonAnswers, ImportPage):
    """POST /contacts/import/upload?name=FILE: the raw file as the body (XSRF token in the X-XSRFToken
    header), streamed to a file in data/imports/ (handlers/bodies.FileBody) once the session is known;
    201 {id, url} of the new draft."""

    upload_allowed = False  # prepare() sets it once every check passed: until then there is no sink
    upload_counted = False  # the upload counts against the account's drafts until it ends

    def body_limit(self):
        # make_body_sink checks the announced size before the file exists.
        return self.application.settings_obj.max_import_bytes if self.upload_allowed else None

    def make_body_sink(self, limit):
        self.refuse_oversized_body()
        # The one route whose body may exceed the server-wide cap (the largest API body), and take longer
        # than --body-timeout-seconds to arrive: a 200 MB file at 256 KB/s takes 13 minutes.
        connection = self.request.connection
        connection.set_max_body_size(limit)
        expected = self.content_length() or limit
        connection.set_body_timeout(max(self.application.settings_obj.body_timeout_seconds,
                                        expected / UPLOAD_MIN_BYTES_PER_SECOND))
        return FileBody(limit, contact_import.imports_dir(self.data_dir))

    async def prepare(self):
        await super().prepare()
        if self.current_user is None:
            raise Forbidden("sign in to upload a file")
        # The token is a header, so it is checked now, before the first byte of the file (UiHandler checks
        # a form's token once its body is read, which for a file would be after it is on disk).
        tornado.web.RequestHandler.check_xsrf_cookie(self)
        await contact_import.start_upload(self.services, self.account_id)
        self.upload_counted = self.upload_allowed = True
        self.reserve_body()

    def on_finish(self):
        if self.upload_counted:  # also reached through on_connection_close: counted down once
            self.upload_counted = False
            contact_import.end_upload(self.services, self.account_id)
        super().on_finish()

    async def post(self):
        path, size = self.keep_body_file()  # the job owns the file now
        job = await contact_import.create_from_upload(self.services, self.account_id, self.current_user["id"], path,
                                                      self.get_query_argument("name", ""), size)
        self.respond({"id": job["id"], "url": f"/contacts/import/{job['id']}"}, 201)


class ImportJobHandler(ImportPage):
    """GET /contacts/import/{id}: a draft's options and preview, or a started job's progress."""

    @authenticated
    async def get(self, import_id):
        job = await contact_import.get_job(self.services.db, self.account_id, import_id)
        await self.render_job(job)


class ImportOptionsHandler(ImportPage):
    """POST /contacts/import/{id}/preview (save the options, show the preview again) and .../start."""

    start = False

    @authenticated
    async def post(self, import_id):
        job = await contact_import.get_job(self.services.db, self.account_id, import_id)
        form = {name: self.get_body_argument(name, "") for name in (*FIELDS, "defaultCountry", "list", "newListName")}
        try:
            options = await contact_import.check_options(
                self.services.db, self.account_id, job["header"], contact_import.parse_mapping(form),
                form["defaultCountry"], form["list"], form["newListName"])
            await contact_import.save_options(self.services, self.account_id, import_id, options, start=self.start)
        except (Invalid, Conflict) as exc:  # Conflict: the new list's name is taken (names are unique)
            await self.render_job(job, status=exc.status, error=exc.message, form=form)
            return
        if self.start:
            self.flash("success", "The import has started. You can leave this page: it goes on without you.")
        self.redirect(f"/contacts/import/{import_id}", status=303)


class ImportStartHandler(ImportOptionsHandler):
    start = True


class ImportCancelHandler(ImportPage):
    """POST /contacts/import/{id}/cancel: discard a draft, or stop a queued or running import."""

    @authenticated
    async def post(self, import_id):
        try:
            job = await contact_import.cancel(self.services, self.account_id, import_id)
        except Invalid as exc:
            self.flash("error", exc.message)
        else:
            self.flash("success", "The import was cancelled; rows already imported stay."
                       if job["rows_read"] else "The import was cancelled.")
        self.redirect(f"/contacts/import/{import_id}", status=303)


class ImportProgressHandler(JsonAnswers, ImportPage):
    """GET /contacts/import/{id}/progress: the job's counts as JSON (one row read), polled by import.js."""

    @authenticated
    async def get(self, import_id):
        job = await contact_import.get_job(self.services.db, self.account_id, import_id)
        self.respond({**contact_import.progress(job), "statusLabel": STATUS_LABELS[job["status"]]})


class ImportErrorsHandler(ImportPage):
    """GET /contacts/import/{id}/errors.csv: the error report, streamed from its file."""

    @authenticated
    async def get(self, import_id):
        job = await contact_import.get_job(self.services.db, self.account_id, import_id)
        report = await contact_import.open_report(self.data_dir, self.account_id, job)
        loop = asyncio.get_running_loop()
        try:
            self.set_header("Content-Type", "text/csv; charset=UTF-8")
            self.set_header("Content-Disposition", f'attachment; filename="{import_id}-errors.csv"')
            remaining = job["errors_bytes"]  # only what is committed: a running job appends after it
            while remaining > 0:
                chunk = await loop.run_in_executor(None, report.read, min(REPORT_CHUNK, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
                self.write(chunk)
                await self.flush()
        finally:
            await loop.run_in_executor(None, report.close)
