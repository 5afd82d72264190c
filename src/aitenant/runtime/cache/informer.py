"""Informers: list, then watch from the list's resourceVersion, into an in-memory store.

* Resumes a cut watch from the last resourceVersion seen; relists on 410 Gone and emits the
  difference (adds, updates, deletes) so handlers never miss a change.
* Reconnects with capped exponential backoff on any other error.
* Objects are kept as compact JSON deflated against the kind's first object
  (``runtime/cache/packing.py``: a small fraction of the memory of the same objects as Python dicts,
  which matters at thousands of objects), and handed out as fresh plain dicts (lightkube
  generic resources), the form the API sent, without ``metadata.managedFields``.
* ``namespace="*"`` (the default) watches a namespaced kind in every namespace; pass None for
  cluster-scoped kinds.
* Indexes map an object to index values (e.g. gateway ref → tenants); lookups are O(1).
* ``remember`` takes the copy one of our own writes returned; ``get`` serves it until the watch
  delivers that version or a newer one, so a pass right after a write never decides from the
  copy before it (a status the pass believes written, but which is not, would stay wrong until
  the next change). Handlers and indexes see only what the watch delivers. Resource versions
  compare as integers (KEP-5504, Kubernetes 1.35; etcd's revision before that); where they do
  not parse, nothing is remembered. ``ours(obj)`` tells a handler that the version it is given
  is one our own writes made, so a change someone else made (a status written over ours) can
  be told from the echo of our own write.
* ``fields`` narrows the watch with a field selector (e.g. one object by ``metadata.name``);
  ``transform`` reduces every object before it is kept (only what readers use: memory).
* ``optional``: the kind may not be served (its CRD not installed). A list answered 404
  counts as synced with nothing in it, and is retried with backoff until the kind appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Literal

from lightkube import ApiError, AsyncClient

from aitenant.runtime.cache.packing import Packer, decode, encode
from aitenant.runtime.client.lightkube_private import dict_resource, resource_kind
from aitenant.runtime.client.requests import LIST_PAGE

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace or "", name)
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Handler = Callable[[EventType, Obj | None, Obj], None]
IndexFunc = Callable[[Obj], list[str]]
Transform = Callable[[Obj], Obj]


def plain(obj: Any) -> Obj:
    """A plain dict (generic resources are dicts already) without ``metadata.managedFields``
    (nothing reads them from a cache, and a write that omits them leaves them unchanged)."""
    data = dict(obj) if isinstance(obj, dict) else obj.to_dict()
    meta = data.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        data["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return data


def as_dict(obj: Any) -> Obj:
    """``plain``, with keys and short strings interned: objects held as dicts for a while
    repeat the same keys, labels and values; sharing them roughly halves their memory."""
    return _shared(plain(obj))


SHARED_MAX = 64  # longer strings (certificates, long messages) are rarely repeated


def _shared(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(k): _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    if isinstance(value, str) and len(value) <= SHARED_MAX:
        return sys.intern(value)
    return value


def is_newer(obj: Obj, than: Obj) -> bool:
    """``obj`` is a later version of the same object than ``than`` (False if unknowable)."""
    a = obj["metadata"].get("resourceVersion") or ""
    b = than["metadata"].get("resourceVersion") or ""
    if not (a.isdigit() and b.isdigit()) or a.startswith("0") or b.startswith("0"):
        return False
    return (len(a), a) > (len(b), b)


def supersedes(written: Obj, stored: Obj) -> bool:
    """Our write's answer ``written`` is newer than the cached ``stored``: a later version, or
    the answer to removing an object's last finalizer. The API server then deletes the object
    and answers with it at the version it had (no finalizers left): no later version will come,
    only the watch's DELETED event."""
    if is_newer(written, stored):
        return True
    meta = written["metadata"]
    return (
        bool(meta.get("deletionTimestamp"))
        and not meta.get("finalizers")
        and bool(meta.get("resourceVersion"))
        and meta.get("resourceVersion") == stored["metadata"].get("resourceVersion")
    )


def _at_version(version: str) -> Obj:
    return {"metadata": {"resourceVersion": version}}


