"""Read a vLLM startup log (0.19/0.20.x and 0.33 formats): the flags it states, every memory
figure it prints, and how it ended. Pure text parsing; tested on real logs."""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import UserError

_NUM = r"([0-9][0-9,]*\.?[0-9]*)"


def _f(s: str) -> float:
    return float(s.replace(",", ""))


# a figure a vLLM log states (GiB, tokens, seconds) past this is no machine's: the log is damaged or edited
FIGURE_LIMIT = 1e15


def _check_figures(f: "LogFacts") -> None:
    """Every figure read from the log finite and within any machine's, else one line (a 400-digit 'Available KV
    cache memory' would be Infinity in --json and in every sum)."""
    for name, value in asdict(f).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and (
                not math.isfinite(value) or abs(value) > FIGURE_LIMIT):
            raise UserError(f"the log states an impossible {name.removesuffix('_gib')} ({str(value)[:20]}): the "
                            "log is damaged or edited")


ENUM_REPR = re.compile(r"<[\w.]+: ([^<>]+)>")  # how vLLM prints an enum value in its args: <Name.MEMBER: value>
# an object's repr in the args, e.g. LoRAModulePath(name='x', path='/y') or PoolerConfig(...): one level of nesting
OBJECT_REPR = re.compile(r"\b[A-Z]\w*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")


# vLLM flags that change what a startup allocates and that the memory model does not count: a log that sets one is
# explained with it named (its prediction leaves that memory out)
UNMODELLED_ARGS = {
    "cpu_offload_gb": "CPU weight offload",
    "kv_transfer_config": "a KV transfer connector",
    "enable_sleep_mode": "sleep mode (CuMem allocator)",
    "runner": "a pooling (embedding) runner",
    "convert": "a converted (pooling) model",
}


def unmodelled_args(args: dict[str, Any]) -> list[str]:
    """What a log's flags set that the memory model does not count (UNMODELLED_ARGS), as words."""
    out = []
    for k, why in UNMODELLED_ARGS.items():
        v = args.get(k)
        if v not in (None, False, "False", 0, "0", "generate", "auto", "none"):
            out.append(f"{k}: {why}")
    return out


def literal_args(text: str) -> dict[str, Any]:
    """vLLM's non-default args (a Python dict repr): enum values kept as their values, objects such as LoRA module
    paths kept as their repr strings; {} where it cannot be read."""
    text = ENUM_REPR.sub(r"\1", text)
    for attempt in (text, OBJECT_REPR.sub(lambda m: repr(m.group(0)), text)):
        try:
            value = ast.literal_eval(attempt)
            return value if isinstance(value, dict) else {}
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return {}


