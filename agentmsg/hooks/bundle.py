"""One file of compiled modules for the hook process: one read instead of a search per module.

A hook that starts an interpreter spends most of its time importing: for
each of its ~45 modules the path finder stats and lists directories, opens
the ``.pyc``, reads and checks it.  The house split the hook's code into
small modules, and each one costs that search (about 0.1 ms) whatever it
holds.  The bundle keeps the compiled code of every pure-Python module a
hook process imported (agentmsg's and the standard library's) in one file
beside the ``.pyc`` files, and a finder placed first on ``sys.meta_path``
serves them from it: one open, one read of the index, and one read per
module imported (of its slice alone: the file holds every hook's modules).

It is a cache, and is checked like one:

* each module's code is used only while its source file has the size and
  modification time recorded with it (what ``.pyc`` files check); any other
  module, and any changed one, is imported the ordinary way;
* the file is used only if it is a regular file owned by this user that no
  one else can write, starts with this interpreter's bytecode magic, and
  unmarshals; anything else is ignored (and replaced);
* a process that imported something the bundle did not hold (or held stale)
  writes a new one when it is done (:func:`save`), from the ``.pyc`` files
  the ordinary import just checked, by rename: never a torn file.

Nothing here may raise into a hook: every failure means "import the
ordinary way".  No ``from __future__ import annotations`` here: this module
is imported before the finder is in place, and ``__future__`` would cost a
path search of its own (annotations naming typing-only names are quoted).
Standard library only, and no import beyond what the interpreter has loaded
at start-up (``marshal``, ``posix``, ``sys``): not even ``os``, which the pre-tool hook does without
(agentmsg/pathops.py); the paths here are absolute, joined with ``/``.
"""

import marshal
import posix
import sys
from _frozen_importlib import ModuleSpec  # importlib.machinery's, loaded at start-up: costs nothing
from _frozen_importlib_external import EXTENSION_SUFFIXES, MAGIC_NUMBER, ExtensionFileLoader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.abc import Loader as _Loader  # what the finder is; importlib.abc itself is slow to import
    from typing import Any
else:
    _Loader = object

#: The file's first bytes: a name and the interpreter's own bytecode magic (a bundle from another Python
#: version is never used); then the folders its modules come from (see :func:`header`).
_MAGIC = b"agentmsg-hook-bundle\n" + MAGIC_NUMBER + b"\n"
#: The most a bundle may hold: twice what a hook imports today, so a stray import cannot grow it.
MAX_MODULES = 200

#: The index: name -> (is a package, source path, source mtime_ns, source size, offset and length of its
#: marshalled code in the code that follows the index).  Only the index is unmarshalled when the file is
#: read; a module's code is unmarshalled when it is imported.  An extension module of the standard library
#: (``_json``, ``_sha256``: a ``.so``) has its file as the source and no code: the finder hands it to the
#: import system's own extension loader, sparing the path search (the listing of every folder on
#: ``sys.path`` before it) alone.
Entry = tuple[bool, str, int, int, int, int]
#: A module as :func:`pack` takes it: the index's first four fields, then its marshalled code.
Module = tuple[bool, str, int, int, "bytes | memoryview"]


def homes(plugin_root: str) -> tuple[str, ...]:
    """The folders a bundle's modules may come from: this checkout's package and this interpreter's standard
    library.  A bundle copied along with the checkout (a host's plugin cache copies folders) names the folders
    of the original, so it is not used: its code would be the original's, not this copy's."""
    stdlib = getattr(sys, "_stdlib_dir", None) or _stdlib_of_os()
    return f"{plugin_root.rstrip('/')}/agentmsg/", f"{stdlib.rstrip('/')}/"


def _stdlib_of_os() -> str:
    import os  # Python 3.10 has no sys._stdlib_dir

    return os.path.dirname(os.__file__)


def header(plugin_root: str) -> bytes:
    return _MAGIC + "\0".join(homes(plugin_root)).encode("utf-8", "surrogateescape") + b"\n"


def path_for(plugin_root: str) -> tuple[str, str]:
    """Where the bundle lives, as (a folder, a path below it): beside agentmsg's own ``.pyc`` files, in the
    checkout or under ``sys.pycache_prefix``.  One for every hook and host: a process reads the code of
    the modules it imports, and only carries the others' bytes."""
    name = f"hooks.{sys.implementation.cache_tag}.bundle"
    prefix = sys.pycache_prefix
    if prefix:
        return prefix, "/".join([*plugin_root.strip("/").split("/"), "agentmsg", name])
    return f"{plugin_root.rstrip('/')}/agentmsg", f"__pycache__/{name}"


