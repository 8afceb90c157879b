"""``neurosym bench inside``: our inside pass vs pytorch-struct's ``SentCFG``.

For each sentence length L and grammar size (N = T = size), each implementation computes
``log Z`` of B sentences from the same random float32 potentials (terms (B, L, T), rules
(B, N, N+T, N+T), roots (B, N)) and backpropagates it (``log_z.sum().backward()``):
``neurosym``, the torch path (``inside(..., kernel="torch")``); ``neurosym_triton``, the
Triton kernels (``kernel="triton"``, :mod:`neurosym.layers.inside_kernel`), on CUDA only
and when triton imports (otherwise recorded as skipped, with the reason); ``torch_struct``,
the reference. The Triton row first runs one untimed pass, which compiles its kernels (a
compile can take longer than a run's time limit; later processes read Triton's disk cache).

Every (implementation, configuration) runs in a fresh Python process, so that
memory is measured honestly: the peak resident set size (``ru_maxrss``) after the
runs minus the one before the first run (after imports and inputs), i.e. what the
computation added at its peak. On CUDA it is ``torch.cuda.max_memory_allocated``.
Each process has its address space capped (``RLIMIT_AS``; on the CPU only: CUDA reserves
virtual address space far beyond any such cap when it starts, and the card's own memory
limit stands in for it) and a time limit, so a configuration that runs out of memory or
time is reported as such.

With ``launches``, each process also counts the operators of one more forward + backward
with ``torch.profiler`` (:func:`neurosym.bench.launches.count_launches`): on the CPU the leaf
``aten::`` operators that would each launch a kernel on a GPU (the CPU proxy of launch
overhead, issue 30), on CUDA the CUDA kernels the profiler saw.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

import torch

from neurosym.bench.launches import count_launches
from neurosym.errors import NeurosymError
from neurosym.kernels import timing_skip_reason
from neurosym.layers.inside import inside, resolve_kernel

IMPLEMENTATIONS = ("neurosym", "torch_struct", "neurosym_triton")
COMPILE_SECONDS = 300.0  # the Triton row's untimed first pass may take this long on top of ``timeout``


# ---------------------------------------------------------------------- one measurement (in a child process)
def _worker(cfg: dict) -> dict:
    """Time ``repeats`` forward + backward passes of one implementation; runs in the child."""
    import torch

    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    B, L, size, device = cfg["batch"], cfg["length"], cfg["size"], cfg["device"]
    N = T = size
    g = torch.Generator().manual_seed(0)
    terms = torch.randn(B, L, T, generator=g).to(device).requires_grad_()
    rules = torch.randn(B, N, N + T, N + T, generator=g).to(device).requires_grad_()
    roots = torch.randn(B, N, generator=g).to(device).requires_grad_()
    if cfg["impl"] in ("neurosym", "neurosym_triton"):
        kernel = "torch" if cfg["impl"] == "neurosym" else "triton"

        def log_partition():
            return inside(terms, rules, roots, kernel=kernel)
    else:
        import warnings

        import torch_struct

        warnings.filterwarnings("ignore", category=UserWarning)

        def log_partition():
            return torch_struct.SentCFG((terms, rules, roots)).partition

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    seconds: list[float] = []

    def abandon() -> None:  # a run over the time limit ends the process
        print(json.dumps({"status": "timeout", "seconds": seconds}), flush=True)
        os._exit(0)

    if cfg["impl"] == "neurosym_triton":  # compile the kernels first, untimed (under a longer limit)
        watchdog = threading.Timer(cfg["timeout"] + COMPILE_SECONDS, abandon)
        watchdog.start()
        log_partition().sum().backward()
        if cuda:
            torch.cuda.synchronize(device)
        watchdog.cancel()
        for x in (terms, rules, roots):
            x.grad = None
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux

    for _ in range(cfg["repeats"]):
        for x in (terms, rules, roots):
            x.grad = None
        watchdog = threading.Timer(cfg["timeout"], abandon)
        watchdog.start()
        t0 = time.perf_counter()
        log_z = log_partition()
        log_z.sum().backward()
        if cuda:
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - t0)
        watchdog.cancel()
    peak = torch.cuda.max_memory_allocated(device) if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    out = {"status": "ok", "seconds": seconds, "peak_bytes": int(peak), "log_z": log_z.detach().cpu().tolist()}
    if cfg.get("launches"):
        def step() -> None:
            for x in (terms, rules, roots):
                x.grad = None
            log_partition().sum().backward()

        watchdog = threading.Timer(cfg["timeout"], abandon)
        watchdog.start()
        out["launches"] = count_launches(step, torch.device(device))
        watchdog.cancel()
    return out


def _worker_main(arg: str) -> None:
    cfg = json.loads(arg)
    if cfg["memory_cap_bytes"] and not cfg["device"].startswith("cuda"):  # CUDA's start reserves more address space than any cap
        cap = int(cfg["memory_cap_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        out = _worker(cfg)
    except (MemoryError, RuntimeError) as e:  # torch reports a failed allocation as RuntimeError
        if isinstance(e, MemoryError) or "alloc" in str(e).lower() or "out of memory" in str(e).lower():
            out = {"status": "out of memory"}
        else:
            raise
    print(json.dumps(out), flush=True)


def measure(impl: str, batch: int, length: int, size: int, repeats: int, device: str, timeout: float, memory_cap_bytes: int | None, threads: int | None, launches: bool = False) -> dict:
    """One implementation on one configuration, in a fresh process: ``status`` is
    ``ok`` (with ``seconds`` per run, ``peak_bytes``, ``log_z`` and, with ``launches``,
    ``launches``: the operators of one forward + backward), ``timeout`` (a run took over
    ``timeout`` seconds), ``out of memory`` or ``error`` (with ``message``)."""
    cfg = dict(impl=impl, batch=batch, length=length, size=size, repeats=repeats, device=device, timeout=timeout, memory_cap_bytes=memory_cap_bytes, threads=threads, launches=launches)
    try:  # the child abandons a run after ``timeout`` s; this is a safety net
        proc = subprocess.run(
            [sys.executable, "-m", "neurosym.bench.inside", "--worker", json.dumps(cfg)],
            capture_output=True, text=True, timeout=(repeats + launches) * (timeout + 60) + 120 + (COMPILE_SECONDS if impl == "neurosym_triton" else 0),
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    err = proc.stderr.strip().splitlines()
    message = err[-1] if err else f"exit status {proc.returncode}"
    if proc.returncode < 0 or "memory" in message.lower() or "alloc" in message.lower():
        return {"status": "out of memory", "message": message}
    return {"status": "error", "message": message}


# ---------------------------------------------------------------------- the benchmark
def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_device(device: str) -> None:
    """A NeurosymError naming ``--device`` unless it is a torch device this machine has
    (before any subprocess starts, so a typo is not a table of "error" cells)."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise NeurosymError(f'--device: expected "cpu", "cuda" or "cuda:N", got {device!r}') from None
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise NeurosymError(f"--device: {device!r} is not available here (no such CUDA device, or a CPU build of torch)")
    if dev.type not in ("cpu", "cuda"):
        raise NeurosymError(f'--device: expected "cpu", "cuda" or "cuda:N", got {device!r}')