TRIED = re.compile(r"Tried to allocate ([0-9.]+) GiB")  # a CUDA OOM's request
PATTERNS: dict[str, re.Pattern[str]] = {
    "vllm_version": re.compile(r"Initializing a V1 LLM engine \(v([0-9][^)]*)\)"),
    "version_line": re.compile(r"vLLM (?:API )?server version ([0-9][\w.+-]*)"),  # 0.33: "vLLM server version"
    "args": re.compile(r"non-default args: (\{.*\})\s*$"),
    "snapshot": re.compile(r"worker init memory snapshot: .*?free_memory=([0-9.]+)GiB, total_memory=([0-9.]+)GiB, "
                           r"cuda_memory=([0-9.]+)GiB"),
    "requested": re.compile(r"worker requested memory: ([0-9.]+)GiB"),
    "weights": re.compile(r"Model loading took ([0-9.]+) GiB"),
    "block_size": re.compile(r"Setting attention block size to (\d+) tokens"),
    "profiling": re.compile(r"Total non KV cache memory: ([0-9.]+)GiB; torch peak memory increase: ([0-9.]+)GiB; "
                            r"non-torch forward increase memory: ([0-9.]+)GiB; weights memory: ([0-9.]+)GiB"),
    # vLLM 0.27+ (utils/mem_utils.py): what loading and profiling consumed (free memory before - after) in place of
    # the torch peak + non-torch split; the non-KV total is that + the profile's transient peak above what stayed
    "profiling_consumed": re.compile(r"Total non KV cache memory: ([0-9.]+)GiB; torch peak memory increase: "
                                    r"([0-9.]+)GiB; total consumed \(from mem_get_info\): ([0-9.]+)GiB; "
                                    r"weights memory: ([0-9.]+)GiB"),
    "cudagraph_estimate": re.compile(r"Estimated CUDA graph memory: (-?[0-9.]+) GiB total"),
    # the CUDA-graph estimate as the GMU it is worth (v1/worker/gpu_worker.py, 0.21+; Model Runner V2 logs no
    # 'Estimated CUDA graph memory' line, 0.33): estimate = (GMU - equivalent GMU) x total, to 0.0001 of the total
    "cudagraph_gmu": re.compile(r"The current --gpu-memory-utilization=([0-9.]+) is equivalent to "
                                r"--gpu-memory-utilization=([0-9.]+) without CUDA graph memory profiling"),
    # after the capture (0.21+): the pool the graphs took and the estimate the budget subtracted
    "cudagraph_pool": re.compile(r"CUDA graph pool memory: (-?[0-9.]+) GiB \(actual\), (-?[0-9.]+) GiB \(estimated\)"),
    "chunked_prefill": re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)"),
    # the engine's compilation config: its largest endpoint is max_num_batched_tokens (config/vllm.py
    # set_compile_ranges, 0.12+: every other endpoint is below it)
    "compile_ranges": re.compile(r"'compile_ranges_endpoints': \[(\d+(?:, \d+)*)\]"),
    "profiling_seconds": re.compile(r"Memory profiling takes ([0-9.]+) seconds"),
    "available_kv": re.compile(r"Available KV cache memory: (-?[0-9.]+) GiB"),
    "padding": re.compile(r"Add (\d+) padding layers, may waste at most ([0-9.]+)%"),
    "autofit_reduced": re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)"),
    "autofit_full": re.compile(r"Auto-fit max_model_len: full model context length (\d+) fits"),
    "kv_tokens": re.compile(r"GPU KV cache size: " + _NUM + r" tokens"),
    "concurrency": re.compile(r"Maximum concurrency for " + _NUM + r" tokens per request: ([0-9.]+)x"),
    "graph_capture": re.compile(r"Graph capturing finished in \d+ secs, took (-?[0-9.]+) GiB"),
    "max_len_used": re.compile(r"Using max model len (\d+)"),
    "estimated_max": re.compile(r"estimated maximum model length is (\d+)"),
    # vLLM 0.20.2+ (config/compilation.py): a hybrid's max_num_seqs above its KV cache blocks with FULL CUDA graphs
    "mamba_blocks": re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)"),
    "needed_kv": re.compile(r"([0-9.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
                            r"\(([0-9.]+) GiB\)"),
    "free_short": re.compile(r"Free memory on device \(([0-9.]+)/([0-9.]+) GiB\) on startup is less than desired"),
    "compile_key": re.compile(r"torch_compile_cache/([0-9a-f]+)/"),
    "int4_kernel": re.compile(r"Using (Machete|Marlin)LinearKernel for \w*(?:AWQ|GPTQ)\w*Method"),
    # which top-k / top-p sampler the engine took (vLLM 0.10.0-0.11.0: FlashInfer's where installed, else torch's)
    "sampler": re.compile(r"(Using FlashInfer) for top-p & top-k sampling|(Falling back to the PyTorch-native) "
                          r"implementation of top-p & top-k"),
    # vLLM under WSL 2 (platforms/interface.py): CUDA reports the card's whole memory there (gpu_facts.json wsl_total)
    "wsl": re.compile(r"as WSL is detected"),
    "lab_max_len": re.compile(r"^LAB max_model_len (-?\d+)"),
    "desired": re.compile(r"Free memory on device \(([0-9.]+)/([0-9.]+) GiB\) on startup\. Desired GPU memory "
                          r"utilization is \(([0-9.]+), ([0-9.]+) GiB\)"),
    "usage_020": re.compile(r"Actual usage is ([0-9.]+) GiB for weight, ([0-9.]+) GiB for peak activation, "
                            r"([0-9.]+) GiB for non-torch memory, and ([0-9.]+) GiB for CUDAGraph memory"),
    # V0 engine (vLLM 0.5-0.7): the figures it printed, so its logs can be read and their KV plan checked
    "v0_version": re.compile(r"Initializing an? (?:V0 )?LLM engine \(v([0-9][^)]*)\)"),
    "v0_weights": re.compile(r"Loading model weights took ([0-9.]+) GB"),
    "v0_profile": re.compile(r"Memory profiling results: total_gpu_memory=([0-9.]+)GiB .*non_torch_memory=([0-9.]+)GiB "
                             r"kv_cache_size=(-?[0-9.]+)GiB gpu_memory_utilization=([0-9.]+)"),
    "v0_budget": re.compile(r"total_gpu_memory \(([0-9.]+)GiB\) x gpu_memory_utilization \(([0-9.]+)\)"),
    "v0_terms": re.compile(r"model weights take ([0-9.]+)GiB; non_torch_memory takes ([0-9.]+)GiB; PyTorch activation "
                           r"peak memory takes ([0-9.]+)GiB; the rest of the memory reserved for KV Cache is (-?[0-9.]+)GiB"),
    "v0_blocks": re.compile(r"(?:GPU|CUDA|cuda) blocks: (\d+)"),
    "v0_too_small": re.compile(r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored "
                               r"in KV cache \((\d+)\)"),
    "usage_new": re.compile(r"Actual usage is ([0-9.]+) GiB for consumed memory \(weights \+ non-torch\), "
                            r"([0-9.]+) GiB for peak activation, and ([0-9.]+) GiB for CUDAGraph memory"),
}
# any of PATTERNS (one search per line decides whether the line is worth trying each of them)
ANY_PATTERN = re.compile("|".join(f"(?:{p.pattern})" for p in PATTERNS.values()))
OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")
CRASH = re.compile(r"Traceback \(most recent call last\)|Engine core initialization failed|EngineCore failed to start")
READY = re.compile(r"Application startup complete|Starting vLLM API server|init engine \(profile, create kv cache")


