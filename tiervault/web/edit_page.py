"""Correcting and removing an entry: the edit form and the delete confirmation.

Edit: the form's fields are validated like ``tiervault capture`` validates
them (:mod:`tiervault.web.editing`); with any error the form comes back (400)
with the message next to its field and nothing is written. A form opened
before someone else changed the entry is refused (the entry's
``updated_at`` travels in the form) rather than overwriting their change.
Saving goes through ``VaultManager.update`` (a patch of the form's fields into the
same tier; id, origin and creation time kept; nothing written when nothing
changed), so FTS, the in-memory mirror and embed-on-write follow.

Delete: a GET shows what will be removed and asks; only the POST deletes.
Both refuse (403) a principal without write rights on the tier, whatever the
page showed.
"""

from __future__ import annotations

from starlette.responses import Response

from tiervault.errors import EntryNotFound
from tiervault.vault.entry import ENTRY_TYPES, SEVERITIES, Entry
from tiervault.web.call import Call
from tiervault.web.editing import EDITABLE_FIELDS, LONG_FIELDS, apply_form, form_values

__all__ = ["edit", "delete"]


def _target(call: Call) -> tuple[Entry, str]:
    entry_id = call.request.path_params["entry_id"]
    tier = str(call.form.get("tier") or call.params.get("tier") or "")
    if not tier:
        readable = call.readable()
        found = call.manager.get_many([entry_id], readable) if readable else {}
        if entry_id not in found:
            raise EntryNotFound(entry_id)
        _, tier = found[entry_id]  # (entry, tier)
    call.require_read(tier)
    call.require_write(tier)
    item = call.manager.store(tier).get(entry_id)
    if item is None:
        raise EntryNotFound(entry_id)
    return item, tier


def _version(item: Entry) -> str:
    return repr(item.updated_at)


def edit(call: Call) -> Response:
    item, tier = _target(call)
    errors: dict[str, str] = {}
    values = form_values(item)
    status = 200
    if call.request.method == "POST":
        result = apply_form(item, call.form)
        values, errors = result.values, result.errors
        if not errors and str(call.form.get("version", "")) != _version(item):
            errors["form"] = ("Someone changed this entry after you opened the form; nothing was "
                              "saved. Open it again to see their change.")
        if not errors and result.entry is not None:
            # The vault's own partial update: validated again the way a capture is, and
            # nothing is written when no field changed.
            update = call.manager.update(item.id, result.values, tier=tier)
            done = "saved" if update.changed else "unchanged"
            return call.redirect(f"/entry/{item.id}", {"tier": tier, "done": done})
        status = 400
    return call.render("edit.html", status=status, entry=item, tier=tier, values=values,
                       errors=errors, fields=EDITABLE_FIELDS, long_fields=LONG_FIELDS,
                       types=ENTRY_TYPES, severities=SEVERITIES, version=_version(item))


def delete(call: Call) -> Response:
    item, tier = _target(call)
    if call.request.method == "POST":
        if str(call.form.get("confirm", "")) != item.id:
            return call.render("delete.html", status=400, entry=item, tier=tier,
                               error="The confirmation did not name this entry; nothing was deleted.")
        call.manager.delete(item.id, tier)
        return call.redirect("/browse", {"tier": tier, "deleted": item.id})
    return call.render("delete.html", entry=item, tier=tier, error="")
