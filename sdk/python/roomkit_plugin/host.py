"""``plugin.host``: what a plugin can ask of the bot.

Every method maps to one host call of docs/PLUGIN-WIRE.md, the same
host-action code a C plugin's function table reaches. Actions (magix, state,
images, streams, room login...) are queued to the room and complete
asynchronously: they return at once, and a later failure (a read-only
session, a rate limit, a lost connection) reaches the plugin's
``on_throw_error`` handler with the action's name as domain. Reads (room
state, members, config, storage) wait for the bot's answer; while one waits,
the frames that arrive meanwhile are served in order.

Call it from handlers and timers only: they all run on the thread that
called ``plugin.run()``, and nothing here is locked for other threads.
"""

import json
from typing import Any, Callable, Dict, List, Optional

LOG_LEVELS: Dict[str, int] = {"debug": 0, "info": 1, "warning": 2, "error": 3}

KV_FULL = -2  # roomkit_plugin.h ROOMKIT_KV_FULL


class HostError(Exception):
    """A host call the bot refused at once (bad arguments, unknown room...).

    ``function`` is the host call's name, ``code`` the bot's result code.
    """

    def __init__(self, function: str, code: int, message: str = "") -> None:
        self.function = function
        self.code = code
        super().__init__("%s failed (%d)%s" % (function, code, ": " + message if message else ""))


class KVFullError(HostError):
    """``kv[key] = value`` past the plugin's ``storageLimitBytes``: nothing was written."""