def run(
    batch: int = 8,
    lengths: tuple[int, ...] = (20, 40),
    sizes: tuple[int, ...] = (16, 32, 64),
    repeats: int = 3,
    device: str = "cpu",
    timeout: float = 120.0,
    memory_cap_gb: float = 20.0,
    threads: int | None = None,
    progress: bool = True,
    launches: bool = False,
) -> dict:
    """Seconds (median of ``repeats``) and peak memory of forward + backward, ours (the torch
    path, and the Triton kernels on CUDA: :func:`~neurosym.kernels.timing_skip_reason`) vs torch-struct's, per
    (length, size); with ``launches``, the operators (CPU) or
    kernels (CUDA) of one forward + backward of each. A run over ``timeout`` seconds is
    abandoned and each process's address space is capped at ``memory_cap_gb`` (lowered
    to 75% of the memory available now)."""
    check_device(device)
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None)
    reference = importlib.util.find_spec("torch_struct") is not None
    if not reference:
        say("torch-struct is not installed (pip install -e '.[bench]'): timing neurosym alone")
    available = _available_memory()
    cap = int(memory_cap_gb * 2**30)
    if available is not None:
        cap = min(cap, int(0.75 * available))
    skip_triton = timing_skip_reason(device, resolve_kernel)  # None: the Triton row runs
    impls = [i for i in IMPLEMENTATIONS if (i != "torch_struct" or reference) and (i != "neurosym_triton" or skip_triton is None)]
    rows = []
    for length in lengths:
        for size in sizes:
            row: dict = {"length": length, "size": size}
            for impl in impls:
                say(f"L={length} N=T={size}: {impl} ...")
                r = measure(impl, batch, length, size, repeats, device, timeout, cap, threads, launches)
                if r["status"] == "ok":
                    r["median_seconds"] = statistics.median(r["seconds"])
                row[impl] = r
            if skip_triton is not None:
                row["neurosym_triton"] = {"status": "skipped", "reason": skip_triton}
            theirs = row.get("torch_struct")
            for impl, prefix in (("neurosym", ""), ("neurosym_triton", "triton_")):
                ours = row[impl]
                if theirs and ours["status"] == theirs["status"] == "ok":
                    row[prefix + "ratio"] = theirs["median_seconds"] / ours["median_seconds"]
                    row[prefix + "max_abs_log_z_diff"] = max(abs(a - b) for a, b in zip(ours["log_z"], theirs["log_z"]))
                    if "launches" in ours and "launches" in theirs:
                        row[prefix + "launch_ratio"] = theirs["launches"] / ours["launches"]
            torch_path, fused = row["neurosym"], row["neurosym_triton"]
            if torch_path["status"] == fused["status"] == "ok":  # the kernels against the torch path, same process kind
                row["triton_speedup"] = torch_path["median_seconds"] / fused["median_seconds"]
                row["triton_max_abs_log_z_diff_torch_path"] = max(abs(a - b) for a, b in zip(fused["log_z"], torch_path["log_z"]))
            rows.append(row)
    import torch

    return {
        "batch": batch,
        "repeats": repeats,
        "device": device,
        "threads": threads or torch.get_num_threads(),
        "timeout_seconds": timeout,
        "launches": launches,
        "launch_measure": ("CUDA kernels seen by torch.profiler" if device.startswith("cuda") else "leaf aten operators that are not views or allocations, torch.profiler (the CPU proxy)") if launches else None,
        "memory_cap_bytes": None if device.startswith("cuda") else cap,  # CUDA: no address-space cap (see the module docstring)
        "memory_measure": "CUDA max_memory_allocated" if device.startswith("cuda") else "peak RSS growth of a fresh process (ru_maxrss after the runs minus before the first run)",
        "torch": torch.__version__,
        "torch_struct": importlib.metadata.version("torch-struct") if reference else None,
        "triton": importlib.metadata.version("triton") if skip_triton is None else None,
        "triton_skipped": skip_triton,
        "rows": rows,
    }


