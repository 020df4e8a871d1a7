"""Several GPUs: one budget per rank. vLLM budgets every worker on its own GPU (ceil(its total x the one shared
GMU)), profiles it alone, and gives every worker of an engine the smallest number of KV blocks any of them has
(v1/core/kv_cache_utils.py get_kv_cache_configs, 0.11-0.33): the worst rank decides the ceiling.

- Tensor parallel ranks hold the same shares; with cards of different memory only their budgets differ.
- Pipeline parallel stages hold consecutive layers (vLLM's split: distributed/utils.py get_pp_indices, or
  VLLM_PP_LAYER_PARTITION); the first stage the token embedding, the last the lm_head and the sampler's dummy run;
  every later stage keeps the intermediate tensors it receives. Which stage holds the embedding is the model
  file's choice (EMBED_ON_EVERY_STAGE).
- Data parallel ranks are separate engines, each planned alone: for a dense model each is the deployment above.
- Expert parallel with the experts split evenly over the TP ranks holds the same bytes per rank as TP's split
  (0.26.0 lab, Qwen3-30B-A3B TP 2: 28.46 GiB per rank both ways).

- A stage's KV blocks: vLLM groups the whole model's layers (hybrids, sliding windows), projects every group onto
  each stage's layers, and sizes a stage's pools by its largest projection (kv.planner.stage_pool_layers).

Not modelled (refused in one line): speculative decoding under pipeline parallel, data parallel of mixture-of-experts models and expert parallel with an uneven split (where the
experts go)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .errors import UserError
from .model.arch import StageShare
from .hardware.catalog import GPU

# model files that build embed_tokens and lm_head on every pipeline stage, unguarded (vLLM 0.20.2-0.33.0:
# qwen2_moe.py, qwen3_moe.py, mixtral.py, gemma3.py, gpt_oss.py, qwen3_next.py, nemotron_h.py, llama4.py)
EMBED_ON_EVERY_STAGE = {"Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Gemma3ForCausalLM",
                        "GptOssForCausalLM", "Qwen3NextForCausalLM", "NemotronHForCausalLM", "Llama4ForCausalLM"}


def pp_partition(num_layers: int, pp: int, env: str | None = None) -> list[int]:
    """Layers per pipeline stage as vLLM splits them: VLLM_PP_LAYER_PARTITION ('12,20') where set, else
    num_layers // pp each with the remainder given one each to the stages before the last, counting back from it
    (distributed/utils.py get_pp_indices, 0.10.2-0.33.0: 61 over 4 -> 15,15,16,15)."""
    if env:
        try:
            parts = [int(x) for x in env.split(",")]
        except ValueError:
            raise UserError(f"VLLM_PP_LAYER_PARTITION {env!r}: give one whole number per stage, e.g. 12,20") from None
        if len(parts) != pp or sum(parts) != num_layers or min(parts) < 0:
            raise UserError(f"VLLM_PP_LAYER_PARTITION {env!r}: vLLM needs {pp} numbers summing to the model's "
                            f"{num_layers} layers")
        return parts
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def gpu_list(text: str, lookup) -> list[GPU]:
    """`--gpu rtx5090,rtx5070ti`: one card per name, in rank order."""
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise UserError(f"--gpu {text!r}: an empty name in the list; give cards separated by commas")
    return [lookup(n) for n in names]


@dataclass(frozen=True)
class Rank:
    """One worker: its pipeline stage, tensor-parallel rank and GPU, and the layers it holds."""

    pp_rank: int
    tp_rank: int
    gpu: GPU
    first_layer: int
    layers: int

    @property
    def name(self) -> str:
        return f"PP{self.pp_rank} TP{self.tp_rank}"


def ranks(d, pp: int, gpus: list[GPU] | None = None, partition: str | None = None) -> list[Rank]:
    """The workers of one engine, TP innermost (vLLM's world rank = pp_rank x tp + tp_rank): `gpus` has one card
    (all alike), one per pipeline stage, or one per worker (default: the deployment's own cards)."""
    if pp > d.model.arch.num_layers:  # also keeps the loop below to the model's size
        raise UserError(f"--pipeline-parallel-size {pp}: {d.model.arch.name} has {d.model.arch.num_layers} layers, "
                        "so a stage would hold none (not modelled)")
    gpus = gpus or list(d.gpus) or [d.gpu]
    world = pp * d.tp
    if len(gpus) not in (1, pp, world):
        raise UserError(f"--gpu lists {len(gpus)} cards: give one (all alike), {pp} (one per pipeline stage) or "
                        f"{world} (one per worker: {pp} stages x {d.tp} tensor-parallel ranks)")
    parts = pp_partition(d.model.arch.num_layers, pp, partition or d.pp_partition)
    out, start = [], 0
    for s, n in enumerate(parts):
        for t in range(d.tp):
            g = gpus[0] if len(gpus) == 1 else gpus[s] if len(gpus) == pp else gpus[s * d.tp + t]
            out.append(Rank(s, t, g, start, n))
        start += n
    return out


_LAYER = re.compile(r"\.layers\.(\d+)\.")


def stage_deployment(d, r: Rank, pp: int):
    """The deployment one worker plans: its GPU, its layers (its share of the checkpoint's tensors where the
    headers are known), the embedding and lm_head where its stage holds them."""
    a = d.model.arch
    if pp > 1:
        if d.spec_tokens:
            raise UserError("speculative decoding with pipeline parallel is not modelled (the drafter's stage)")
    first, last = r.pp_rank == 0, r.pp_rank == pp - 1
    every = a.architecture in EMBED_ON_EVERY_STAGE
    embed = first or every or (last and a.tie_word_embeddings)
    head = last or every
    end = r.first_layer + r.layers
    arch = replace(a, layers=a.layers[r.first_layer:end],
                   share=StageShare(r.first_layer, a.layers, embed, head) if pp > 1 else None)
    tensors = d.model.tensors
    if pp > 1 and tensors:
        def kept(name: str) -> bool:
            m = _LAYER.search(name)
            if m:
                return r.first_layer <= int(m.group(1)) < end
            if "embed_tokens" in name:
                return embed
            if name.startswith("lm_head"):
                return head
            return True
        tensors = tuple(t for t in tensors if kept(t.name))
    model = replace(d.model, arch=arch, tensors=tensors)
    return d.with_(model=model, gpu=r.gpu, pp_first=first, pp_last=last, pp=pp)


@dataclass(frozen=True)
class RankPlan:
    rank: Rank
    prediction: object  # predict.Prediction of this worker

    @property
    def num_blocks(self) -> int:
        return self.prediction.plan.num_blocks


def plan_ranks(d, c, pp: int | None = None, gpus: list[GPU] | None = None,
               partition: str | None = None) -> list[RankPlan]:
    """Every worker's own budget and KV plan (predict on its share); by default the deployment's own stages, cards
    and layer partition. The engine's blocks are the smallest of them (`worst`)."""
    from .prediction import predict

    pp = pp or d.pp
    return [RankPlan(r, predict(stage_deployment(d, r, pp), c))
            for r in ranks(d, pp, gpus, partition)]


def worst(plans: list[RankPlan]) -> RankPlan:
    """The worker with the fewest KV blocks (ties: the lowest ceiling): it decides what the engine starts with."""
    return min(plans, key=lambda p: (p.prediction.plan.num_blocks, p.prediction.ceiling))


def ranks_json(d, plans: list[RankPlan], bad: RankPlan) -> dict:
    """`predict --json` for several workers: the worst worker's prediction, and every worker's share and figures."""
    return {**bad.prediction.to_json(), "worst_rank": bad.rank.name, "nodes": d.nodes, "ranks": [
        {"rank": r.rank.name, "gpu": r.rank.gpu.key, "first_layer": r.rank.first_layer, "layers": r.rank.layers,
         "budget_bytes": r.prediction.budget.requested_bytes, "weights_bytes": r.prediction.budget.weights_bytes,
         "activation_bytes": r.prediction.budget.activation_bytes,
         "available_kv_bytes": r.prediction.budget.available_kv_bytes, "num_blocks": r.num_blocks,
         "ceiling": r.prediction.ceiling} for r in plans]}


def several(d) -> bool:
    """More than one worker with budgets of their own (pipeline stages or a list of cards)."""
    return d.pp > 1 or len(d.gpus) > 1


def deciding(d, c):
    """The prediction that decides the engine: the worst worker's where there are several, else the deployment's."""
    from .prediction import predict

    return worst(plan_ranks(d, c)).prediction if several(d) else predict(d, c)


def one_budget_only(d, command: str) -> None:
    """Commands that plan one budget refuse several workers in one line (predict and serve-cmd plan each worker)."""
    if several(d):
        raise UserError(f"{command} plans one budget: for pipeline stages or a list of cards use `vrambudget predict` "
                        "(a budget per worker) or `vrambudget serve-cmd`")