# lines that state one figure: pattern key -> (LogFacts field, type, milestone it marks, keep the first only)
ONE_FIGURE: dict[str, tuple[str, type, str | None, bool]] = {
    "requested": ("requested_gib", float, None, False),
    "weights": ("weights_gib", float, "loaded", False),
    "v0_weights": ("weights_gib", float, "loaded", False),  # printed as "GB", computed in GiB
    "block_size": ("block_size", int, None, False),
    "profiling_seconds": ("profiling_seconds", float, None, True),
    "cudagraph_estimate": ("cudagraph_estimate_gib", float, None, False),
    "available_kv": ("available_kv_gib", float, "profiled", False),
    "max_len_used": ("max_model_len_default", int, None, True),
    "estimated_max": ("estimated_max_model_len", int, None, False),
    "compile_key": ("compile_key", str, None, True),
    "int4_kernel": ("int4_kernel", str, None, True),
}


@dataclass
class LogFacts:
    """Everything a startup log states. GiB figures are as logged (2 decimals)."""

    vllm_version: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    total_gib: float | None = None
    free_at_start_gib: float | None = None
    cuda_context_gib: float | None = None
    requested_gib: float | None = None
    weights_gib: float | None = None
    non_kv_gib: float | None = None
    consumed_gib: float | None = None  # 0.27+: what loading and profiling consumed (free memory before - after)
    activation_gib: float | None = None
    non_torch_gib: float | None = None
    cudagraph_estimate_gib: float | None = None
    cudagraph_actual_gib: float | None = None
    available_kv_gib: float | None = None
    block_size: int | None = None
    padding: list[tuple[int, float]] = field(default_factory=list)
    max_model_len_default: int | None = None
    auto_fit_to: int | None = None
    max_model_len: int | None = None  # the engine's final max_model_len, where the log shows it
    kv_cache_tokens: int | None = None
    concurrency: float | None = None
    concurrency_len: int | None = None
    compile: str | None = None  # "cold" (compiled now), "warm" (loaded from cache), None (eager)
    profiling_seconds: float | None = None  # 'Memory profiling takes N seconds' (JIT compiles land here)
    compile_key: str | None = None  # torch.compile cache directory hash (what decides cold vs warm)
    int4_kernel: str | None = None  # the kernel running 4-bit AWQ / GPTQ layers: "Machete" or "Marlin"
    sampler: str | None = None  # top-k / top-p sampling as logged: "flashinfer" or "native" (None: not logged)
    wsl: bool = False  # vLLM ran under WSL 2 ('Using pin_memory=False as WSL is detected')
    estimated_max_model_len: int | None = None
    needed_kv_gib: float | None = None
    cut_last_line: str | None = None  # the last line, where the log ends without a newline (not read: cut mid-line)
    mamba_blocks: int | None = None  # the blocks vLLM's Mamba-block check found too few for max_num_seqs
    workers: int = 0  # distinct worker processes named in line prefixes ((Worker_TP1 pid=..)); 0: one process
    args_line: bool = False  # the log has vLLM's 'non-default args' line (else its flags are not known)
    gpu_blocks: int | None = None  # V0 engine: '# GPU blocks: N' (blocks of 16 tokens)
    outcome: str = "unknown"  # started | kv_too_small | mamba_blocks | oom_loading | oom_profiling | oom_kv_allocation |
    #                           oom_graph_capture | oom_runtime (serving) | insufficient_free_memory | crashed | incomplete
    error: str | None = None
    recognized: int = 0  # lines that matched one of vLLM's (0: not a vLLM log)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def require_vllm(f: LogFacts, name: str) -> LogFacts:
    """`f`, or a one-line error where the text held no vLLM line at all (another program's log, a binary file)."""
    if not f.recognized:
        raise UserError(f"{name} has no vLLM startup lines (none of 'non-default args', 'Model loading took', "
                        "'Available KV cache memory', ...): give the output of `vllm serve`")
    return f


