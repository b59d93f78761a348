"""``Plugin``: the decorators a plugin author uses, and the dispatch behind them.

Nothing here reads or writes the socket; ``wire.py`` decodes frames into the
``_on_*`` calls below and encodes what they return. So the whole surface is
tested in-process (``tests/test_plugin.py``) and over the wire
(``tests/test_wire.py``) with the same handlers.
"""

import logging
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from .config import Config
from .events import PLAYER_EVENT_NAMES, ROOM_EVENT_NAMES, ROOM_MAGIX, as_logged
from .host import Host
from .timers import Timers

Handler = Callable[..., Any]


class _Buffered:
    """The channel a ``Plugin`` talks to before ``run()`` connects it: host
    calls made at import time (a log line, say) wait here and go out first."""

    def __init__(self) -> None:
        self.pending: List[Tuple[str, Dict[str, Any]]] = []

    def notify(self, method: str, args: Dict[str, Any]) -> None:
        self.pending.append((method, args))

    def request(self, method: str, args: Dict[str, Any]) -> Any:
        raise RuntimeError("plugin.host.%s: the plugin is not connected to a bot yet "
                           "(call it from a handler, after plugin.run())" % method)


class _HostLogHandler(logging.Handler):
    """Sends ``logging`` records to the bot's log (``host.log``)."""

    def __init__(self, plugin: "Plugin") -> None:
        super().__init__()
        self.plugin = plugin

    def emit(self, record: logging.LogRecord) -> None:
        level = "error" if record.levelno >= logging.ERROR else "warning" if record.levelno >= logging.WARNING \
            else "info" if record.levelno >= logging.INFO else "debug"
        try:
            self.plugin.host.log(self.format(record), level)
        except Exception:
            self.handleError(record)