def _seconds(r: dict, timeout: float) -> str:
    if r is None:
        return "-"
    if r["status"] == "ok":
        return f"{r['median_seconds']:.3f}"
    return f"> {timeout:g} (timeout)" if r["status"] == "timeout" else r["status"]  # out of memory, error, skipped


def _memory(r: dict | None) -> str:
    if r is None or r["status"] != "ok":
        return "-" if r is None else r["status"]
    return f"{r['peak_bytes'] / 2**20:,.0f} MB"


def _launches(r: dict | None) -> str:
    return f"{r['launches']:,}" if r is not None and "launches" in r else "-"


def _ratio(row: dict, key: str) -> str:
    return f"{row[key]:.1f}x" if key in row else "-"


def format_results(r: dict) -> str:
    """A table of :func:`run`'s results, with how they were measured."""
    capped = "no address-space cap (CUDA)" if r["memory_cap_bytes"] is None else f"each process capped at {r['memory_cap_bytes'] / 2**30:.1f} GB of address space"
    lines = [
        f"inside pass, forward + backward of log Z: B={r['batch']}, random float32 potentials, N = T = size, "
        f"device {r['device']}, {r['threads']} thread(s), median of {r['repeats']} runs (torch {r['torch']})",
        f"memory: {r['memory_measure']}; {capped}, each run at {r['timeout_seconds']:g} s",
    ]
    if r["torch_struct"] is None:
        lines.append("torch-struct is not installed (pip install -e '.[bench]'): neurosym alone")
    else:
        lines.append(f"reference: torch-struct {r['torch_struct']} SentCFG(...).partition")
    fused = r.get("triton_skipped", "") is None
    lines.append(f"Triton kernels: triton {r['triton']}, inside(..., kernel='triton')" if fused
                 else f"Triton kernels: skipped ({r.get('triton_skipped', 'not measured')})")
    counted = r.get("launches", False)
    if counted:
        lines.append(f"launches per forward + backward: {r['launch_measure']}")
    header = f"{'L':>4}{'N=T':>5}{'neurosym s':>12}{'torch-struct s':>18}{'ratio':>9}{'neurosym peak':>15}{'torch-struct peak':>19}{'|dlogZ|':>10}"
    lines += ["", header + (f"{'neurosym ops':>14}{'torch-struct ops':>18}" if counted else "")
              + (f"{'triton s':>10}{'ratio':>9}{'triton ops':>12}" if fused else "")]
    for row in r["rows"]:
        ours, theirs = row["neurosym"], row.get("torch_struct")
        if "ratio" in row:
            ratio = f"{row['ratio']:.1f}x"
        elif theirs and theirs["status"] == "timeout" and ours["status"] == "ok":
            ratio = f"> {r['timeout_seconds'] / ours['median_seconds']:.0f}x"
        else:
            ratio = "-"
        diff = f"{row['max_abs_log_z_diff']:.1e}" if "max_abs_log_z_diff" in row else "-"
        lines.append(
            f"{row['length']:>4}{row['size']:>5}{_seconds(ours, r['timeout_seconds']):>12}{_seconds(theirs, r['timeout_seconds']):>18}"
            f"{ratio:>9}{_memory(ours):>15}{_memory(theirs):>19}{diff:>10}"
            + (f"{_launches(ours):>14}{_launches(theirs):>18}" if counted else "")
            + (f"{_seconds(row['neurosym_triton'], r['timeout_seconds']):>10}{_ratio(row, 'triton_ratio'):>9}{_launches(row['neurosym_triton']):>12}" if fused else "")
        )
    return "\n".join(lines)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--worker":
    _worker_main(sys.argv[2])