def object_key(obj: Obj) -> ObjKey:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Informer:
    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        *,
        namespace: str | None = "*",
        labels: dict[str, str] | None = None,
        fields: dict[str, str] | None = None,
        transform: Transform | None = None,
        optional: bool = False,
        watch_timeout: int = 290,
        max_backoff: float = 30.0,
    ) -> None:
        self.client = client
        self.resource = resource
        # Listed and watched as dicts, the form kept: no typed model built and taken apart.
        self._wire_resource = dict_resource(resource)
        self.kind: str = resource_kind(resource)
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.transform = transform
        self.optional = optional
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.synced = asyncio.Event()
        # True while the watch is down and the informer waits to reconnect or relist: events
        # are being missed, so what it holds may be out of date by more than a moment.
        self.interrupted = False
        self._store: dict[ObjKey, bytes] = {}  # packed (runtime/cache/packing.py)
        self._packer = Packer()
        self._written: dict[ObjKey, Obj] = {}  # our writes the watch has not delivered yet
        # The version our last write of an object returned, until the watch has delivered it
        # (``ours``: handlers tell our own changes from someone else's).
        self._own_versions: dict[ObjKey, str] = {}
        self._handlers: list[Handler] = []
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indexes: dict[str, defaultdict[str, set[ObjKey]]] = {}
        # Indexes are also read from the webhook's thread (runtime/serving/server_thread.py): a
        # change of an object and of its index entries is one step for ``by_index``.
        self._index_lock = threading.Lock()
        self.relists = 0

    # -- read side ---------------------------------------------------------------------------
    def _stored(self, key: ObjKey) -> Obj | None:
        packed = self._store.get(key)
        return None if packed is None else self._packer.unpack(packed)

    def get(self, namespace: str, name: str) -> Obj | None:
        """A fresh copy of the object (the caller may change it), or None."""
        key = (namespace, name)
        stored = self._stored(key)
        written = self._written.get(key)
        if written is None:
            return stored
        if stored is not None and supersedes(written, stored):
            return decode(encode(written))  # a fresh copy for the caller
        del self._written[key]  # the watch caught up, or the object is gone
        return stored

    def remember(self, obj: Any) -> None:
        """A copy our own write returned (a dict, or the typed model a built-in kind's write
        answers with): ``get`` serves it until the watch catches up."""
        kept = self._keep(obj)
        key = object_key(kept)
        stored = self._stored(key)
        if stored is None:
            return  # not (yet) watched: its event will come, and nobody asks ``ours`` before
        if version := kept["metadata"].get("resourceVersion"):
            self._own_versions[key] = version
        if supersedes(kept, stored):
            self._written[key] = as_dict(kept)

    def ours(self, obj: Obj) -> bool:
        """``obj`` (an object a handler is given) is a version our own writes made: the version
        our last write returned, or an earlier one. Asked from a handler, before the informer
        forgets that version. False when unknowable (the watch delivered our write before the
        write's answer was remembered): the caller then takes it for someone else's change."""
        own = self._own_versions.get(object_key(obj))
        if own is None:
            return False
        version = obj["metadata"].get("resourceVersion")
        return version == own or is_newer(_at_version(own), obj)

    def list(self) -> list[Obj]:
        return [self._packer.unpack(packed) for packed in self._store.values()]

    def __len__(self) -> int:
        return len(self._store)

    def stored_bytes(self) -> int:
        """What the cached copies take as packed JSON (the bulk of the cache's memory)."""
        return sum(map(len, self._store.values()))

    def add_index(self, name: str, func: IndexFunc) -> None:
        with self._index_lock:
            self._index_funcs[name] = func
            index: defaultdict[str, set[ObjKey]] = defaultdict(set)
            for key, packed in self._store.items():
                for value in func(self._packer.unpack(packed)):
                    index[value].add(key)
            self._indexes[name] = index

    def has_index(self, name: str) -> bool:
        return name in self._indexes

    def by_index(self, name: str, value: str) -> list[Obj]:
        """Every cached object whose index ``name`` holds ``value``; safe from any thread."""
        with self._index_lock:
            keys = self._indexes[name].get(value, ())
            packed = [self._store[k] for k in keys if k in self._store]
        return [self._packer.unpack(p) for p in packed]

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    # -- write side --------------------------------------------------------------------------
    def _keep(self, obj: Any) -> Obj:
        data = plain(obj)
        return self.transform(data) if self.transform is not None else data

    def _index_remove(self, key: ObjKey, obj: Obj) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _index_add(self, key: ObjKey, obj: Obj) -> None:
        for name, func in self._index_funcs.items():
            for value in func(obj):
                self._indexes[name][value].add(key)

    def _apply(self, event: EventType, obj: Obj) -> None:
        key = object_key(obj)
        old = self._stored(key)
        with self._index_lock:
            if old is not None:
                self._index_remove(key, old)
            if event == "DELETED":
                self._store.pop(key, None)
                self._written.pop(key, None)
                self._own_versions.pop(key, None)
            else:
                self._store[key] = self._packer.pack(obj)
                self._index_add(key, obj)
                if old is not None:
                    event = "MODIFIED"
                written = self._written.get(key)
                if written is not None and not supersedes(written, obj):
                    del self._written[key]  # caught up: no need to wait for a read to notice
        for handler in self._handlers:
            try:
                handler(event, old, obj)
            except Exception:  # a handler bug must not kill the watch
                log.exception("%s informer handler failed", self.kind)
        own = self._own_versions.get(key)
        if own is not None and not is_newer(_at_version(own), obj):
            del self._own_versions[key]  # delivered (or passed): later events are news

    def _merge(self, obj: Obj) -> ObjKey:
        """One listed object: an event when it is new or changed since we last saw it."""
        key = object_key(obj)
        old = self._stored(key)
        rv = obj["metadata"].get("resourceVersion")
        if old is None or old["metadata"].get("resourceVersion") != rv:
            self._apply("MODIFIED" if old else "ADDED", obj)
        return key

    def _drop_unlisted(self, seen: set[ObjKey]) -> None:
        for key in [k for k in self._store if k not in seen]:
            self._apply("DELETED", self._packer.unpack(self._store[key]))

    def _replace_all(self, objs: list[Obj]) -> None:
        self._drop_unlisted({self._merge(obj) for obj in objs})

    async def _list(self) -> str:
        """List in pages, each object stored as it arrives: a fresh process with a thousand
        tenants never holds a whole kind as dicts at once (its peak memory, docs/design.md
        §9.5)."""
        kwargs: dict[str, Any] = {"labels": self.labels, "fields": self.fields}
        if self.namespace is not None:
            kwargs["namespace"] = self.namespace
        listing = self.client.list(self._wire_resource, chunk_size=LIST_PAGE, **kwargs)
        seen = {self._merge(self._keep(o)) async for o in listing}
        try:
            version = listing.resourceVersion
        except Exception:  # empty list before 1.x: resourceVersion only after iteration
            version = ""
        self._drop_unlisted(seen)
        return version

    async def run(self, lists: asyncio.Semaphore | None = None) -> None:
        """List and watch until cancelled. Each list (the first, any relist) holds a slot of
        ``lists``, which bounds how many informers list at once."""
        version = ""
        backoff = initial = min(0.5, self.max_backoff)
        need_list = True
        while True:
            try:
                if need_list:
                    async with lists if lists is not None else contextlib.nullcontext():
                        version = await self._list()
                    need_list = False
                    self.synced.set()
                # Reconnecting from ``version`` delivers what was missed straight away.
                self.interrupted = False
                kwargs: dict[str, Any] = {
                    "labels": self.labels,
                    "fields": self.fields,
                    "resource_version": version,
                    "server_timeout": self.watch_timeout,
                }
                if self.namespace is not None:
                    kwargs["namespace"] = self.namespace
                async for event, obj in self.client.watch(self._wire_resource, **kwargs):
                    data = self._keep(obj)
                    version = data["metadata"].get("resourceVersion", version)
                    if event in ("ADDED", "MODIFIED", "DELETED"):
                        self._apply(event, data)
                    backoff = initial
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                self.interrupted = True
                if exc.status.code == 410:
                    log.info("%s watch expired (410 Gone); relisting", self.kind)
                    self.relists += 1
                    need_list = True
                    continue
                if exc.status.code == 404 and self.optional and need_list:
                    # Not served: nothing of this kind exists (a miss is an answer). Look
                    # again later.
                    self._replace_all([])
                    self.synced.set()
                    self.interrupted = False
                    log.debug("%s not served; retrying in %.1fs", self.kind, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
                log.warning("%s watch failed: %s; retrying in %.1fs", self.kind, exc, backoff)
            except Exception as exc:
                self.interrupted = True
                log.warning("%s watch interrupted: %r; retrying in %.1fs", self.kind, exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)
