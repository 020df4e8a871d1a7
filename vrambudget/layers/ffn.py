"""The feed-forward block of a decoder layer: a dense MLP, or a mixture of experts (routed experts, an optional
shared expert, the router). Neither holds a cache; the MoE's fused-expert scratch is a profile term (budget.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .base import Role, Tensor


@dataclass(frozen=True)
class DenseMLP:
    hidden: int
    intermediate: int
    gated: bool = True  # gate and up projections (SwiGLU); False: up only (Nemotron-H's squared ReLU)
    bias: bool = False
    # vLLM's model file keeps the gate-up output referenced while down_proj runs (qwen2.py, gemma*.py,
    # deepseek_v2.py, glm4_moe.py: `gate_up, _ = ...`); False where it rebinds it first (llama.py, mistral.py,
    # nemotron_h.py: `x, _ = ...`), so the peak is the larger of gate-up + activation and activation + down
    holds_gate_up: bool = True

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        p, h, i = f"{prefix}.mlp", self.hidden, self.intermediate
        if self.gated:
            yield Tensor(f"{p}.gate_proj", h, i, bias=self.bias, part=part)
        yield Tensor(f"{p}.up_proj", h, i, bias=self.bias, part=part)
        yield Tensor(f"{p}.down_proj", i, h, bias=self.bias, part=part)

    def compiled_forward_bytes(self, tokens: int, tp: int, act_bytes: int) -> int:
        """The MLP's own tensors at its activation inside a compiled piece (vLLM 0.33, custom ops off: the native
        SiluAndMul), per rank: the gate-up (or up) projection's output beside the activation's."""
        return tokens * act_bytes * ((2 if self.gated else 1) + 1) * self.intermediate // tp

    @property
    def width(self) -> int:
        """Intermediate width a token goes through (the forward's activation scale)."""
        return self.intermediate

    def forward_bytes(self, tokens: int, tp: int, act_bytes: int) -> int:
        """The MLP's own tensors at its eager peak, per rank: the gate-up (or up) projection's output and the
        activation's output (split over the ranks), and down_proj's output (whole hidden) while the gate-up output
        is still held. vLLM 0.26.0's allocator at 8192 tokens: Qwen3-8B 384 + 192 + 64 MiB; Llama-3.1-8B, whose
        file drops the gate-up output first, peaks at gate-up + activation (its first pipeline stage: 0.88 GiB)."""
        up, act = (2 if self.gated else 1) * self.intermediate // tp, self.intermediate // tp
        if self.holds_gate_up:
            return tokens * act_bytes * (up + act + self.hidden)
        return tokens * act_bytes * max(up + act, act + self.hidden)


@dataclass(frozen=True)
class MoE:
    hidden: int
    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int = 0  # 0: no shared expert
    shared_gate: bool = True  # a 1-output sigmoid gate on the shared expert (Qwen MoE)
    gated: bool = True  # the experts' gate and up projections; False: up only (Nemotron-H)
    router_bias: bool = False  # a routing correction bias per expert (DeepSeek's e_score_correction_bias), fp32
    expert_bias: bool = False  # biases on the experts' projections and the router (gpt-oss)
    fused: bool = False  # the experts as vLLM's fused w13 (gate and up) and w2 tensors (their quantized layout
    # pads the fused shape: gpt-oss's MXFP4)
    shared_gated: bool = True  # the shared expert has a gate projection (False: Nemotron-H's squared ReLU)
    router_fp32: bool = False  # the router's weight in fp32 (GLM-4.5, MiniMax-M2, MiMo-V2)

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        p, h, e, i = f"{prefix}.mlp", self.hidden, self.num_experts, self.expert_intermediate
        if self.router_fp32:
            yield Tensor(f"{p}.gate.", h * e, 1, linear=False, part=part, dtype_bytes=4, role=Role.ROUTER)
        else:
            yield Tensor(f"{p}.gate.", h, e, part=part, bias=self.expert_bias, role=Role.ROUTER)
        if self.router_bias:
            yield Tensor(f"{p}.gate.e_score_correction_bias", e, 1, linear=False, part=part, dtype_bytes=4,
                         role=Role.ROUTER)
        if self.fused:
            yield Tensor(f"{p}.experts.w13", h, (2 if self.gated else 1) * i, count=e, bias=self.expert_bias,
                         part=part, role=Role.EXPERTS, fuse="w13")
            yield Tensor(f"{p}.experts.w2", i, h, count=e, bias=self.expert_bias, part=part, role=Role.EXPERTS,
                         fuse="w2")
        else:
            for proj in ("gate_proj", "up_proj") if self.gated else ("up_proj",):
                yield Tensor(f"{p}.experts.{proj}", h, i, count=e, bias=self.expert_bias, part=part,
                             role=Role.EXPERTS, fuse="w13")
            yield Tensor(f"{p}.experts.down_proj", i, h, count=e, bias=self.expert_bias, part=part,
                         role=Role.EXPERTS, fuse="w2")
        if self.shared_intermediate:
            s = self.shared_intermediate
            if self.shared_gated:
                yield Tensor(f"{p}.shared_expert.gate_proj", h, s, part=part)
            yield Tensor(f"{p}.shared_expert.up_proj", h, s, part=part)
            yield Tensor(f"{p}.shared_expert.down_proj", s, h, part=part)
            if self.shared_gate:
                yield Tensor(f"{p}.shared_expert_gate", h, 1, part=part, role=Role.SHARED_GATE)

    @property
    def width(self) -> int:
        """Intermediate width a token goes through: top_k experts and the shared expert."""
        return self.top_k * self.expert_intermediate + self.shared_intermediate