class Code:
    """A bundle's code section, read one module's slice at a time: from the open file (``os.pread``: a hook
    reads the few modules it imports, not the whole file) or from bytes in memory."""

    def __init__(self, data: memoryview | None = None, fd: int = -1, start: int = 0) -> None:
        self.data, self.fd, self.start = data, fd, start

    def read(self, offset: int, length: int) -> bytes | memoryview:
        if self.data is not None:
            return self.data[offset:offset + length]
        got = posix.pread(self.fd, length, self.start + offset)
        if len(got) != length:
            raise ValueError("the bundle was cut short")
        return got

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            try:
                posix.close(fd)
            except OSError:
                pass


class Finder(_Loader):
    """A ``sys.meta_path`` finder and loader for the modules of one bundle."""

    def __init__(self, plugin_root: str, where: tuple[str, str] | None, entries: dict[str, Entry],
                 code: Code | None = None) -> None:
        self.plugin_root = plugin_root
        self.where = where
        self.entries = entries
        self.code = code if code is not None else Code(memoryview(b""))
        self.stale = False  # the bundle held a module whose source has changed since
        self.refused = False  # a file was there but not usable (damaged, foreign, a link): replaced, not kept
        self.before = frozenset(sys.modules)  # imported before the finder: never served from the bundle

    def find_spec(self, name: str, path: "Any" = None, target: "Any" = None) -> "Any":
        entry = self.entries.get(name)
        if entry is None:
            return None
        try:
            is_pkg, origin, mtime_ns, size, offset, length = entry
            st = posix.stat(origin)
            fresh = st.st_mtime_ns == mtime_ns and st.st_size == size
            if fresh and _extension(origin):
                spec = ModuleSpec(name, ExtensionFileLoader(name, origin), origin=origin)
                spec.has_location = True
                return spec
            code = marshal.loads(self.code.read(offset, length)) if fresh else None
        except Exception:  # a source gone, an entry or code that does not read: the ordinary import
            fresh, code = False, None
        if not fresh or type(code).__name__ != "code":
            self.stale = True
            return None
        spec = ModuleSpec(name, self, origin=origin, is_package=is_pkg, loader_state=code)
        spec.has_location = True
        if is_pkg:
            spec.submodule_search_locations = [origin.rpartition("/")[0]]
        return spec

    def create_module(self, spec: "Any") -> None:
        return None

    def exec_module(self, module: "Any") -> None:
        exec(module.__spec__.loader_state, module.__dict__)


def load(plugin_root: str, where: tuple[str, str] | None = None) -> Finder:
    """Put a finder for the bundle of ``plugin_root`` (at ``where``, by default :func:`path_for`) first on
    ``sys.meta_path``: one with no modules when there is no usable bundle there."""
    entries: dict[str, Entry] = {}
    code: Code | None = None
    refused = False
    try:
        where = where or path_for(plugin_root)
    except Exception:  # no usable path: no bundle
        where = None
    if where is not None:
        try:
            fd = posix.open(f"{where[0].rstrip('/')}/{where[1]}", posix.O_RDONLY | posix.O_NOFOLLOW | posix.O_CLOEXEC)
        except FileNotFoundError:
            fd = -1
        except OSError:  # a symlink (ELOOP), a folder, no permission
            fd, refused = -1, True
        if fd >= 0:
            entries, code = _index(fd, header(plugin_root))
            refused = not entries
            if code is None:
                posix.close(fd)
    finder = Finder(plugin_root, where, entries, code)
    finder.refused = refused
    sys.meta_path.insert(0, finder)
    return finder


def _index(fd: int, head: bytes) -> tuple[dict[str, Entry], Code | None]:
    """The index of the bundle open on ``fd`` and its code section (left in the file), if it is a regular file
    of this user's that no one else can write, made for ``head``, and exactly as long as its index says (a
    bundle cut short is distrusted whole); else nothing."""
    try:
        st = posix.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000 and st.st_uid == posix.geteuid() and not st.st_mode & 0o022):
            return {}, None
        first = posix.pread(fd, len(head) + 4, 0)
        if first[:len(head)] != head or len(first) != len(head) + 4:
            return {}, None
        size = int.from_bytes(first[len(head):], "little")
        start = len(first) + size
        packed = posix.pread(fd, size, len(first))
        index = marshal.loads(packed) if len(packed) == size else None
        if not _sound(index, st.st_size - start):
            return {}, None
        return index, Code(fd=fd, start=start)  # type: ignore[return-value]  # _sound checked it
    except Exception:  # a damaged or foreign file: import the ordinary way, and replace it
        return {}, None


def _sound(index: object, code_size: int) -> bool:
    """An index of ours whose slices end exactly where the code does."""
    return isinstance(index, dict) and 0 < len(index) <= MAX_MODULES and \
        max(e[4] + e[5] for e in index.values()) == code_size


