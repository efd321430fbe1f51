"""Users API (issue 21): GET/POST /v1/users, GET/PATCH/DELETE /v1/users/{id}. An API key acts with an owner's
rights."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.team_schemas import User, UserCreate, UserCreated, UserList, UserPatch, UserRemoved
from services import assignment, users

NOT_FOUND = "No such user in this account (USER_NOT_FOUND)."
BY_ID = {"userId": "$response.body#/id"}


class UsersHandler(ApiHandler):
    operations = {
        "get": Operation("The account's users, owners first", {200: UserList}, tags=("users",)),
        "post": Operation(
            "Invite a user", {201: (UserCreated, "Created; signInUrl is shown only here.")}, body=UserCreate,
            tags=("users",),
            description="The user chooses a password through signInUrl (one use, 24 hours). With SMTP set (the "
                        "`email` account setting) the link is also emailed to the user (invitationEmailed); "
                        "without, pass it on yourself.",
            errors={400: "Invalid email, name or role (VALIDATION_ERROR, INVALID_EMAIL).",
                    409: "A user or an account has this email (CONFLICT)."},
            links={"GetUser": ("/v1/users/{userId}", "get", BY_ID),
                   "UpdateUser": ("/v1/users/{userId}", "patch", BY_ID)}),
    }

    async def get(self):
        self.respond(await users.list_users(self.services.db, self.principal.account_id))

    @idempotent
    async def post(self):
        body = self.json_body(UserCreate)
        invited = await users.invite(self.services.db, self.services.box, self.application.settings_obj.base_url,
                                     self.principal.account_id, email=body.email, name=body.name, role=body.role,
                                     by=self.actor, actor_role=users.API_KEY_ROLE)
        if invited["invitationEmailed"]:
            self.services.delivery.notify()  # its mail is in the outbox
        self.respond(invited, 201)


class UserHandler(ApiHandler):
    path_params = {"userId": "The user's id (usr_…)."}
    operations = {
        "get": Operation("A user by id", {200: User}, tags=("users",), errors={404: NOT_FOUND}),
        "patch": Operation(
            "Change a user's role, name, email, active, available, capacity or emailNotifications", {200: User}, body=UserPatch,
            tags=("users",),
            description="active: false deactivates the user: its sessions end at once (open pages close), it "
                        "cannot sign in, and its open, pending and snoozed conversations become unassigned. "
                        "The account always keeps an active owner. available and capacity steer automatic "
                        "assignment (settings assignment): conversations waiting for an agent are assigned at once "
                        "when a user comes back or gets more capacity.",
            errors={400: "Invalid role, name, email, active, available, capacity (negative or not a whole "
                         "number) or emailNotifications (each key true or false), or none sent.", 404: NOT_FOUND,
                    409: "The change would leave the account without an active owner (LAST_OWNER), or the email "
                         "is another user's of this account (CONFLICT)."}),
        "delete": Operation(
            "Remove a user from the account", {200: (UserRemoved, "Removed.")}, tags=("users",),
            description="The user's sessions in this account and their sign-in links end at once, their open, "
                        "pending and snoozed conversations become unassigned, and their email and name are erased "
                        "in this account: notes, messages and the audit keep only the id (\"Removed user\"). The "
                        "same person's memberships of other accounts stay. Cannot be undone (invite the email "
                        "again to add them back).",
            errors={404: NOT_FOUND,
                    409: "The user is the account's last active owner (LAST_OWNER): make another user owner first."}),
    }

    async def get(self, user_id):
        self.respond(await users.get_user(self.services.db, self.principal.account_id, user_id))

    @idempotent
    async def patch(self, user_id):
        body = self.json_body(UserPatch)
        user, deactivated, _ = await users.update(self.services.db, self.principal.account_id, user_id,
                                                  changes=body.model_dump(exclude_unset=True), by=self.actor,
                                                  actor_role=users.API_KEY_ROLE)
        if deactivated or "role" in body.model_fields_set:  # their pages load again, with what their role has now
            self.services.hub.disconnect(None, user=user_id)
        assignment.wake(self.services)  # back, more capacity: waiting conversations may go to them now
        self.respond(user)

    async def delete(self, user_id):
        unassigned = await users.remove(self.services.db, self.principal.account_id, user_id, by=self.actor,
                                        actor_role=users.API_KEY_ROLE)
        self.services.hub.disconnect(None, user=user_id)  # their open pages close
        self.respond({"id": user_id, "removed": True, "unassignedConversations": unassigned})
