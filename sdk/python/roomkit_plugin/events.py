"""Room and player event kinds, and the dicts handlers receive.

A handler gets an event as the event log shows it (docs/CLI.md, "Event
log"): a dict with ``event`` (the line's type: ``magix``,
``roomStateChanged``...) and the type's fields. A magix event's own name is
``magixEvent``, as in the log: ``{"event": "magix", "room": "lobby", "from":
2, "magixEvent": "chat", "payload": "!py", "seq": 17}``.
"""

from typing import Any, Dict

# roomkit_plugin.h, enum roomkit_room_event_kind -> the event log's name.
ROOM_EVENT_NAMES: Dict[int, str] = {
    1: "roomStateChanged",
    2: "phaseChanged",
    3: "roomStateModified",
    4: "beingAbleToCommitChange",
    5: "disconnectWithError",
    6: "kickedWithReason",
    7: "catchErrorWhenAppendFrame",
    8: "magix",
    9: "userUpdate",
    10: "streamUpdate",
    11: "extraInfoUpdate",
    12: "tokenWillExpire",
    13: "resync",
}
ROOM_MAGIX = 8

# roomkit_plugin.h, enum roomkit_player_event_kind -> the event log's name.
PLAYER_EVENT_NAMES: Dict[int, str] = {
    1: "playerPhase",
    2: "loadFirstFrame",
    3: "scheduleTimeChanged",
    4: "playerStateChanged",
    5: "stoppedWithError",
    6: "errorWhenAppendFrame",
    7: "magix",
}

ROOM_EVENT_KINDS: Dict[str, int] = {name: kind for kind, name in ROOM_EVENT_NAMES.items()}


def as_logged(name: str, fields: Any) -> Dict[str, Any]:
    """``fields`` (the host's payload object) as the event log shows it.

    Changes ``fields`` in place (it is the handler's own copy): a field
    ``event`` (a magix event's name) becomes ``magixEvent`` and ``event``
    becomes the line's type.
    """
    if type(fields) is not dict:
        fields = {"payload": fields}
    elif "event" in fields:
        fields["magixEvent"] = fields.pop("event")
    fields["event"] = name
    return fields
