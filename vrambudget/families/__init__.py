"""Model families: which config.json architectures vrambudget plans and how each is read into layer kinds. An
allow-list keyed by `architectures[0]` (else `model_type`), the way vLLM's model registry maps an architecture to its
implementation: a config the registry does not know is refused in one line, never planned as dense attention.
Add a family: one module here whose `FAMILY` names the architectures and model types it claims, its reader and its
evidence; it is found by its presence (no list to edit). A claim two families make is refused when they load."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from ..errors import UserError


@dataclass(frozen=True)
class Family:
    name: str  # what a user calls it
    architectures: tuple[str, ...]  # config.json's architectures[0]
    model_types: tuple[str, ...]  # config.json's model_type (for configs without architectures)
    read: Callable[[dict[str, Any], str], Any]  # (config, name) -> ModelArch
    evidence: str  # what its plan was checked against (vLLM's source, lab startups, public logs)


@lru_cache(maxsize=1)
def families() -> tuple[Family, ...]:
    """Every module of this package that defines a FAMILY, by module name."""
    found = []
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        family = getattr(importlib.import_module(f"{__name__}.{m.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    for key in ("architectures", "model_types"):
        claims: dict[str, str] = {}
        for f in found:
            for name in getattr(f, key):
                if name in claims:
                    raise RuntimeError(f"families {claims[name]!r} and {f.name!r} both claim {name}")
                claims[name] = f.name
    return tuple(found)


def family_of(cfg: dict[str, Any]) -> Family | None:
    """The family of a config: by architectures[0], else by model_type."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    archs = cfg.get("architectures") or text.get("architectures") or []
    arch = str(archs[0]) if isinstance(archs, list) and archs else ""
    model_type = str(cfg.get("model_type") or text.get("model_type") or "")
    for f in families():
        if arch and arch in f.architectures:
            return f
    if not arch:
        return next((f for f in families() if model_type in f.model_types), None)
    return None


def arch_from_config(cfg: Any, name: str = "model") -> Any:
    """The ModelArch of a config.json, read by its family; a config no family claims is refused in one line."""
    from ..model.config_check import check_config

    f = family_of(check_config(cfg, name))
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    if f is None and not (cfg.get("architectures") or cfg.get("model_type") or text.get("model_type")):
        what = ("a diffusers config" if "_class_name" in cfg else "a tokenizer config" if "tokenizer_class" in cfg
                else "no model config")
        raise UserError(f"config.json of {name} names no architectures or model_type ({what}, without "
                        "'num_hidden_layers'): is it a decoder-only LLM's config?")
    if f is None:
        text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
        archs = cfg.get("architectures") or text.get("architectures") or ["?"]
        model_type = cfg.get("model_type") or text.get("model_type") or "?"
        raise UserError(f"{name}: {str(archs[0])[:80]} (model_type {str(model_type)[:40]}) is not a family vrambudget "
                        f"plans: its layers' memory is not modelled, and it is refused rather than planned as dense "
                        f"attention (supported: `vrambudget models --families`)")
    try:
        return f.read(cfg, name)
    except KeyError as e:  # a field its family needs is missing (a cut or hand-edited config)
        raise UserError(f"config.json of {name} lacks {e.args[0]!r}, which a {f.name} config has; the file is "
                        "damaged or not this model's config") from None
    except (TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as e:
        raise UserError(f"config.json of {name}: a field a {f.name} config holds has the wrong type or value "
                        f"({type(e).__name__}: {str(e)[:100]}); the file is damaged") from None
