"""``bench/run import-path``: umt's ``import_file`` against ``cp`` on the same files (issue 7).

    bench/run import-path [--quick] [--sizes 2G,20G] [--repeats N] [--caches cold,warm]
                          [--cases same-fs,cross-fs,reflink] [--cross-fs ext4|shm]
                          [--methods umt-copy-pieces,...]
    bench/run import-path --table bench/.results/import-path-<time>     (reprint a table)

For each size, one source file of random bytes is written under ``--workdir`` (``/tmp``), and
three cases run one after another, each cleaned up before the next:

* ``same-fs``: source and library folder on the same filesystem (``/tmp``, ext4 here). umt's
  ``hardlink`` and ``auto`` modes hardlink; ``copy`` is timed with ``verify="pieces"`` (SHA-1
  of 8 MiB pieces, as a one-file torrent of the source has them, checked on all cores while
  copying), ``"sha256"`` and ``"size"``; ``cp`` (coreutils; ``copy_file_range`` on one
  filesystem) on the same file.
* ``cross-fs``: the library folder on another filesystem: a loop-mounted ext4 image on the same
  disk (``losetup --direct-io=on`` where the kernel allows it, so pages are not cached twice), or
  ``/dev/shm`` with ``--cross-fs shm`` when it fits in memory. umt ``copy`` (pieces, sha256,
  size) against ``cp``. (``auto`` would try a reflink, get EXDEV and do the same copy.)
* ``reflink``: a loop-mounted btrfs with two subvolumes, ``downloads`` (holding a copy of the
  source) and ``library``. Subvolumes have their own ``st_dev``, so ``auto`` does not hardlink
  but clones (FICLONE), as with a downloads and a library subvolume on one btrfs disk. Against
  ``cp --reflink=always``. Skipped, with the reason, if btrfs cannot be made and mounted.

Fairness: umt fsyncs the file and its folder before it returns; ``cp`` does not, so the ``cp``
figure is ``cp`` followed by ``fsync`` of the new file and of its folder (the part spent in the
fsyncs is shown separately). Before every timed run the previous copy is deleted and ``sync``
runs. Cache state: ``cold`` drops the page cache first (``echo 3 > /proc/sys/vm/drop_caches``,
root only; otherwise cold runs are skipped); ``warm`` reads the source once just before the run
(for hardlink and reflink, which read no data, it only stats it). ``src cached`` is the share of
the source in the page cache when the timer starts (``fincore``). Runs are interleaved:
each repeat goes through both cache states and every method, in a rotated order (7 repeats up
to 5 GB, 3 above, unless ``--repeats``; the methods that move no data, hardlink and reflink,
run ``--link-repeats`` times, 5, per slot).

Throughput is the size in MB (10^6 bytes) divided by the median time; "÷ cp" is umt's
throughput divided by that of ``cp`` + fsync in the same case, size and cache state (target for
copy+verify: >= 0.9); "best ÷ best cp" divides the fastest runs instead of the medians (on a
VM whose first touch of guest memory is slow, the same copy varies up to 5x; the noise only adds).
Raw runs go to ``bench/.results/import-path-<time>/runs.json`` (written
after every run), the table to ``table.md`` beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from umt.media.importing import FilePieces, import_file, partial_path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / ".results"

DEFAULT_SIZES = "2G,20G"
QUICK_SIZES = "256M,1G"
GENERATE_BLOCK = 64 * 1024 * 1024
#: What torrent makers pick for files of 2-20 GB (a whole number of them in GENERATE_BLOCK).
PIECE_LENGTH = 8 * 1024 * 1024
READ_BLOCK = 8 * 1024 * 1024
SPACE_MARGIN = 1024**3
COPY_TARGET = 0.9
SMALL_SIZE = 5 * 10**9
SMALL_REPEATS = 7
LARGE_REPEATS = 3
X = "\N{MULTIPLICATION SIGN}"
FILE_NAME = "Film.2024.2160p.mkv"


def log(message: str) -> None:
    print(f"[import-path {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- methods


@dataclass(frozen=True)
class Method:
    key: str
    label: str
    #: umt: (mode, verify, the method import_file must report); cp: the extra cp arguments.
    umt: tuple[str, str, str] | None = None
    cp_args: tuple[str, ...] = ()
    #: False for links and clones: no data passes, so "warm" only stats the source.
    reads_data: bool = True


UMT_HARDLINK = Method("umt-hardlink", "umt hardlink", umt=("hardlink", "sha256", "hardlink"),
                      reads_data=False)
UMT_AUTO_LINK = Method("umt-auto", "umt auto (→ hardlink)", umt=("auto", "sha256", "hardlink"),
                       reads_data=False)
UMT_SHA256 = Method("umt-copy-sha256", "umt copy, verify=sha256", umt=("copy", "sha256", "copy"))
UMT_SIZE = Method("umt-copy-size", "umt copy, verify=size", umt=("copy", "size", "copy"))
UMT_PIECES = Method("umt-copy-pieces", "umt copy, verify=pieces",
                    umt=("copy", "pieces", "copy"))
UMT_REFLINK = Method("umt-auto-reflink", "umt auto (→ reflink)",
                     umt=("auto", "sha256", "reflink"), reads_data=False)
CP = Method("cp", "cp + fsync")
CP_REFLINK = Method("cp-reflink", "cp --reflink=always + fsync", cp_args=("--reflink=always",),
                    reads_data=False)

CASES: dict[str, list[Method]] = {
    "same-fs": [UMT_HARDLINK, UMT_AUTO_LINK, UMT_PIECES, UMT_SHA256, UMT_SIZE, CP],
    "cross-fs": [UMT_PIECES, UMT_SHA256, UMT_SIZE, CP],
    "reflink": [UMT_REFLINK, CP_REFLINK],
}
BASELINE = {"same-fs": CP.key, "cross-fs": CP.key, "reflink": CP_REFLINK.key}
METHODS = {m.key: m for methods in CASES.values() for m in methods}


# ---------------------------------------------------------------------- sizes and the machine


def parse_size(text: str) -> int:
    """``2G`` = 2 * 10^9 bytes (decimal, like the MB/s figures); K, M, G, T; plain bytes."""
    text = text.strip().upper().removesuffix("B")
    units = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human_size(size: int) -> str:
    for unit, factor in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size} bytes"


def free_bytes(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.access("/proc/sys/vm/drop_caches", os.W_OK)


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_through(path: Path) -> None:
    """Read ``path`` once so that (as much as fits of) it is in the page cache."""
    buffer = bytearray(READ_BLOCK)
    with open(path, "rb", buffering=0) as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while f.readinto(buffer):
            pass


def cached_share(path: Path) -> float | None:
    """The share of ``path`` in the page cache (``fincore``), or None if it cannot be told."""
    if shutil.which("fincore") is None:
        return None
    done = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                          capture_output=True, text=True)
    try:
        resident = int(done.stdout.split()[0])
    except (IndexError, ValueError):
        return None
    size = path.stat().st_size
    return resident / size if size else None


def fs_type(path: Path) -> str:
    done = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "--target", str(path)],
                          capture_output=True, text=True)
    return " ".join(done.stdout.split()) or "?"


def sh(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()


def quietly(what: str, fn: Callable[[], Any]) -> None:
    """Run one cleanup action; report but do not raise its failure (the next one must run)."""
    try:
        fn()
    except Exception as exc:
        log(f"cleanup: {what} failed: {exc}")


# ---------------------------------------------------------------------- files and mounts


def write_source(path: Path, size: int) -> tuple[str, FilePieces]:
    """``size`` bytes of incompressible data, no two 4 KiB blocks alike; returns the SHA-256
    and the file's pieces as a one-file torrent of ``PIECE_LENGTH`` pieces would give them.

    One random 64 MiB block, rotated by a different odd offset for every chunk (os.urandom alone
    runs at ~300 MB/s here, slower than the disk).
    """
    block = os.urandom(GENERATE_BLOCK)
    digest = hashlib.sha256()
    pieces: list[bytes] = []
    written = 0
    chunk_no = 0
    with open(path, "wb", buffering=0) as f:
        while written < size:
            shift = (chunk_no * 4099) % GENERATE_BLOCK
            chunk = memoryview(block[shift:] + block[:shift])[: size - written]
            digest.update(chunk)
            pieces.extend(hashlib.sha1(chunk[i : i + PIECE_LENGTH]).digest()
                          for i in range(0, len(chunk), PIECE_LENGTH))
            f.write(chunk)
            written += len(chunk)
            chunk_no += 1
        os.fsync(f.fileno())
    return digest.hexdigest(), FilePieces(PIECE_LENGTH, size, tuple(pieces))


def remove(path: Path) -> None:
    for candidate in (path, partial_path(path)):
        candidate.unlink(missing_ok=True)


def fsync_path(path: Path, *, directory: bool = False) -> None:
    flags = os.O_RDONLY | (os.O_DIRECTORY if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unmount(mountpoint: Path) -> None:
    for attempt in range(5):
        done = subprocess.run(["umount", str(mountpoint)], capture_output=True, text=True)
        if done.returncode == 0:
            return
        time.sleep(0.5 * (attempt + 1))
    log(f"cleanup: umount {mountpoint} busy, detaching it lazily (umount -l)")
    sh("umount", "-l", str(mountpoint))


@contextmanager
def loop_filesystem(
    image: Path, mountpoint: Path, size: int, fstype: str
) -> Iterator[dict[str, Any]]:
    """A fresh ``fstype`` of ``size`` bytes in a sparse image, loop-mounted at ``mountpoint``.

    Unmounted, detached and deleted on the way out, whatever happens.
    """
    with ExitStack() as stack:
        stack.callback(quietly, f"rm {image}", lambda: image.unlink(missing_ok=True))
        with open(image, "wb") as f:
            f.truncate(size)
        if fstype == "ext4":
            # Inode tables and journal written now: no ext4lazyinit thread during the runs.
            sh("mkfs.ext4", "-q", "-F", "-m", "0",
               "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard", str(image))
        elif fstype == "btrfs":
            sh("mkfs.btrfs", "-q", "-f", str(image))
        else:
            raise ValueError(fstype)
        direct_io = True
        try:
            device = sh("losetup", "--direct-io=on", "--find", "--show", str(image))
        except RuntimeError:
            direct_io = False
            device = sh("losetup", "--find", "--show", str(image))
        stack.callback(quietly, f"losetup -d {device}", lambda: sh("losetup", "-d", device))
        direct_io = direct_io and _loop_direct_io(device)
        mountpoint.mkdir(parents=True, exist_ok=True)
        stack.callback(quietly, f"rmdir {mountpoint}", mountpoint.rmdir)
        sh("mount", device, str(mountpoint))
        stack.callback(quietly, f"umount {mountpoint}", lambda: unmount(mountpoint))
        log(f"{fstype} on {device} mounted at {mountpoint} "
            f"({human_size(size)} image, loop direct I/O {'on' if direct_io else 'off'})")
        yield {"fstype": fstype, "device": device, "loop_direct_io": direct_io,
               "image_bytes": size}


def _loop_direct_io(device: str) -> bool:
    try:
        name = Path(device).name
        return Path(f"/sys/block/{name}/loop/dio").read_text().strip() == "1"
    except OSError:
        return False


# ---------------------------------------------------------------------- one timed run


def _nothing() -> None:
    return None


def _no_progress(done: int, total: int) -> None:
    return None


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed_run(
    method: Method, src: Path, dest: Path, *, size: int, sha256: str, pieces: FilePieces,
    cache: str,
) -> dict[str, Any]:
    remove(dest)
    os.sync()
    if cache == "cold":
        drop_caches()
    elif method.reads_data:
        read_through(src)
    else:
        src.stat()
    share = cached_share(src)
    load = os.getloadavg()[0]
    record: dict[str, Any] = {"method": method.key, "cache": cache, "src_cached": share,
                              "load1": load}
    if method.umt is not None:
        mode, verify, expected = method.umt
        cpu0 = cpu_seconds(resource.RUSAGE_SELF)
        start = time.perf_counter()
        result = import_file(src, dest, mode=mode, verify=verify,  # type: ignore[arg-type]
                             check=_nothing, progress=_no_progress,
                             pieces=pieces if verify == "pieces" else None)
        seconds = time.perf_counter() - start
        record["cpu_seconds"] = cpu_seconds(resource.RUSAGE_SELF) - cpu0
        if result.method != expected or result.size != size:
            raise RuntimeError(f"{method.label}: import_file did a {result.method} of "
                               f"{result.size} bytes; expected a {expected} of {size}")
        if result.sha256 is not None and result.sha256 != sha256:
            raise RuntimeError(f"{method.label}: SHA-256 {result.sha256} != source {sha256}")
        if verify == "pieces" and result.pieces != len(pieces.hashes):
            raise RuntimeError(f"{method.label}: {result.pieces} pieces checked, not "
                               f"{len(pieces.hashes)}")
    else:
        # cp's own CPU, and this process's for the fsyncs: the blocks of a new file are
        # allocated when it is written back, so for cp that happens in fsync (umt's import
        # counts its own write-back and fsync).
        cpu0 = cpu_seconds(resource.RUSAGE_CHILDREN) + cpu_seconds(resource.RUSAGE_SELF)
        start = time.perf_counter()
        subprocess.run(["cp", *method.cp_args, str(src), str(dest)], check=True)
        copied = time.perf_counter()
        fsync_path(dest)
        fsync_path(dest.parent, directory=True)
        seconds = time.perf_counter() - start
        record["cpu_seconds"] = (cpu_seconds(resource.RUSAGE_CHILDREN)
                                 + cpu_seconds(resource.RUSAGE_SELF) - cpu0)
        record["fsync_seconds"] = seconds - (copied - start)
        if dest.stat().st_size != size:
            raise RuntimeError(f"cp wrote {dest.stat().st_size} of {size} bytes")
    record["seconds"] = seconds
    remove(dest)
    return record


# ---------------------------------------------------------------------- the benchmark


class Results:
    def __init__(self, out_dir: Path, meta: dict[str, Any]) -> None:
        self.out_dir = out_dir
        self.data: dict[str, Any] = {"meta": meta, "runs": [], "skipped": []}

    def add(self, run: dict[str, Any]) -> None:
        self.data["runs"].append(run)
        self.save()

    def skip(self, case: str, size: int, reason: str) -> None:
        log(f"skipping {case} at {human_size(size)}: {reason}")
        self.data["skipped"].append({"case": case, "size": size, "reason": reason})
        self.save()

    def save(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.out_dir / "runs.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.out_dir / "runs.json")


def run_case(
    results: Results, case: str, size: int, src: Path, dest_dir: Path,
    source: tuple[str, FilePieces], caches: list[str], repeats: int, where: dict[str, Any],
    link_repeats: int = 5,
) -> None:
    sha256, pieces = source
    methods = CASES[case]
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / FILE_NAME
    log(f"{case}, {human_size(size)}: {src.parent} ({where['src_fs']}) → {dest_dir} "
        f"({where['dest_fs']}), {repeats} repeats, {'/'.join(caches)}")
    try:
        for rep in range(repeats):
            order = caches if rep % 2 == 0 else caches[::-1]
            for cache in order:
                shift = rep % len(methods)
                for method in methods[shift:] + methods[:shift]:
                    for _ in range(1 if method.reads_data else link_repeats):
                        run = timed_run(method, src, dest, size=size, sha256=sha256,
                                        pieces=pieces, cache=cache)
                        run.update(case=case, size=size, repeat=rep, **where)
                        results.add(run)
                        log(f"  {case} {human_size(size)} {cache:4} {method.label:28} "
                            f"{_fmt_seconds(run['seconds']):>9}  "
                            f"src cached {_pct(run['src_cached'])}, load {run['load1']:.2f}")
    finally:
        remove(dest)


def bench_size(
    results: Results, args: argparse.Namespace, workdir: Path, size: int, caches: list[str]
) -> None:
    cases = args.cases
    args = argparse.Namespace(**vars(args))
    if args.repeats is None:
        args.repeats = SMALL_REPEATS if size <= SMALL_SIZE else LARGE_REPEATS
    need = size + SPACE_MARGIN + (size if "same-fs" in cases else 0)
    if free_bytes(workdir) < need:
        results.skip("all", size, f"{human_size(free_bytes(workdir))} free in {workdir}, "
                     f"{human_size(need)} needed")
        return
    with ExitStack() as stack:
        base = Path(tempfile.mkdtemp(prefix=f"size-{size}-", dir=workdir))
        stack.callback(quietly, f"rm -r {base}", lambda: shutil.rmtree(base, ignore_errors=True))
        src = base / "downloads" / FILE_NAME
        src.parent.mkdir()
        started = time.perf_counter()
        source = write_source(src, size)
        log(f"source {human_size(size)} written in {time.perf_counter() - started:.1f} s "
            f"({src}, sha256 {source[0][:12]}…)")
        src_fs = fs_type(src)

        if "same-fs" in cases:
            run_case(results, "same-fs", size, src, base / "library", source, caches,
                     args.repeats, {"src_fs": src_fs, "dest_fs": src_fs}, args.link_repeats)

        if "cross-fs" in cases:
            cross_fs(results, args, base, src, size, source, caches, src_fs)

        if "reflink" in cases:
            reflink(results, args, base, src, size, source, caches)


def cross_fs(
    results: Results, args: argparse.Namespace, base: Path, src: Path, size: int,
    source: tuple[str, FilePieces], caches: list[str], src_fs: str,
) -> None:
    if args.cross_fs == "shm":
        shm = Path("/dev/shm")
        available = _meminfo("MemAvailable")
        if free_bytes(shm) < size + SPACE_MARGIN or available < size + 2 * SPACE_MARGIN:
            results.skip("cross-fs", size, f"/dev/shm: {human_size(free_bytes(shm))} free, "
                         f"{human_size(available)} memory available, {human_size(size)} "
                         "needed with room to spare (use --cross-fs ext4)")
            return
        dest_dir = Path(tempfile.mkdtemp(prefix="umt-bench-import-", dir=shm))
        try:
            run_case(results, "cross-fs", size, src, dest_dir / "library", source, caches,
                     args.repeats, {"src_fs": src_fs, "dest_fs": fs_type(dest_dir)},
                     args.link_repeats)
        finally:
            shutil.rmtree(dest_dir, ignore_errors=True)
        return
    with ExitStack() as stack:
        info = _mounted_image(stack, results, "cross-fs", base, size, "ext4")
        if info is None:
            return
        run_case(results, "cross-fs", size, src, base / "ext4" / "library", source, caches,
                 args.repeats, {"src_fs": src_fs, "dest_fs": f"ext4 (loop, direct I/O "
                                f"{'on' if info['loop_direct_io'] else 'off'})"},
                 args.link_repeats)


def reflink(
    results: Results, args: argparse.Namespace, base: Path, src: Path, size: int,
    source: tuple[str, FilePieces], caches: list[str],
) -> None:
    if shutil.which("mkfs.btrfs") is None or shutil.which("btrfs") is None:
        results.skip("reflink", size, "mkfs.btrfs not installed (apt-get install btrfs-progs)")
        return
    if os.geteuid() != 0:
        results.skip("reflink", size, "not root: cannot loop-mount a btrfs image")
        return
    mountpoint = base / "btrfs"
    with ExitStack() as stack:
        info = _mounted_image(stack, results, "reflink", base, size, "btrfs")
        if info is None:
            return
        try:
            sh("btrfs", "-q", "subvolume", "create", str(mountpoint / "downloads"))
            sh("btrfs", "-q", "subvolume", "create", str(mountpoint / "library"))
        except (RuntimeError, OSError) as exc:
            results.skip("reflink", size, f"cannot make a loop-mounted btrfs: {exc}")
            return
        btrfs_src = mountpoint / "downloads" / FILE_NAME
        sh("cp", "--reflink=never", str(src), str(btrfs_src))
        fsync_path(btrfs_src)
        where = {"src_fs": "btrfs subvolume downloads (loop, direct I/O "
                           f"{'on' if info['loop_direct_io'] else 'off'})",
                 "dest_fs": "btrfs subvolume library (same filesystem)"}
        run_case(results, "reflink", size, btrfs_src, mountpoint / "library", source, caches,
                 args.repeats, where, args.link_repeats)


def _mounted_image(
    stack: ExitStack, results: Results, case: str, base: Path, size: int, fs: str,
) -> dict[str, Any] | None:
    """A loop-mounted ``fs`` image at ``base/<fs>`` for ``case``, or None (skipped, with why)."""
    image_size = _image_size(size)
    if free_bytes(base) < image_size + SPACE_MARGIN:
        results.skip(case, size, f"{human_size(free_bytes(base))} free in {base} for a "
                     f"{human_size(image_size)} {fs} image")
        return None
    try:
        info: dict[str, Any] = stack.enter_context(
            loop_filesystem(base / f"{fs}.img", base / fs, image_size, fs))
    except (RuntimeError, OSError) as exc:
        results.skip(case, size, f"cannot make a loop-mounted {fs}: {exc}")
        return None
    return info


def _image_size(size: int) -> int:
    # Room for metadata (btrfs keeps it twice), the journal, and umt's free-space check.
    return int(size * 1.08) + 2 * SPACE_MARGIN


def _meminfo(field: str) -> int:
    """A ``/proc/meminfo`` figure (``MemTotal``, ``MemAvailable``) in bytes; 0 if absent."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


