"""Pictures of the numbers (matplotlib, the optional `notebook` extra): the budget as stacked bars,
and ceiling-vs-GMU curves with measured probe points over the predicted lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..errors import UserError
from ..prediction import Prediction
from ..units import GiB

TERMS = [("weights", "weights_bytes"), ("MTP head", "mtp_weights_bytes"), ("activation peak", "activation_bytes"),
         ("non-torch", "non_torch_bytes"), ("CUDA graphs", "cudagraph_bytes"), ("KV cache", "available_kv_bytes")]


def _plt():
    try:
        import sys

        import matplotlib

        if "IPython" not in sys.modules and "matplotlib.pyplot" not in sys.modules:
            matplotlib.use("Agg")  # the CLI draws to files; a notebook keeps its inline backend
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plots need matplotlib: pip install 'vrambudget[notebook]'") from None
    return plt


def budget_segments(p: Prediction) -> dict[str, float]:
    """The stacked-bar segments of one prediction, GiB (KV cache clipped at 0)."""
    j = p.to_json()
    seg = {label: max(0.0, j[key] / GiB) for label, key in TERMS}
    if not p.budget.cudagraph_in_budget:
        seg["CUDA graphs"] = 0.0
    return seg


def budget_bars(items: Iterable[tuple[str, Prediction]], ax: Any = None, title: str | None = None) -> Any:
    plt = _plt()
    items = list(items)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 * len(items) + 3, 4.5))
    bottoms = [0.0] * len(items)
    for label, _ in TERMS:
        vals = [budget_segments(p)[label] for _, p in items]
        ax.bar([n for n, _ in items], vals, bottom=bottoms, label=label)
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=False)]
    if items:
        ax.axhline(items[0][1].budget.requested_bytes / GiB, color="black", lw=0.8, ls="--", label="GMU budget")
    ax.set_ylabel("GiB")
    ax.set_title(title or "Budget per configuration")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.tick_params(axis="x", labelrotation=20)
    return ax


def ceiling_curves(table: dict[str, Any], ax: Any = None, points: list[dict[str, Any]] | None = None,
                   title: str | None = None) -> Any:
    """Predicted ceiling vs GMU per column; `points` = probe records (gmu, max_model_len, ok)."""
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    gmus = [r["gmu"] for r in table["rows"]]
    for col in table["columns"]:
        ax.plot(gmus, [r["ceilings"][col] / 1024 for r in table["rows"]], marker=".", label=f"predicted: {col}")
    for pt in points or []:
        ax.scatter([pt["gmu"]], [pt["max_model_len"] / 1024], marker="o" if pt["ok"] else "x",
                   color="black" if pt["ok"] else "red", s=25 if pt["ok"] else 70, zorder=5 if pt["ok"] else 6)
    if points:
        ax.scatter([], [], marker="o", color="black", label="probe: started")
        ax.scatter([], [], marker="x", color="red", label="probe: refused")
    ax.set_xlabel("--gpu-memory-utilization")
    ax.set_ylabel("longest max_model_len (K tokens)")
    ax.set_title(title or "Ceiling vs GMU")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def probe_points(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Startup records -> plot points (GMU, max_model_len, started or not)."""
    return [{"gmu": r["inputs"]["gpu_memory_utilization"], "max_model_len": r["inputs"]["max_model_len"],
             "ok": r["outcome"] == "started"} for r in records if r.get("kind") != "verify" and "inputs" in r]


def save(ax: Any, path: str | Path, flag: str = "--plot") -> Path:
    """Draw the figure of `ax` to exactly `path` (the format its suffix names, PNG without one), atomically: a folder,
    a device, a pipe or a symbolic link there is refused in one line, and a failed write (a full disk) leaves what
    was there as it was. (matplotlib's own savefig would add '.png' to a name without a suffix and write beside
    the named path, over whatever file that was.)"""
    import io

    from ..profiles import check_output, write_bytes_atomic

    plt = _plt()
    path = Path(path)
    fig = ax.figure
    try:
        check_output(path, flag)
        fmt = path.suffix[1:].lower() or "png"
        known = fig.canvas.get_supported_filetypes()
        if fmt not in known:
            raise UserError(f"{flag} {path}: matplotlib cannot draw .{fmt} files; give a name ending in "
                            f"{', '.join('.' + k for k in sorted(known))}")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=120)
        write_bytes_atomic(path, buf.getvalue(), flag)
    finally:
        plt.close(fig)
    return path
