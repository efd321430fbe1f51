"""The thread's private notes: add one (the reply box in Note mode), one note as HTML (a live page inserts it
when note.created arrives), delete one (its author or an admin)."""
from tornado.web import authenticated

from handlers.ui_base import UiHandler
from services import notes


class NotesHandler(UiHandler):
    """POST /inbox/{contactId}/notes: body. Stored for the team only; never sent."""
    role = "agent"

    @authenticated
    async def post(self, contact_id):
        await notes.add(self.services.db, self.account_id, contact_id, self.get_body_argument("body", ""),
                        user=self.current_user)
        self.action_done(f"/inbox/{contact_id}", "Note added.")


class NoteHandler(UiHandler):
    """GET /inbox/{contactId}/notes/{noteId}: the note as the thread shows it."""
    live_fragment = True
    role = "agent"

    @authenticated
    async def get(self, contact_id, note_id):
        note = await notes.get_view(self.services.db, self.account_id, contact_id, note_id)
        self.render("_note_item.html", m=note, contact_id=contact_id)


class NoteDeleteHandler(UiHandler):
    """POST /inbox/{contactId}/notes/{noteId}/delete."""
    role = "agent"

    @authenticated
    async def post(self, contact_id, note_id):
        await notes.delete(self.services.db, self.account_id, contact_id, note_id, user=self.current_user)
        self.action_done(f"/inbox/{contact_id}", "Note deleted.")
