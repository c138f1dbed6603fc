"""What the checker's caches may read: files it wrote itself, on this machine and account.

A cache folder can come from elsewhere: `.spmdcheck_cache/` sits in the project, so a pull request can
add one, and its names are hashes of public inputs. So every file a cache writes is sealed with an
HMAC-SHA256 under a per-user key that never leaves the user's cache dir, and a file is read back only
if it is a regular file of this account (never through a symlink, never a FIFO or a device: the open is
`O_NOFOLLOW | O_NONBLOCK`, and the file is checked with `fstat` before a byte is read), no larger than its
cap, and its seal verifies for the name it is read under. Anything else is ignored, as if absent.

A leaf module (standard library only): the result cache (`spmdcheck/engine/result_cache.py`) and the stub registry's
cache (`spmdcheck/rules/cache.py`) both use it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pathlib
import stat
import tempfile

KEY_FILE = "hmac-key"  # in the user cache dir: 32 random bytes, mode 0600
KEY_BYTES = 32
SEAL = b"spmdcheck-hmac-sha256 "  # a sealed file: SEAL, 64 hex digits, a newline, then the payload
_SEAL_LENGTH = len(SEAL) + 64 + 1
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_keys: dict[pathlib.Path, bytes] = {}


def user_cache_root() -> pathlib.Path:
    """`$XDG_CACHE_HOME/spmdcheck`, else `~/.cache/spmdcheck`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "spmdcheck"


def _euid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _owned(st: os.stat_result) -> bool:
    uid = _euid()
    return uid is None or st.st_uid == uid


def read_regular(path: pathlib.Path, cap: int) -> bytes | None:
    """The bytes of `path` if it is a regular file of this account of at most `cap` bytes, else None.

    Never follows a symlink in the last component (O_NOFOLLOW) and never blocks on a FIFO (O_NONBLOCK);
    the size is checked on the open file, before reading, so a device or a huge file costs nothing."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _owned(st) or st.st_size > cap:
            return None
        chunks = []
        left = st.st_size + 1  # one byte more: a file that grew since fstat is refused
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= cap else None
    except OSError:
        return None
    finally:
        os.close(fd)


def is_own_folder(path: pathlib.Path) -> bool:
    """A real folder (not a symlink to one) of this account: a place a cache may write and delete in."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _owned(st)


def make_own_folder(path: pathlib.Path) -> bool:
    """Create `path` (one level, mode 0700 less the umask) if missing; True if it is then an own folder."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    return is_own_folder(path)


def secret_key() -> bytes | None:
    """This account's key (created on first use), or None when it cannot be had safely.

    Created atomically: 32 random bytes go to a temporary file (mode 0600, from mkstemp) that is then
    hard-linked to its name, which never replaces a key another run made first. Read back only when it is
    a regular file of this account with no permission for anyone else and exactly 32 bytes: a key that
    came with a checkout (git writes 0644 or 0755) or a symlink is refused, and no cache is used."""
    folder = user_cache_root()
    path = folder / KEY_FILE
    cached = _keys.get(path)
    if cached is not None:
        return cached
    key = _read_key(path)
    if key is None and not os.path.lexists(path):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _create_key(folder, path)
        except OSError:
            return None
        key = _read_key(path)
    if key is not None:
        _keys[path] = key
    return key


def _read_key(path: pathlib.Path) -> bytes | None:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _owned(st) or st.st_mode & 0o077 or st.st_size != KEY_BYTES:
            return None
        key = os.read(fd, KEY_BYTES + 1)
        return key if len(key) == KEY_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _create_key(folder: pathlib.Path, path: pathlib.Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".hmac-key-", dir=folder)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # fails if another run created the key first: theirs stands
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: an exclusive create (a reader may see it short)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            try:
                out = os.open(path, flags, 0o600)
            except FileExistsError:
                return
            with os.fdopen(out, "wb") as fh:
                fh.write(pathlib.Path(tmp).read_bytes())
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _mac(key: bytes, name: str, payload: bytes) -> bytes:
    return hmac.new(key, name.encode("utf-8", "surrogateescape") + b"\0" + payload, hashlib.sha256).hexdigest().encode()


def seal(key: bytes, name: str, payload: bytes) -> bytes:
    """`payload` with its seal for `name` (the file's name in its cache: a sealed file moved is refused)."""
    return SEAL + _mac(key, name, payload) + b"\n" + payload


def unseal(key: bytes, name: str, data: bytes) -> bytes | None:
    """The payload of a file sealed for `name` under `key`, or None."""
    if len(data) < _SEAL_LENGTH or not data.startswith(SEAL) or data[_SEAL_LENGTH - 1 : _SEAL_LENGTH] != b"\n":
        return None
    payload = data[_SEAL_LENGTH:]
    return payload if hmac.compare_digest(data[len(SEAL) : _SEAL_LENGTH - 1], _mac(key, name, payload)) else None


def write_sealed(target: pathlib.Path, key: bytes, name: str, payload: bytes) -> bool:
    """Write `payload` sealed for `name` to `target`, atomically (a temporary file in its folder, then a
    rename, which replaces a symlink or file of that name rather than writing through it). The folder
    must be an own folder (checked by the caller). False when it could not be written."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(seal(key, name, payload))
        os.replace(tmp, target)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False