def _pct(share: float | None) -> str:
    return "?" if share is None else f"{share * 100:.0f} %"


# ---------------------------------------------------------------------- the table


def _fmt_seconds(seconds: float) -> str:
    if seconds < 0.1:
        return f"{seconds * 1000:.2f} ms"
    return f"{seconds:.2f} s"


def table(data: dict[str, Any]) -> str:
    runs = data["runs"]
    groups: dict[tuple[str, int, str, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["case"], run["size"], run["cache"], run["method"]), []).append(run)
    lines = [
        "| case | size | cache | method | median | MB/s | ÷ cp | best ÷ best cp | fsync part | "
        "CPU s | src cached | n |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    order = {case: i for i, case in enumerate(CASES)}
    method_order = {(case, m.key): i for case, methods in CASES.items()
                    for i, m in enumerate(methods)}
    keys = sorted(groups, key=lambda k: (k[1], order[k[0]], k[2], method_order[k[0], k[3]]))
    for case, size, cache, method in keys:
        group = groups[(case, size, cache, method)]
        m = METHODS[method]
        seconds = median(r["seconds"] for r in group)
        base = groups.get((case, size, cache, BASELINE[case]))
        ratio = "" if base is None else f"{median(r['seconds'] for r in base) / seconds:.2f}{X}"
        best = ("" if base is None else
                f"{min(r['seconds'] for r in base) / min(r['seconds'] for r in group):.2f}{X}")
        fsync = [r["fsync_seconds"] for r in group if "fsync_seconds" in r]
        shares = [r["src_cached"] for r in group if r.get("src_cached") is not None]
        lines.append(
            f"| {case} | {human_size(size)} | {cache} | {m.label} | "
            f"{_fmt_seconds(seconds)} | "
            f"{f'{size / 1e6 / seconds:,.0f}' if m.reads_data else '-'} | {ratio} | {best} | "
            f"{_fmt_seconds(median(fsync)) if fsync else ''} | "
            f"{median(r['cpu_seconds'] for r in group):.2f} | "
            f"{_pct(median(shares)) if shares else '?'} | {len(group)} |"
        )
    lines += ["", *summary(groups)]
    for skipped in data.get("skipped", []):
        lines.append(f"- skipped {skipped['case']} at {human_size(skipped['size'])}: "
                     f"{skipped['reason']}")
    return "\n".join(lines)


def summary(groups: dict[tuple[str, int, str, str], list[dict[str, Any]]]) -> list[str]:
    lines: list[str] = []
    for verify, key in (("pieces", UMT_PIECES.key), ("sha256", UMT_SHA256.key)):
        ratios = []
        for (case, size, cache, method), group in sorted(groups.items()):
            base = groups.get((case, size, cache, BASELINE[case]))
            if method == key and base:
                ratio = median(r["seconds"] for r in base) / median(r["seconds"] for r in group)
                ratios.append((round(ratio, 2), case, size, cache))
        if not ratios:
            continue
        ratios.sort()
        low, high = ratios[0], ratios[-1]
        missed = [f"{c} {human_size(s)} {k} ({r:.2f}{X})" for r, c, s, k in ratios
                  if r < COPY_TARGET]
        verdict = "met" if not missed else "not met in " + ", ".join(missed)
        lines.append(
            f"- copy+verify ({verify}) ÷ cp+fsync: {low[0]:.2f}{X} to {high[0]:.2f}{X} over "
            f"{len(ratios)} case/size/cache groups (lowest: {low[1]} {human_size(low[2])} "
            f"{low[3]}); target ≥ {COPY_TARGET}{X}: **{verdict}**")
    for label, key in (("umt hardlink", UMT_HARDLINK.key), ("umt reflink", UMT_REFLINK.key),
                       ("cp --reflink=always", CP_REFLINK.key)):
        for cache in ("cold", "warm"):
            by_size = {size: [r["seconds"] for r in group]
                       for (_, size, c, method), group in groups.items()
                       if method == key and c == cache}
            if len(by_size) < 2:
                continue
            small, large = min(by_size), max(by_size)
            t_small, t_large = median(by_size[small]), median(by_size[large])
            lines.append(
                f"- {label}, {cache}: median {_fmt_seconds(t_small)} at {human_size(small)}, "
                f"{_fmt_seconds(t_large)} at {human_size(large)}: {t_large / t_small:.2f}{X} "
                f"the time for {large / small:g}{X} the bytes")
    return lines


# ---------------------------------------------------------------------- main


def _terminate(signum: int, frame: Any) -> None:
    log(f"{signal.Signals(signum).name}: stopping, removing what was created")
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run import-path", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", help=f"comma-separated, e.g. 2G,20G (default {DEFAULT_SIZES}; "
                                         f"--quick: {QUICK_SIZES})")
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}")
    parser.add_argument("--repeats", type=int,
                        help=f"repeats per size (default: {SMALL_REPEATS} up to "
                             f"{human_size(SMALL_SIZE)}, where runs are short and noisy, "
                             f"{LARGE_REPEATS} above)")
    parser.add_argument("--link-repeats", type=int, default=5,
                        help="timed runs per repeat of the methods that move no data "
                             "(hardlink, reflink): they take milliseconds")
    parser.add_argument("--caches", default="cold,warm")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--methods", help="only these methods, e.g. umt-copy-pieces (each case's "
                                          "baseline, cp or cp --reflink, always runs); one of "
                                          f"{', '.join(METHODS)}")
    parser.add_argument("--cross-fs", choices=("ext4", "shm"), default="ext4",
                        help="destination of the cross-fs case: a loop-mounted ext4 image "
                             "(default) or /dev/shm")
    parser.add_argument("--workdir", default="/tmp", help="where the sources and images go")
    parser.add_argument("--table", metavar="RESULT_DIR", help="print the table of a result dir")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads((Path(args.table) / "runs.json").read_text())))
        return 0
    sizes = [parse_size(s) for s in (args.sizes or (QUICK_SIZES if args.quick
                                                     else DEFAULT_SIZES)).split(",")]
    args.cases = [c.strip() for c in args.cases.split(",")]
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}; use {', '.join(CASES)}")
    if args.methods:
        wanted = {m.strip() for m in args.methods.split(",")}
        if wanted - set(METHODS):
            parser.error(f"unknown method(s) {', '.join(sorted(wanted - set(METHODS)))}")
        for case, methods in CASES.items():
            CASES[case] = [m for m in methods if m.key in wanted or m.key == BASELINE[case]]
    caches = [c.strip() for c in args.caches.split(",")]
    if "cold" in caches and not can_drop_caches():
        log("cannot drop the page cache (not root): cold runs skipped")
        caches = [c for c in caches if c != "cold"]
    if not caches or set(caches) - {"cold", "warm"}:
        parser.error("--caches: cold and/or warm")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    out_dir = RESULTS / f"import-path-{time.strftime('%Y%m%d-%H%M%S')}"
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "uptime_start": uptime(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "mem_total": _meminfo("MemTotal"),
        "cp": sh("cp", "--version").splitlines()[0],
        "sizes": sizes,
        "repeats": args.repeats or f"{SMALL_REPEATS} up to {human_size(SMALL_SIZE)}, "
                                   f"{LARGE_REPEATS} above",
        "caches": caches,
        "argv": argv if argv is not None else sys.argv[1:],
    }
    results = Results(out_dir, meta)
    log(f"results in {out_dir}; {meta['uptime_start']}")
    workdir = Path(tempfile.mkdtemp(prefix="umt-bench-import-", dir=args.workdir))
    try:
        for size in sorted(sizes):
            bench_size(results, args, workdir, size, caches)
    finally:
        quietly(f"rm -r {workdir}", lambda: shutil.rmtree(workdir))
        results.data["meta"]["uptime_end"] = uptime()
        results.save()
    text = table(results.data)
    (out_dir / "table.md").write_text(text + "\n")
    print(f"{meta['started']}, {meta['cpus']} CPUs, {human_size(meta['mem_total'])} RAM, "
          f"kernel {meta['kernel']}, {meta['cp']}")
    print(f"start: {meta['uptime_start']}\nend:   {results.data['meta']['uptime_end']}\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