def unpack(data: bytes, head: bytes) -> tuple[dict[str, Entry], Code | None]:
    """The index and the code of a bundle's bytes (as :func:`_index` reads them from a file); nothing when they
    are not a bundle for ``head``."""
    try:
        if not data.startswith(head):
            return {}, None
        at = len(head) + 4
        size = int.from_bytes(data[len(head):at], "little")
        view = memoryview(data)
        index = marshal.loads(view[at:at + size])
        code = view[at + size:]
        if not _sound(index, len(code)):
            return {}, None  # not ours, or cut short (a full disk): all of it is distrusted
        return index, Code(code)
    except Exception:  # a damaged or foreign file: import the ordinary way, and replace it
        return {}, None


def pack(head: bytes, modules: dict[str, Module]) -> bytes:
    """A bundle's bytes: ``head``, the index's length and the index, then each module's code."""
    index: dict[str, Entry] = {}
    code: list[bytes | memoryview] = []
    at = 0
    for name, (is_pkg, origin, mtime_ns, size, data) in modules.items():
        index[name] = (is_pkg, origin, mtime_ns, size, at, len(data))
        code.append(data)
        at += len(data)
    packed = marshal.dumps(index)
    return b"".join([head, len(packed).to_bytes(4, "little"), packed, *code])


def save(finder: Finder) -> None:
    """Write a new bundle if this process imported what the old one did not hold fresh; never raises."""
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass
    try:
        _save(finder)
    finally:
        finder.code.close()


def _save(finder: Finder) -> None:
    if finder.where is None or sys.dont_write_bytecode:
        return
    try:
        own = homes(finder.plugin_root)
        if not finder.stale and not any((_source(m) or "").startswith(own) for n, m in list(sys.modules.items())
                                        if n not in finder.entries and n not in finder.before):
            return  # the bundle held every module this process imported
        modules = _collect(finder)
        if modules:
            from agentmsg import fsio  # loaded already: the hooks use it

            base, rel = finder.where
            if finder.refused:  # never write through it, nor keep its permission bits
                posix.unlink(f"{base.rstrip('/')}/{rel}")
            fsio.write_outside(base, rel, pack(header(finder.plugin_root), modules), create_base=False)
    except Exception:  # a cache: the next run tries again
        pass


def _collect(finder: Finder) -> dict[str, Module]:
    """The bundle's modules that still match their source, and every pure-Python module this process
    imported (from the ``.pyc`` the ordinary import just checked)."""
    modules: dict[str, Module] = {}
    own = homes(finder.plugin_root)

    def kept(entry: Entry) -> Module:
        is_pkg, origin, mtime_ns, size, offset, length = entry
        return is_pkg, origin, mtime_ns, size, finder.code.read(offset, length)

    for name, entry in finder.entries.items():
        if name in sys.modules:
            continue  # taken from this process below
        try:
            st = posix.stat(entry[1])
            if (st.st_mtime_ns, st.st_size) == (entry[2], entry[3]):
                modules[name] = kept(entry)
        except (OSError, TypeError, IndexError, ValueError):
            continue
    for name, module in list(sys.modules.items()):
        origin = _source(module)
        spec = getattr(module, "__spec__", None)
        if (origin is None or spec is None or name in finder.before or len(modules) >= MAX_MODULES
                or not origin.startswith(own)):
            continue
        try:
            st = posix.stat(origin)
        except OSError:
            continue
        old = finder.entries.get(name)
        if spec.loader is finder and old is not None:
            modules[name] = kept(old)  # served from the bundle, so it matched its source a moment ago
            continue
        code = b"" if _extension(origin) else _compiled(getattr(spec, "cached", None), st)
        if code is not None:
            modules[name] = (spec.submodule_search_locations is not None, origin, st.st_mtime_ns, st.st_size, code)
    return modules


def _source(module: object) -> str | None:
    """The source file of a pure-Python module, or the file of an extension module (None for a built-in or
    frozen module, or one from a zip)."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if not isinstance(origin, str):
        return None
    if origin.endswith(".py"):
        return origin
    return origin if _extension(origin) and isinstance(getattr(spec, "loader", None), ExtensionFileLoader) else None


def _extension(origin: str) -> bool:
    return origin.endswith(tuple(EXTENSION_SUFFIXES))


def _compiled(cached: object, source: "posix.stat_result") -> bytes | None:
    """The marshalled code of a ``.pyc`` written for exactly this source (timestamp-checked), else None."""
    if not isinstance(cached, str):
        return None
    try:
        with open(cached, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if len(data) < 16 or data[:4] != MAGIC_NUMBER or int.from_bytes(data[4:8], "little") != 0:
        return None  # another Python's, or a hash-checked .pyc: its code is not checked against the source here
    if (int.from_bytes(data[8:12], "little") != int(source.st_mtime) & 0xFFFFFFFF
            or int.from_bytes(data[12:16], "little") != source.st_size & 0xFFFFFFFF):
        return None
    return data[16:]