class Plugin:
    """A RoomKit plugin written in Python.

    Register handlers with the decorators, then call ``plugin.run()`` (it
    serves the bot until the bot unloads the plugin, then returns)::

        plugin = Plugin()

        @plugin.on_magix
        def on_magix(room, event):
            if event["payload"] == "!py":
                plugin.host.dispatch_magix(room, "reply", {"text": "pong-py"})

    Handlers run one at a time, in the order the bot sent the events, on the
    thread that called ``run()``. An exception in a handler is one failed
    call: it is logged with its traceback in the bot's log and the plugin
    keeps serving. Exiting the process, or being killed, is a crash (the bot
    restarts it; docs/PLUGINS.md, "Supervision").
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name
        self._timers = Timers()
        self._channel: Any = _Buffered()
        self.host = Host(self, self._timers)
        self.config = Config(fetch=lambda room: self.request("config_get", {"room": room}))
        self._url: Optional[Handler] = None
        self._magix: List[Tuple[Optional[str], Handler]] = []
        self._room: List[Handler] = []
        self._player: List[Handler] = []
        self._throw_error: List[Handler] = []
        self._config_changed: List[Handler] = []
        self._load: List[Handler] = []
        self._unload: List[Handler] = []
        self._export: Optional[Handler] = None
        self._import: Optional[Handler] = None
        self.failures = 0  # handler calls that raised, since the process started
        self.last_failure = ""  # the last one, in one line
        self._logger: Optional[logging.Logger] = None

    @property
    def log(self) -> logging.Logger:
        """A standard ``logging.Logger`` whose records go to the bot's log
        (``plugin.log.info("joined %s", room)``; ``plugin.log.exception``
        adds the traceback). Its level is DEBUG: the bot filters."""
        if self._logger is None:
            logger = logging.getLogger("roomkit_plugin.%s" % (self.name or "plugin"))
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            logger.addHandler(_HostLogHandler(self))
            self._logger = logger
        return self._logger

    # -- the host channel (Host calls these; run() swaps in the wire) --------
    def notify(self, method: str, args: Dict[str, Any]) -> None:
        self._channel.notify(method, args)

    def request(self, method: str, args: Dict[str, Any]) -> Any:
        return self._channel.request(method, args)

    def _connect(self, channel: Any) -> None:
        previous = self._channel
        self._channel = channel
        if isinstance(previous, _Buffered):
            for method, args in previous.pending:
                channel.notify(method, args)

    # -- decorators -------------------------------------------------------------
    def url_interrupter(self, fn: Handler) -> Handler:
        """``fn(url) -> str``: rewrites every image and scene URL the bot sends
        in the plugin's rooms. Returning ``None`` or raising is a failure:
        that step of the URL chain passes the URL on unchanged."""
        if self._url is not None:
            raise ValueError("url_interrupter is already %s" % self._url.__name__)
        self._url = fn
        return fn

    def on_magix(self, fn: Any = None) -> Any:
        """``fn(room, event)`` for every magix event in the plugin's rooms.

        ``event`` is the dict the event log shows (``from``, ``magixEvent``,
        ``payload``, ``seq``, ``replayed`` when it came in a resume's
        replay). ``@plugin.on_magix("ping")`` hears only magix events named
        ``ping``."""
        if isinstance(fn, str) or fn is None:
            name = fn

            def register(handler: Handler) -> Handler:
                self._magix.append((name, handler))
                return handler
            return register
        self._magix.append((None, fn))
        return fn

    def on_room_event(self, fn: Handler) -> Handler:
        """``fn(room, event)`` for every room event (magix included):
        ``event["event"]`` is its type as in the event log
        (``roomStateChanged``, ``userUpdate``, ``resync``...)."""
        self._room.append(fn)
        return fn

    def on_player_event(self, fn: Handler) -> Handler:
        """``fn(room, event)`` for replay (player) events."""
        self._player.append(fn)
        return fn

    def on_throw_error(self, fn: Handler) -> Handler:
        """``fn(domain, code, message)`` for the bot's errors, and for the
        plugin's own actions that failed (domain: the action's name)."""
        self._throw_error.append(fn)
        return fn

    def on_config_changed(self, fn: Handler) -> Handler:
        """``fn(room, config)`` on a live config change: once with ``room``
        None and the base, then once per room the bot is in with the config
        resolved for it. ``plugin.config`` is already updated when it runs."""
        self._config_changed.append(fn)
        return fn

    def on_load(self, fn: Handler) -> Handler:
        """``fn(config)`` once the bot has connected, before any event (also
        after every restart). Raising, or returning False or a non-zero int
        (the result the bot reports), refuses the load."""
        self._load.append(fn)
        return fn

    def on_unload(self, fn: Handler) -> Handler:
        """``fn()`` when the bot unloads the plugin, after its last event."""
        self._unload.append(fn)
        return fn

    def export_state(self, fn: Handler) -> Handler:
        """``fn() -> str | None``: the state handed to the new version on a
        reload (``POST /v1/plugins/{name}/reload``). Raising fails the reload."""
        self._export = fn
        return fn

    def import_state(self, fn: Handler) -> Handler:
        """``fn(state: str)``: takes the old version's exported state on a
        reload. Raising, or returning False or a non-zero int, refuses it and
        the reload is rolled back."""
        self._import = fn
        return fn

    # -- what the plugin declares ---------------------------------------------------
    @property
    def hooks(self) -> List[str]:
        """The manifest hook names the registered handlers serve."""
        found = []
        if self._url is not None:
            found.append("urlInterrupter")
        if self._throw_error:
            found.append("throwError")
        if self._room:
            found.append("room")
        elif self._magix:
            found.append("magix")
        if self._player:
            found.append("player")
        return found

    # -- dispatch (wire.py calls these) -------------------------------------------------
    def _fail(self, what: str) -> None:
        """Counts and logs the exception being handled (with its traceback)."""
        self.failures += 1
        kind, value, _ = sys.exc_info()
        self.last_failure = "%s raised %s: %s" % (what, kind.__name__ if kind else "?", value)
        text = "%s raised:\n%s" % (what, traceback.format_exc().rstrip())
        try:
            self.host.log(text, "error")
        except Exception:  # no channel (yet, or any more): stderr reaches the bot's log too
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def _call(self, what: str, fn: Handler, *args: Any) -> Tuple[bool, Any]:
        try:
            return True, fn(*args)
        except MemoryError:
            raise  # out of memory is the process's end, as for a C plugin (exit 70)
        except Exception:
            self._fail(what)
            return False, None

    def _run_timer(self, what: str, fn: Handler) -> None:
        self._call(what, fn)

    def _on_load(self, config: Any, room_config: Optional[Dict[str, Any]]) -> Tuple[int, str]:
        """(result, why): 0 loaded; otherwise the load is refused."""
        self.config._replace(config, room_config)
        for fn in self._load:
            ok, returned = self._call("on_load", fn, self.config.base)
            if not ok:
                return -1, "on_load handler %s raised (traceback in the log)" % fn.__name__
            code = _result_code(returned)
            if code != 0:
                return code, "on_load handler %s returned %r" % (fn.__name__, returned)
        return 0, ""

    def _on_unload(self) -> None:
        for fn in self._unload:
            self._call("on_unload", fn)
        self._timers.clear()

    def _on_room_event(self, kind: int, room: str, fields: Any) -> bool:
        """One room event; False when a handler raised. The hot path of every
        plugin, so the handler calls are inlined rather than via ``_call``."""
        if kind == ROOM_MAGIX:
            event = as_logged("magix", fields)
            custom = event.get("magixEvent")
        else:
            name = ROOM_EVENT_NAMES.get(kind)
            if name is None:  # a kind newer than this SDK: ignored, never a failure
                return True
            event = as_logged(name, fields)
            custom = None
        ok = True
        if kind == ROOM_MAGIX:
            for only, fn in self._magix:
                if only is None or only == custom:
                    try:
                        fn(room, event)
                    except MemoryError:
                        raise
                    except Exception:
                        self._fail("on_magix handler %s" % fn.__name__)
                        ok = False
        for fn in self._room:
            try:
                fn(room, event)
            except MemoryError:
                raise
            except Exception:
                self._fail("on_room_event handler %s" % fn.__name__)
                ok = False
        return ok

    def _on_player_event(self, kind: int, room: str, fields: Any) -> bool:
        name = PLAYER_EVENT_NAMES.get(kind)
        if name is None:
            return True
        event = as_logged(name, fields)
        ok = True
        for fn in self._player:
            if not self._call("on_player_event handler %s" % fn.__name__, fn, room, event)[0]:
                ok = False
        return ok

    def _on_throw_error(self, domain: str, code: int, message: str) -> bool:
        ok = True
        for fn in self._throw_error:
            if not self._call("on_throw_error handler %s" % fn.__name__, fn, domain, code, message)[0]:
                ok = False
        return ok

    def _on_url(self, url: str) -> Optional[str]:
        """The rewritten URL, or None for a failure (no handler, None, an
        exception, or something other than a str)."""
        if self._url is None:
            return None
        ok, result = self._call("url_interrupter %s" % self._url.__name__, self._url, url)
        if not ok or result is None:
            return None
        if not isinstance(result, str):
            self.failures += 1
            self.host.log("url_interrupter %s returned %s, not a str: counted as a failure"
                          % (self._url.__name__, type(result).__name__), "error")
            return None
        return result

    def _on_config_changed(self, room: Optional[str], config: Any,
                           room_config: Optional[Dict[str, Any]] = None) -> bool:
        if room is None:
            self.config._replace(config, room_config)
        else:
            self.config._set_room(room, config)
        ok = True
        for fn in self._config_changed:
            if not self._call("on_config_changed handler %s" % fn.__name__, fn, room, config)[0]:
                ok = False
        return ok

    def _on_export_state(self) -> Tuple[bool, Optional[str]]:
        """(ok, state): state None means "nothing to hand over"."""
        if self._export is None:
            return True, None
        ok, state = self._call("export_state %s" % self._export.__name__, self._export)
        if not ok:
            return False, None
        if state is not None and not isinstance(state, str):
            self.host.log("export_state %s returned %s, not a str or None (use json.dumps)"
                          % (self._export.__name__, type(state).__name__), "error")
            return False, None
        return True, state

    def _on_import_state(self, state: str) -> int:
        """0 accepts the state; anything else refuses it (the reload is rolled back)."""
        if self._import is None:
            return -100  # PLUGIN-WIRE.md §7: no importState hook
        ok, returned = self._call("import_state %s" % self._import.__name__, self._import, state)
        return _result_code(returned) if ok else -1

    # -- running ------------------------------------------------------------------------
    def run(self) -> None:
        """Serves the bot over the wire (docs/PLUGIN-WIRE.md) until it unloads
        the plugin or closes the connection, then exits the process (status
        0; 71 after a frame it cannot parse, 70 out of memory). Started by
        hand (no wire on fd 3), it says how to run it and exits with 64."""
        from .wire import serve
        serve(self)


def _result_code(returned: Any) -> int:
    """A load or import handler's return value as the C hook's int result:
    None or True accept (0), False refuses (-1), an int is the result itself."""
    if returned is None or returned is True:
        return 0
    if returned is False:
        return -1
    if isinstance(returned, int):
        return returned
    return 0
