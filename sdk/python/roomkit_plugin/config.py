"""Layered plugin config, resolved per room exactly as roombot does for C plugins.

The manifest's ``config`` is the base. ``roomConfig`` maps room globs
(fnmatch: ``*``, ``?``, ``[...]``) to objects merged over the base one level
deep: a top-level key's value is replaced whole, never merged further.
Globs apply from least to most specific (fewest literal characters first,
then by text), so ``vip-*`` overrides ``*`` whatever order the file lists
them in (docs/PLUGINS.md, "Configure: layered, per room, live";
Sources/RoomKitPluginHost/PluginConfig.swift is the host's copy).
"""

from fnmatch import fnmatchcase
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional


def room_matches(pattern: str, room: str) -> bool:
    """Whether ``room`` matches the manifest glob ``pattern`` (``*`` matches all)."""
    return pattern == "*" or fnmatchcase(room, pattern)


def _literals(glob: str) -> int:
    return sum(1 for c in glob if c != "*" and c != "?")


def resolve(base: Any, room_config: Mapping[str, Any], room: Optional[str]) -> Any:
    """The config as a plugin sees it in ``room`` (the base for ``None``)."""
    if room is None:
        return base
    matching = sorted((g for g in room_config if room_matches(g, room)), key=lambda g: (_literals(g), g))
    if not matching:
        return base
    merged: Dict[str, Any] = dict(base) if isinstance(base, dict) else {}
    for glob in matching:
        layer = room_config.get(glob)
        if isinstance(layer, dict):
            merged.update(layer)
    return merged


class Config(Mapping):
    """``plugin.config``: the base config as a read-only mapping, and per room.

    ``plugin.config["greeting"]`` reads the base (the manifest's ``config``,
    or the last live change); ``plugin.config.for_room("vip-1")`` (or
    ``plugin.config("vip-1")``) is the base with the ``roomConfig`` layers for
    that room merged over it, as the bot resolves it: from the layers the
    bot sends at load, or, after a live change (which may change the layers
    too), asked once per room with the ``config_get`` host call.
    Both follow live changes (``PUT /v1/plugins/{name}/config``) as soon as
    the bot sends them.
    """

    def __init__(self, base: Any = None, room_config: Optional[Mapping[str, Any]] = None,
                 fetch: Optional[Callable[[str], Any]] = None) -> None:
        self._base: Any = {} if base is None else base
        # The roomConfig layers when known; otherwise ``fetch(room)`` asks the
        # bot (config_get) once per room until the base changes.
        self._room_config: Optional[Dict[str, Any]] = None if room_config is None else dict(room_config)
        self._fetch = fetch
        self._rooms: Dict[str, Any] = {}  # resolved configs, by room: pushed by the host or fetched

    # -- updates from the host ---------------------------------------------
    def _replace(self, base: Any, room_config: Optional[Mapping[str, Any]]) -> None:
        """A new base; ``room_config`` the layers, None when unknown (a live
        change may have changed them too: rooms are asked again)."""
        self._base = {} if base is None else base
        self._room_config = None if room_config is None else dict(room_config)
        self._rooms.clear()

    def _set_room(self, room: Optional[str], resolved: Any) -> None:
        if room is None:
            self._base = resolved
            self._rooms.clear()
        else:
            self._rooms[room] = resolved

    # -- reading ------------------------------------------------------------
    @property
    def base(self) -> Any:
        """The base config (any JSON value; usually a dict)."""
        return self._base

    @property
    def room_config(self) -> Optional[Dict[str, Any]]:
        """The ``roomConfig`` layers, glob -> object (None when the bot did not send them)."""
        return None if self._room_config is None else dict(self._room_config)

    def for_room(self, room: Optional[str]) -> Any:
        """The config as resolved for ``room`` (``None``: the base)."""
        if room is None:
            return self._base
        known = self._rooms.get(room)
        if known is not None:
            return known
        if self._room_config is not None or self._fetch is None:
            return resolve(self._base, self._room_config or {}, room)
        fetched = self._fetch(room)
        self._rooms[room] = fetched
        return fetched

    def __call__(self, room: Optional[str] = None) -> Any:
        return self.for_room(room)

    def _mapping(self) -> Mapping[str, Any]:
        return self._base if isinstance(self._base, dict) else {}

    def __getitem__(self, key: str) -> Any:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())

    def __repr__(self) -> str:
        return "Config(%r, roomConfig=%r)" % (self._base, self._room_config)


__all__: List[str] = ["Config", "resolve", "room_matches"]