_WORKER = re.compile(r"\((Worker(?:_[A-Z]+\d+)+) pid=\d+\)")
# one per server (an engine per data-parallel rank: EngineCore_DP1); workers are several and come and go
_PROCESS = re.compile(r"\((APIServer|EngineCore(?:_[A-Z]+\d+)*) pid=(\d+)\)")
_ARGS_START = "non-default args:"
_BOOT_START = re.compile(r"vLLM (?:API )?server version|non-default args: \{|Initializing an? (?:V[01] )?LLM engine \(v")


def rejoin_wrapped(lines: list[str], most: int = 40) -> list[str]:
    """A 'non-default args' line a terminal wrapped (copied from a narrow window) joined back: the lines after it are
    appended, as they are, until its braces close (at most `most` lines; an unclosed dict is left as it was)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        at = line.find(_ARGS_START)
        rest = line[at + len(_ARGS_START):].strip() if at >= 0 else "}"
        if (rest == "" or rest.startswith("{")) and not rest.endswith("}"):
            joined, j = line.rstrip("\r"), i + 1
            while j < len(lines) and j - i <= most:
                joined += lines[j].rstrip("\r")
                j += 1
                if joined.rstrip().endswith("}") and _balanced(joined[at + len(_ARGS_START):]):
                    out.append(joined)
                    i = j
                    break
            else:
                out.append(line)
                i += 1
            continue
        out.append(line)
        i += 1
    return out


def _balanced(text: str) -> bool:
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
    return depth == 0


def split_startups(text: str) -> list[str]:
    """A log as its startups: a new one begins where vLLM announces itself (server version, args, engine init)
    after the current one has already reached its own args or figures (a restart, an upgrade, a probe's retry)."""
    boots: list[list[str]] = [[]]
    seen_args = seen_figures = False
    for line in rejoin_wrapped(text.splitlines()):
        if _BOOT_START.search(line) and not _WORKER.search(line):
            is_args = "non-default args: {" in line
            if (is_args and seen_args) or seen_figures:
                boots.append([])
                seen_args = seen_figures = False
            seen_args = seen_args or is_args
        elif PATTERNS["weights"].search(line) or PATTERNS["available_kv"].search(line) or READY.search(line):
            seen_figures = True
        boots[-1].append(line)
    kept = [b for b in boots if any(x.strip() for x in b)]
    # every boot but the last ended at a line break; the last ends as the log does (cut mid-line or not)
    end = "\n" if text.endswith(("\n", "\r")) else ""
    return ["\n".join(b) + ("\n" if i < len(kept) - 1 else end) for i, b in enumerate(kept)]


@dataclass
class _Reading:
    """What reading a log keeps besides its LogFacts: the boot's milestones and the figures read at the end."""

    f: LogFacts
    milestones: list[str] = field(default_factory=list)
    args_seen: bool = False
    chunked: int | None = None  # the last 'Chunked prefill' line: the engine's (a `vllm serve` CLI logs one first)
    compiled_up_to: int | None = None  # the engine config's largest compile range endpoint
    cg_gmu: tuple[float, float] | None = None  # the GMU and the GMU the CUDA-graph estimate leaves (0.21+)
    usage_peak: float | None = None  # 0.27+'s 'peak activation': the transient peak + the CUDA-graph estimate


def _profiling(r: _Reading, g: tuple) -> None:
    if r.f.activation_gib is None:  # several workers: the first's, the one 'Available KV' is printed by
        r.f.non_kv_gib, r.f.activation_gib, r.f.non_torch_gib, _w = map(float, g)
    r.milestones.append("profiled")


def _profiling_consumed(r: _Reading, g: tuple) -> None:
    f = r.f
    if f.activation_gib is None:  # several workers: the first's
        non_kv, _increase, consumed, weights = map(float, g)
        f.non_kv_gib, f.consumed_gib = non_kv, consumed
        f.activation_gib = round(non_kv - consumed, 2)  # the transient peak above what stayed
        f.non_torch_gib = round(consumed - weights, 2)  # what stayed beyond the weights
    r.milestones.append("profiled")


def _graph_capture(r: _Reading, g: tuple) -> None:
    # the capture after the KV cache (Model Runner V2 in 0.33 also logs its throwaway profiling capture before
    # 'Available KV cache memory': not the pool the graphs keep)
    if "profiled" in r.milestones:
        r.f.cudagraph_actual_gib = float(g[0])
        r.milestones.append("captured")


def _cudagraph_pool(r: _Reading, g: tuple) -> None:
    r.f.cudagraph_actual_gib = float(g[0])
    if r.f.cudagraph_estimate_gib is None:
        r.f.cudagraph_estimate_gib = float(g[1])


def _padding(r: _Reading, g: tuple) -> None:
    pad = (int(g[0]), float(g[1]))
    if pad not in r.f.padding:
        r.f.padding.append(pad)


def _autofit_reduced(r: _Reading, g: tuple) -> None:
    r.f.auto_fit_to = r.f.max_model_len = int(g[1])


def _kv_tokens(r: _Reading, g: tuple) -> None:
    r.f.kv_cache_tokens = int(_f(g[0]))
    r.milestones.append("kv_allocated")


def _concurrency(r: _Reading, g: tuple) -> None:
    r.f.concurrency_len, r.f.concurrency = int(_f(g[0])), float(g[1])
    r.f.max_model_len = r.f.max_model_len or r.f.concurrency_len


def _needed_kv(r: _Reading, g: tuple) -> None:
    r.f.needed_kv_gib = float(g[0])
    if r.f.available_kv_gib is None:
        r.f.available_kv_gib = float(g[1])


def _desired(r: _Reading, g: tuple) -> None:
    f = r.f
    f.free_at_start_gib = f.free_at_start_gib or float(g[0])
    f.total_gib = f.total_gib or float(g[1])
    f.requested_gib = f.requested_gib or float(g[3])


def _usage_020(r: _Reading, g: tuple) -> None:
    f = r.f
    f.weights_gib = f.weights_gib or float(g[0])
    f.activation_gib = f.activation_gib if f.activation_gib is not None else float(g[1])
    f.non_torch_gib = f.non_torch_gib if f.non_torch_gib is not None else float(g[2])
    f.cudagraph_actual_gib = float(g[3])


def _usage_new(r: _Reading, g: tuple) -> None:
    r.usage_peak = float(g[1]) if r.usage_peak is None else r.usage_peak
    r.f.cudagraph_actual_gib = float(g[2])


def _v0_profile(r: _Reading, g: tuple) -> None:
    r.f.total_gib, r.f.non_torch_gib, r.f.available_kv_gib = float(g[0]), float(g[1]), float(g[2])
    r.f.args.setdefault("gpu_memory_utilization", float(g[3]))
    r.milestones.append("profiled")


def _v0_budget(r: _Reading, g: tuple) -> None:
    r.f.total_gib = float(g[0])
    r.f.args.setdefault("gpu_memory_utilization", float(g[1]))


def _v0_terms(r: _Reading, g: tuple) -> None:
    r.f.weights_gib, r.f.non_torch_gib, r.f.activation_gib, r.f.available_kv_gib = map(float, g)
    r.milestones.append("profiled")


def _v0_blocks(r: _Reading, g: tuple) -> None:
    if r.f.gpu_blocks is None:
        r.f.gpu_blocks = int(g[0])
        r.milestones.append("kv_allocated")


def _v0_too_small(r: _Reading, g: tuple) -> None:
    r.f.max_model_len, r.f.kv_cache_tokens = int(g[0]), int(g[1])
    r.f.estimated_max_model_len = int(g[1])


def _args(r: _Reading, g: tuple) -> None:
    if not r.args_seen:
        r.args_seen = r.f.args_line = True
        r.f.args = {**r.f.args, **literal_args(g[0])}


def _version(r: _Reading, g: tuple) -> None:
    if not r.f.vllm_version:
        r.f.vllm_version = g[0]


def _snapshot(r: _Reading, g: tuple) -> None:
    r.f.free_at_start_gib, r.f.total_gib, r.f.cuda_context_gib = map(float, g)


def _chunked(r: _Reading, g: tuple) -> None:  # the effective value, also where the args leave vLLM's default
    r.chunked = int(g[0])


def _compile_ranges(r: _Reading, g: tuple) -> None:
    r.compiled_up_to = max(int(x) for x in g[0].split(", "))


def _cudagraph_gmu(r: _Reading, g: tuple) -> None:
    r.cg_gmu = (float(g[0]), float(g[1]))


def _autofit_full(r: _Reading, g: tuple) -> None:
    r.f.max_model_len = int(g[0])


def _mamba_blocks(r: _Reading, g: tuple) -> None:
    r.f.mamba_blocks = int(g[1])


def _sampler(r: _Reading, g: tuple) -> None:
    r.f.sampler = "flashinfer" if g[0] else "native"


def _wsl(r: _Reading, g: tuple) -> None:
    r.f.wsl = True


def _lab_max_len(r: _Reading, g: tuple) -> None:
    if int(g[0]) > 0:
        r.f.max_model_len = int(g[0])


# what each pattern's match sets (the one-figure patterns are ONE_FIGURE's); 'free_short' needs the line itself
_ON = {"vllm_version": _version, "version_line": _version, "v0_version": _version, "args": _args,
       "chunked_prefill": _chunked, "compile_ranges": _compile_ranges, "snapshot": _snapshot,
       "profiling": _profiling, "profiling_consumed": _profiling_consumed, "graph_capture": _graph_capture,
       "cudagraph_gmu": _cudagraph_gmu, "cudagraph_pool": _cudagraph_pool, "padding": _padding,
       "autofit_reduced": _autofit_reduced, "autofit_full": _autofit_full, "kv_tokens": _kv_tokens,
       "concurrency": _concurrency, "needed_kv": _needed_kv, "desired": _desired, "usage_020": _usage_020,
       "usage_new": _usage_new, "v0_profile": _v0_profile, "v0_budget": _v0_budget, "v0_terms": _v0_terms,
       "v0_blocks": _v0_blocks, "mamba_blocks": _mamba_blocks, "v0_too_small": _v0_too_small, "sampler": _sampler,
       "wsl": _wsl, "lab_max_len": _lab_max_len}


def _read_figures(r: _Reading, line: str) -> None:
    """Every pattern this line matches, read into the facts."""
    f = r.f
    for key, pat in (PATTERNS.items() if ANY_PATTERN.search(line) else ()):
        m = pat.search(line)
        if not m:
            continue
        g = m.groups()
        f.recognized += 1
        if key in ONE_FIGURE:
            name, kind, milestone, first_only = ONE_FIGURE[key]
            if not (first_only and getattr(f, name) is not None):
                setattr(f, name, kind(g[0]))
                if milestone:
                    r.milestones.append(milestone)
        elif key == "free_short":
            f.outcome = "insufficient_free_memory"
            f.error = line.strip()[-300:]
        elif key in _ON:
            _ON[key](r, g)


class _Servers:
    """Two servers writing into one log (docker compose logs of two services) leave no boot to read."""

    def __init__(self) -> None:
        self.last_pid: dict[str, str] = {}
        self.left: dict[str, set[str]] = {}

    def see(self, line: str) -> None:
        proc = _PROCESS.search(line)
        if not proc:
            return
        role, pid = proc.groups()
        if self.last_pid.get(role, pid) != pid:
            self.left.setdefault(role, set()).add(self.last_pid[role])
            if pid in self.left[role]:
                raise UserError(f"the log interleaves two vLLM servers ({role} pids {self.last_pid[role]} and {pid}):"
                                f" give one server's log (e.g. its lines with 'pid={pid}')")
        self.last_pid[role] = pid


def parse_log(text: str) -> LogFacts:
    r = _Reading(LogFacts())
    f = r.f
    oom_at: str | None = None
    crash_line: str | None = None
    workers: set[str] = set()
    lines = rejoin_wrapped(text.splitlines())
    if lines and not text.endswith(("\n", "\r")) and lines[-1].rstrip()[-1:].isdigit() and ANY_PATTERN.search(lines[-1]):
        # a figure line cut mid-line ('... maximum model length is 3' of 35904): its figure may be cut short
        f.cut_last_line = lines.pop()[-120:]
    servers = _Servers()
    for line in lines:
        servers.see(line)
        w = _WORKER.search(line)
        if w:
            workers.add(w.group(1))
        _read_figures(r, line)
        if "Compiling a graph for" in line:  # any graph compiled now makes the boot cold, also after loaded ones
            f.compile = "cold"
        elif ("Directly load the compiled graph" in line or "Loading compiled graph" in line
              or "Directly load AOT compilation" in line) and f.compile is None:  # the last: vLLM 0.30's AOT cache
            f.compile = "warm"
        if OOM.search(line) and oom_at is None:
            oom_at = r.milestones[-1] if r.milestones else "start"
            tried = TRIED.search(line)
            if (oom_at == "kv_allocated" and tried and f.available_kv_gib is not None
                    and abs(float(tried.group(1)) - f.available_kv_gib) <= 0.01):
                oom_at = "profiled"  # vLLM logs the KV plan before it allocates it: this OOM is that allocation
            f.error = line.strip()[-300:]
        if CRASH.search(line) and crash_line is None and " WARNING " not in line:
            crash_line = line.strip()[-300:]
        if READY.search(line):
            r.milestones.append("ready")
    _finish(r)
    f.workers = len(workers)
    _check_figures(f)
    f.outcome = _outcome(f, r.milestones, oom_at, crash_line)
    if f.outcome == "crashed" and not f.error:
        f.error = crash_line
    return f


def _finish(r: _Reading) -> None:
    """The figures read from several lines: the batch, the CUDA-graph estimate, the transient peak."""
    f = r.f
    if r.chunked is not None or r.compiled_up_to is not None:
        f.args.setdefault("max_num_batched_tokens", r.chunked if r.chunked is not None else r.compiled_up_to)
    if f.cudagraph_estimate_gib is None and r.cg_gmu is not None:
        total = f.total_gib or (f.requested_gib / r.cg_gmu[0] if f.requested_gib and r.cg_gmu[0] else None)
        if total:
            f.cudagraph_estimate_gib = round((r.cg_gmu[0] - r.cg_gmu[1]) * total, 2)
    if f.activation_gib is None and r.usage_peak is not None:
        # vLLM 0.26.1+ prints the transient peak and the CUDA-graph estimate together as 'peak activation'
        # (gpu_worker.py peak_activation_memory = headroom + the estimate applied): the peak alone
        f.activation_gib = round(r.usage_peak - (f.cudagraph_estimate_gib or 0.0), 2)


def _outcome(f: LogFacts, milestones: list[str], oom_at: str | None, crash_line: str | None) -> str:
    if f.outcome == "insufficient_free_memory":
        return f.outcome
    if f.estimated_max_model_len is not None or f.needed_kv_gib is not None:
        return "kv_too_small"
    if f.mamba_blocks is not None:
        return "mamba_blocks"
    if oom_at is not None:
        return {"start": "oom_loading", "loaded": "oom_profiling", "profiled": "oom_kv_allocation",
                "kv_allocated": "oom_graph_capture", "captured": "oom_graph_capture",
                "ready": "oom_runtime"}.get(oom_at, "oom_profiling")
    if "ready" in milestones:
        return "started"
    if crash_line:
        return "crashed"
    if "kv_allocated" in milestones:
        return "started"
    return "incomplete"


_WORKER_BUDGET = re.compile(
    r"\((?P<who>(?:Worker|EngineCore)[\w]*) pid=\d+\).*?Desired GPU memory utilization is \([0-9.]+, "
    r"(?P<requested>[0-9.]+) GiB\)\. Actual usage is (?P<weights>[0-9.]+) GiB for weight, (?P<activation>[0-9.]+) GiB "
    r"for peak activation, (?P<non_torch>[0-9.]+) GiB for non-torch memory, and (?P<cudagraph>[0-9.]+) GiB for "
    r"CUDAGraph memory.*?Current kv cache memory in use is (?P<kv>[0-9.]+) GiB")
_RANK = re.compile(r"_(DP|PP|TP)(\d+)")


@dataclass(frozen=True)
class WorkerBudget:
    """One worker's own budget line (vLLM 0.10.x and 0.26+ print it from every worker, INFO): GiB as logged."""

    who: str  # the log's prefix: Worker_PP1_TP0, EngineCore_DP1, Worker_TP1 ...
    dp: int
    pp: int
    tp: int
    requested_gib: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cudagraph_gib: float
    kv_gib: float  # 'Current kv cache memory in use': the worker's own available KV memory


def worker_budgets(text: str) -> list[WorkerBudget]:
    """Every worker's budget line in a multi-GPU log, in rank order (DP, PP, TP), one per worker."""
    out: dict[str, WorkerBudget] = {}
    for m in _WORKER_BUDGET.finditer(text):
        rank = {k: int(v) for k, v in _RANK.findall(m["who"])}
        out[m["who"]] = WorkerBudget(m["who"], rank.get("DP", 0), rank.get("PP", 0), rank.get("TP", 0),
                                     *(float(m[k]) for k in ("requested", "weights", "activation", "non_torch",
                                                             "cudagraph", "kv")))
    return sorted(out.values(), key=lambda w: (w.dp, w.pp, w.tp))


def mm_limits(limits: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """vLLM's --limit-mm-per-prompt ({"video": 0} or {"image": {"count": 2, ...}}) as (modality, items) pairs."""
    out = []
    for modality, v in sorted(limits.items()):
        if isinstance(v, dict) and set(v) - {"count"}:
            raise UserError(f"--limit-mm-per-prompt: {modality!r} sets {', '.join(sorted(set(v) - {'count'}))}, which "
                            "changes the dummy item vLLM profiles the tower with; not modelled (give a count alone)")
        n = v.get("count") if isinstance(v, dict) else v
        if not isinstance(modality, str) or isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UserError(f"--limit-mm-per-prompt: {modality!r} must be a number of items, 0 or more (or "
                            '{"count": N}), e.g. \'{"video": 0}\'')
        out.append((modality, n))
    return tuple(out)


def json_object(value: Any, flag: str, what: str, example: str) -> dict[str, Any]:
    """A flag that takes vLLM's JSON object (JSON text, or the object a log states); anything else is one line
    naming `what` it should hold and an `example`."""
    try:
        obj = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        raise UserError(f"{flag} {value!r}: give a JSON object{what}, e.g. '{example}'")
    return obj


def processor_kwargs(value: Any) -> str:
    """--mm-processor-kwargs (JSON text, or the object a log states) as compact JSON with sorted keys ('' : none);
    anything but a JSON object is one line."""
    if value in (None, "", {}):
        return ""
    kwargs = json_object(value, "--mm-processor-kwargs", "", '{"max_pixels": 1003520}')
    return json.dumps(kwargs, sort_keys=True, separators=(",", ":"))


def flags_from_args(args: dict[str, Any]) -> dict[str, Any]:
    """vLLM's non-default args -> the keyword arguments of `deployment.Flags` (what the log states); a value of
    the wrong type (an edited or damaged log) is a one-line error naming it."""
    try:
        return _flags_from_args(args)
    except (ValueError, TypeError, OverflowError, AttributeError) as e:
        raise UserError(f"the log's non-default args hold a value vLLM would not have printed ({str(e)[:80]}); "
                        "pass the flags yourself (--gmu, -tp, --max-model-len ...)") from None


def _count(value: Any) -> int:
    """A whole count from a log, in the range config.json's counts are held to (model/config_check.COUNT_LIMIT)."""
    from .model.config_check import COUNT_LIMIT

    n = int(value)
    if not 0 <= n <= COUNT_LIMIT:
        raise ValueError(f"{n} is not a count vLLM runs with")
    return n


def _flags_from_args(args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "gpu_memory_utilization" in args:
        out["gpu_memory_utilization"] = float(args["gpu_memory_utilization"])
    if "kv_cache_dtype" in args:
        out["kv_cache_dtype"] = str(args["kv_cache_dtype"])
    if "dtype" in args:
        out["dtype"] = str(args["dtype"])
    if args.get("enforce_eager"):
        out["enforce_eager"] = True
    spec = args.get("speculative_config")
    if isinstance(spec, str):
        import json

        spec = json.loads(spec)
    if isinstance(spec, dict):
        out["speculative_method"] = str(spec.get("method", "mtp"))
        out["num_speculative_tokens"] = _count(spec.get("num_speculative_tokens", 1))
        if spec.get("model"):
            out["draft_model"] = str(spec["model"])
        from .deployment import ngram_lookup

        out.update(ngram_lookup(spec, "the log's speculative_config"))  # ngram's prompt_lookup_min / _max
    if str(args.get("gdn_prefill_backend", "")).lower() in ("triton", "flashinfer"):
        out["gdn_prefill_backend"] = str(args["gdn_prefill_backend"]).lower()
    for k in ("max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size"):
        if k in args:
            out[k] = _count(args[k])
    if "max_model_len" in args:
        v = args["max_model_len"]
        out["max_model_len"] = -1 if str(v).lower() in ("-1", "auto") else _count(v)
    if "enable_prefix_caching" in args:
        out["enable_prefix_caching"] = bool(args["enable_prefix_caching"])
    if args.get("enable_lora") not in (None, False, "False"):
        from .model.lora import LoraSlots

        out["lora"] = LoraSlots(int(args.get("max_loras", LoraSlots.max_loras)),
                                int(args.get("max_lora_rank", LoraSlots.max_rank)),
                                bool(args.get("fully_sharded_loras", LoraSlots.fully_sharded)))
    # vLLM loads a multimodal checkpoint's tower unless told otherwise (the tool's own default is the reverse)
    out["language_model_only"] = bool(args.get("language_model_only", False))
    limits = args.get("limit_mm_per_prompt")
    if isinstance(limits, dict) and limits:
        out["limit_mm_per_prompt"] = mm_limits(limits)
    if args.get("mm_processor_kwargs") not in (None, {}, ""):
        out["mm_processor_kwargs"] = processor_kwargs(args["mm_processor_kwargs"])
    return out