def _json_text(value: Any) -> str:
    """A value as the JSON text the host call carries (``str`` is JSON-encoded too)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class KV:
    """Per-plugin durable storage, a dict of ``str`` -> ``str``.

    Kept by the bot under the plugin's name (its state file), so it survives
    restarts, crashes and reloads. ``kv["k"] = "v"`` and ``del kv["k"]``
    are written when they return; ``kv["k"]`` reads from the bot. Values are
    strings: store JSON text for anything else. Writing past the plugin's
    ``storageLimitBytes`` raises ``KVFullError`` and writes nothing.
    """

    def __init__(self, channel: "Any") -> None:
        self._channel = channel

    def get(self, key: str, default: Optional[str] = None) -> Optional[str]:
        value = self._channel.request("kv_get", {"key": key})
        return default if value is None else value

    def __getitem__(self, key: str) -> str:
        value = self._channel.request("kv_get", {"key": key})
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._channel.request("kv_get", {"key": key}) is not None

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("kv keys and values are str (store JSON text for other values)")
        result = self._channel.request("kv_set", {"key": key, "value": value})
        if result == KV_FULL:
            raise KVFullError("kv_set", result, "over the plugin's storageLimitBytes")
        if result != 0:
            raise HostError("kv_set", result)

    def __delitem__(self, key: str) -> None:
        if self._channel.request("kv_delete", {"key": key}) == 0:
            raise KeyError(key)

    def delete(self, key: str) -> bool:
        """Removes ``key``; whether it was there."""
        result = self._channel.request("kv_delete", {"key": key})
        if result is not None and result < 0:
            raise HostError("kv_delete", result)
        return result == 1

    def scan(self, prefix: str = "") -> Dict[str, str]:
        """Every key starting with ``prefix``, with its value."""
        found = self._channel.request("kv_scan", {"prefix": prefix})
        return found if isinstance(found, dict) else {}


class Host:
    """The bot, as a plugin sees it (``plugin.host``)."""

    def __init__(self, channel: "Any", timers: "Any") -> None:
        self._channel = channel
        self._timers = timers
        self.kv = KV(channel)

    # -- logging -------------------------------------------------------------
    def log(self, message: str, level: str = "info") -> None:
        """Writes ``message`` to the bot's log with the plugin's name.

        ``level``: ``debug``, ``info``, ``warning`` or ``error``.
        """
        if level not in LOG_LEVELS:
            raise ValueError("level must be one of %s, got %r" % (", ".join(LOG_LEVELS), level))
        self._channel.notify("log", {"level": LOG_LEVELS[level], "message": str(message)})

    # -- room actions (asynchronous; failures arrive as throw_error) ---------
    def dispatch_magix(self, room: str, event: str, payload: Any = None, to: Optional[int] = None) -> None:
        """Sends the magix event ``event`` with ``payload`` (any JSON value) to
        ``room``; to member ``to`` only when given."""
        args: Dict[str, Any] = {"room": room, "event": event, "payload": _json_text(payload)}
        if to is not None:
            args["to"] = _json_text(to)
        self._channel.notify("dispatch_magix", args)

    def set_global_state(self, room: str, patch: Dict[str, Any]) -> None:
        """Merges ``patch`` into the room's global state (one level deep)."""
        self._channel.notify("set_global_state", {"room": room, "patch": _json_text(patch)})

    def insert_image(self, room: str, image: Dict[str, Any]) -> None:
        """Inserts an image (``{"uuid", "url", "centerX", ...}``) into the current scene."""
        self._channel.notify("insert_image", {"room": room, "image": _json_text(image)})

    def put_scenes(self, room: str, dir: str, scenes: List[Any], index: int = -1) -> None:
        """Adds ``scenes`` under ``dir`` at ``index`` (-1: at the end)."""
        self._channel.notify("put_scenes", {"room": room, "dir": dir, "scenes": _json_text(scenes), "index": index})

    def set_member_state(self, room: str, patch: Dict[str, Any]) -> None:
        """Merges ``patch`` into the bot's own member state."""
        self._channel.notify("set_member_state", {"room": room, "patch": _json_text(patch)})

    def set_extra_info(self, room: str, key: str, value: str) -> None:
        """Sets the room extra-info ``key``."""
        self._channel.notify("set_extra_info", {"room": room, "key": key, "value": value})

    def publish_stream(self, room: str, stream: str, extra: Optional[str] = None) -> None:
        """Publishes stream ``stream`` (``extra``: free text the others see)."""
        self._channel.notify("publish_stream", {"room": room, "stream": stream, "extra": extra})

    def unpublish_stream(self, room: str, stream: str) -> None:
        """Withdraws stream ``stream``."""
        self._channel.notify("unpublish_stream", {"room": room, "stream": stream})

    def login_room(self, room: str) -> None:
        """Logs the bot in to ``room`` (must match the plugin's ``rooms``);
        the outcome arrives as ``roomStateChanged`` events."""
        self._channel.notify("login_room", {"room": room})

    def logout_room(self, room: str) -> None:
        """Logs the bot out of ``room``."""
        self._channel.notify("logout_room", {"room": room})

    def switch_room(self, from_room: str, to_room: str) -> None:
        """Leaves ``from_room`` for ``to_room``."""
        self._channel.notify("switch_room", {"from": from_room, "to": to_room})

    # -- reads (wait for the bot's answer) -----------------------------------
    def room_state(self, room: str) -> Optional[Dict[str, Any]]:
        """The room's state (``globalState``, scenes...), or None for a room the bot is not in."""
        return self._channel.request("room_state", {"room": room})

    def room_members(self, room: str) -> Optional[List[Dict[str, Any]]]:
        """The room's members (``memberId``, ``userId``, ``name``, ``payload``,
        ``memberState``), or None for a room the bot is not in."""
        return self._channel.request("room_members", {"room": room})

    def config(self, room: Optional[str] = None) -> Any:
        """The plugin's config as the bot resolves it for ``room`` (None: the
        base). ``plugin.config`` has the same without a round trip."""
        return self._channel.request("config_get", {"room": room})

    # -- timers (served in the plugin's own process) ---------------------------
    def set_timer(self, delay_ms: int, callback: Callable[[], Any], repeat_ms: int = 0) -> int:
        """Calls ``callback()`` after ``delay_ms``, then every ``repeat_ms`` when
        non-zero, between events (never concurrently with a handler). Returns
        the timer's id for ``cancel_timer``. An exception in ``callback`` is
        logged with its traceback; a repeating timer keeps running."""
        return self._timers.add(delay_ms, repeat_ms, callback)

    def cancel_timer(self, timer_id: int) -> None:
        """Stops the timer ``timer_id`` (no effect when it already ran or was cancelled)."""
        self._timers.cancel(timer_id)
