"""The probe's searches against a fake vLLM in pure Python (no processes): the ceiling each GMU gives is known,
and the fake answers as vLLM does: started (with the exact ceiling its logged KV memory gives, when the log shows
it), refused (with vLLM's estimate, when it prints one), and, for the verification, served or out of memory."""

from vrambudget.probe import search
from vrambudget.probe.search import Trial

BLOCK = 544


class FakeVllm:
    def __init__(self, ceilings: dict[float, int], *, exact: bool = True, estimate: bool = True,
                 serves_up_to_gmu: float = 1.0, stall_above: int | None = None, verify: bool = True):
        self.ceilings, self.exact, self.estimate = ceilings, exact, estimate
        self.serves_up_to_gmu, self.stall_above = serves_up_to_gmu, stall_above
        self.verify = verify  # the probe keeps the server for a verification only with --verify
        self.starts: list[tuple[float, int, bool | None]] = []

    def __call__(self, gmu: float, mml: int, verify_if) -> Trial:
        ceiling = self.ceilings[gmu]
        n = len(self.starts) + 1
        if mml > ceiling:
            self.starts.append((gmu, mml, None))
            return Trial(n, "kv_too_small", estimate=ceiling if self.estimate else None,
                         available_bytes=ceiling * 1000.0, needed_bytes=mml * 1000.0)
        exact = ceiling if self.exact else None
        verified = None
        if self.verify and verify_if(exact):
            verified = gmu <= self.serves_up_to_gmu and (self.stall_above is None or mml <= self.stall_above)
        self.starts.append((gmu, mml, verified))
        return Trial(n, "started", exact=exact, available_bytes=ceiling * 1000.0, verified=verified,
                     runtime_oom=verified is False and gmu > self.serves_up_to_gmu)


def run_bisect(fake: FakeVllm, gmu: float, predicted: int, verify: bool = True, serving=None, lines=None):
    return search.bisect(fake, gmu=gmu, block=BLOCK, max_len=262_144, predicted=predicted, verify=verify,
                         serving_gmu=serving or (lambda g, n: None), report=(lines if lines is not None else []).append)


def test_refused_start_jumps_to_vllms_estimate_and_verifies_it():
    fake = FakeVllm({0.9: 95 * BLOCK})
    out = run_bisect(fake, 0.9, predicted=100 * BLOCK)
    assert out["ceiling"] == 95 * BLOCK
    assert fake.starts == [(0.9, 100 * BLOCK, None), (0.9, 95 * BLOCK, True)]


def test_started_start_jumps_to_the_exact_ceiling_of_its_kv_memory():
    fake = FakeVllm({0.9: 95 * BLOCK})
    out = run_bisect(fake, 0.9, predicted=80 * BLOCK)
    assert out["ceiling"] == 95 * BLOCK and len(fake.starts) == 2 and fake.starts[-1][2] is True


def test_without_the_logs_help_it_bisects_to_the_block():
    fake = FakeVllm({0.9: 95 * BLOCK}, exact=False, estimate=False, verify=False)
    out = run_bisect(fake, 0.9, predicted=200 * BLOCK, verify=False)
    assert out["ceiling"] == 95 * BLOCK and out["bracket"][1] == 96 * BLOCK
    assert all(v is None for _, _, v in fake.starts)  # --no-verify: nothing verified


def test_a_runtime_oom_moves_to_the_gmu_predicted_to_serve():
    fake = FakeVllm({0.97: 60 * BLOCK, 0.95: 56 * BLOCK}, serves_up_to_gmu=0.95)
    lines: list[str] = []
    out = run_bisect(fake, 0.97, predicted=60 * BLOCK, serving=lambda g, n: 0.95 if g > 0.95 else None, lines=lines)
    assert out["gmu"] == 0.95 and out["ceiling"] == 56 * BLOCK and out["runtime_oom_gmus"] == [0.97]
    assert any(line.startswith("[1] runtime OOM at GMU 0.97") for line in lines)


def test_a_length_that_starts_but_never_serves_lowers_the_length():
    fake = FakeVllm({0.9: 95 * BLOCK}, stall_above=80 * BLOCK)
    out = run_bisect(fake, 0.9, predicted=95 * BLOCK)
    assert out["ceiling"] <= 80 * BLOCK and out["ceiling"] > 70 * BLOCK
    assert fake.starts[0] == (0.9, 95 * BLOCK, False)


def test_target_finds_the_smallest_gmu_in_steps_of_the_missing_memory():
    ceilings = {round(g / 100, 2): (g - 80) * 20 * BLOCK for g in range(81, 100)}
    fake = FakeVllm(ceilings)
    out = search.target(fake, tokens=200 * BLOCK, start_gmu=0.85, need_bytes=200 * BLOCK * 1000,
                        total_bytes=int(20 * BLOCK * 1000 * 100))
    assert out["min_gmu"] == 0.90  # (90 - 80) x 20 blocks = 200 blocks
    assert len(fake.starts) <= 4


def test_a_failure_that_is_not_the_kv_cache_ends_the_search():
    def crash(gmu, mml, verify_if):
        return Trial(1, "crashed")

    assert run_bisect(crash, 0.9, predicted=BLOCK)["failed"] == "crashed"
