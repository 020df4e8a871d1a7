"""The lab runner: real vLLM on the GPU host, as a plan file says (benchmarks/lab/plans/*.json).

On the host (device tool), from the repository root:
  python3 benchmarks/lab/run.py PLAN            every step of the plan in turn (finished ones are skipped:
                                                state in /tmp/lab, so one command can span several calls)
  python3 benchmarks/lab/run.py PLAN TAG ...    only these steps
  python3 benchmarks/lab/run.py PLAN part       copy the carried bundle part (one per call) to the parts folder
  python3 benchmarks/lab/run.py PLAN prepare    unpack the bundle, restore the JIT cache, write the models (once,
                                                before lanes start side by side)
  python3 benchmarks/lab/run.py PLAN cache      the JIT caches (Triton, FlashInfer) to $OUT, for the next host
  python3 benchmarks/lab/run.py PLAN --detach [TAG ...]   the same in the background (its own session, so it
                                                runs on between calls), waiting up to --wait seconds (default 560);
  python3 benchmarks/lab/run.py PLAN --detach --lane NAME TAG ...   one of several background runs side by side
                                                (a host of several GPUs: each step's "gpus" sets CUDA_VISIBLE_DEVICES)
  python3 benchmarks/lab/run.py PLAN --wait S   wait for the background runs again (every lane); both end by packing
                                                what the steps made so far into $OUT/lab.tgz (split at 15 MiB)
Here (no GPU): `python3 benchmarks/lab/run.py PLAN --list` prints the steps and the fixture each one made.

A plan names its vLLM bundle, its environment, the model folders written on the host (from a fixture config, a
bundled profile or drafter, with stand-in processor files), and its steps: `startup` (one in-process engine
startup through benchmarks/lab/startup.py, a JSON config), `probe` (`vrambudget probe` with these arguments),
`serve` (one `vllm serve` startup with these arguments, stopped once it is up), `snapshot` (what is alive at the
memory profile's peak: benchmarks/lab/peak_snapshot.py, a startup config), `shell` (a change to the host
between steps, e.g. dropping the Triton cache), `ctx` (the CUDA context of a bare process). Each step names the fixture it made; step logs go to $OUT/TAG.log
and /tmp/lab, probe folders to $OUT/TAG.tgz.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
STATE = Path("/tmp/lab")
CTX = ("import torch; torch.cuda.init(); f0,t=torch.cuda.mem_get_info(); x=torch.zeros(1,device='cuda'); "
       "torch.cuda.synchronize(); f1,_=torch.cuda.mem_get_info(); p=torch.cuda.get_device_properties(0); "
       "print('LAB ctx total',t,'used_after_init',t-f0,'used_after_first_alloc',t-f1,'sms',p.multi_processor_count,"
       "'name',p.name)")


KINDS = ("startup", "serve", "snapshot", "probe", "shell", "ctx")


class PlanError(Exception):
    """A plan or an argument the runner cannot use: said in one line (exit 2)."""


def load(plan: str) -> dict:
    """The plan by path or by name (plans/NAME.json), checked (check_plan)."""
    path = Path(plan) if plan.endswith(".json") or "/" in plan else HERE / "plans" / f"{plan}.json"
    try:
        p = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"no plan {plan!r}: give a file or a name of benchmarks/lab/plans/ (--list shows its steps)")
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError(f"cannot read plan {path}: {getattr(e, 'strerror', None) or e}")
    except json.JSONDecodeError as e:
        raise PlanError(f"plan {path} is not JSON ({e.msg}, line {e.lineno})")
    check_plan(p, path.name)
    return p


def check_plan(p: object, name: str) -> None:
    """What the runner relies on: a bundle (or null), steps with a unique tag and exactly one kind each, a 'gpus'
    that is a list of GPU indices, model sources that are named."""
    if not isinstance(p, dict):
        raise PlanError(f"plan {name}: a JSON object is expected at the top")
    b = p.get("bundle", "missing")
    if b == "missing" or not (b is None or isinstance(b, dict) and all(isinstance(b.get(k), str) and b.get(k)
                                                                        for k in ("dir", "parts", "site"))):
        raise PlanError(f"plan {name}: 'bundle' must be null or name its dir, parts and site folders")
    steps = p.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        raise PlanError(f"plan {name}: 'steps' must be a non-empty list of objects")
    seen = set()
    for s in steps:
        tag = s.get("tag")
        if not isinstance(tag, str) or not tag or not all(c.isalnum() or c in "._-" for c in tag):
            raise PlanError(f"plan {name}: a step's tag must be letters, digits, '.', '_' or '-' ({tag!r})")
        if tag in seen or tag in ("part", "cache", "prepare"):
            raise PlanError(f"plan {name}: tag {tag!r} is used twice or is a runner word")
        seen.add(tag)
        for dep in s.get("after", []) + ([s["unless_done"]] if "unless_done" in s else []):
            if dep not in seen:
                raise PlanError(f"plan {name}: step {tag} comes after {dep!r}, which is not an earlier step")
        if sum(k in s for k in KINDS) != 1:
            raise PlanError(f"plan {name}: step {tag} must have exactly one of {', '.join(KINDS)}")
        g = s.get("gpus")
        if g is not None and not (isinstance(g, list) and g and all(isinstance(i, int) and 0 <= i < 64 for i in g)):
            raise PlanError(f"plan {name}: step {tag}: 'gpus' is a list of GPU indices, e.g. [0] or [2, 3]")
        t = s.get("timeout", 560)
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 1 <= t <= 3600:
            raise PlanError(f"plan {name}: step {tag}: 'timeout' is seconds from 1 to 3600")
    models = p.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(m, dict) and sum(k in m for k in ("fixture", "profile",
                                                                                             "drafter")) == 1
                                               for m in models.values()):
        raise PlanError(f"plan {name}: each model names one of fixture, profile or drafter")


def sh(cmd: str, env: dict | None = None, timeout: float | None = None, log: Path | None = None) -> int:
    with open(log, "ab") if log else open(os.devnull, "wb") as out:
        try:
            return subprocess.run(cmd, shell=True, env=env, stdout=out if log else None,
                                  stderr=subprocess.STDOUT if log else None, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return 124


def prepare(p: dict) -> dict:
    """Unpack the bundle and the JIT cache once, write the model folders, run the plan's setup lines."""
    b = p["bundle"]
    if b is None:  # a plan of the host's torch alone (no vLLM)
        return dict(os.environ)
    site, parts = Path(b["site"]), Path(b["parts"])
    if not (site / "vllm" / "__init__.py").is_file():
        site.mkdir(parents=True, exist_ok=True)
        sh(f"cat {parts}/part-* | xz -d | tar xi -C {site}")
    cache = ROOT / b.get("jit_cache", b["dir"] + "/jit-cache.tgz")
    if cache.is_file() and not Path("/tmp/lab/.jit").exists():
        sh(f"tar -xzf {cache} -C ~ && mkdir -p /tmp/lab && touch /tmp/lab/.jit")
    for dest, m in p.get("models", {}).items():
        if (Path(dest) / "config.json").is_file():
            continue
        cfg = _model_config(m)
        src = Path(f"/tmp/lab/cfg{dest.replace('/', '_')}")
        src.mkdir(parents=True, exist_ok=True)
        (src / "config.json").write_text(json.dumps(cfg, indent=1))
        if m.get("processor"):
            sh(f"python3 {HERE}/fake_processor.py {src} {dest}")
        else:
            shutil.copytree(src, dest, dirs_exist_ok=True)
    for line in p.get("setup", []):
        sh(line)
    env = {**os.environ, **p.get("env", {}), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = ":".join(p.get("pythonpath_first", []) + [str(site)])
    return env


def _model_config(m: dict) -> dict:
    """A model folder's config.json: a fixture's, a bundled profile's or drafter's, then the plan's changes (each
    said in the plan): `text_only` (the text model of a multimodal config, as its own architecture), `config_remove`
    (dotted keys dropped, e.g. an FP8 quantization_config the bundle cannot run) and `config_updates` (dotted keys
    set, e.g. fewer layers of a model too large for one GPU)."""
    if "fixture" in m:
        cfg = json.loads((ROOT / m["fixture"] / "config.json").read_text())
    elif "profile" in m:
        cfg = json.loads((ROOT / "profiles" / "models" / f"{m['profile']}.json").read_text())["config"]
    else:
        cfg = json.loads((ROOT / "profiles" / "drafters" / f"{m['drafter']}.json").read_text())["config"]
    if m.get("text_only"):
        text = dict(cfg["text_config"])
        text["architectures"] = [m["text_only"]]
        text.setdefault("torch_dtype", cfg.get("torch_dtype", "bfloat16"))
        cfg = text
    for key in m.get("config_remove", []):
        *path, last = key.split(".")
        node = cfg
        for p in path:
            node = node.get(p, {})
        node.pop(last, None)
    for key, value in m.get("config_updates", {}).items():
        *path, last = key.split(".")
        node = cfg
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
    return cfg


def run_step(s: dict, env: dict, p: dict) -> None:
    tag, out = s["tag"], Path(os.environ.get("OUT", "/tmp/labout"))
    done, log = STATE / f"{tag}.done", STATE / f"{tag}.log"
    if done.exists():
        return
    if not _after(s):
        return
    if s.get("unless_done") and (STATE / f"{s['unless_done']}.done").exists():
        (STATE / f"{tag}.end").touch()
        print(f"== {tag}: skipped ({s['unless_done']} finished)")
        return
    env = {**env, **s.get("env", {})}
    if s.get("gpus"):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, s["gpus"]))
    timeout = s.get("timeout", 560)
    log.write_text("")
    if "startup" in s:
        env.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_LOGGING_LEVEL="DEBUG")
        rc = sh(f"python3 {HERE}/startup.py '{json.dumps(s['startup'])}'", env, timeout, log)
        ok = "LAB done" in log.read_text(errors="replace")
    elif "serve" in s:  # one `vllm serve` startup (vLLM's own auto-fit, say), stopped once it is up
        srv = subprocess.Popen(f"exec python3 -m vllm.entrypoints.cli.main serve {s['serve']}", shell=True, env=env,
                               stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        rc = _wait_up(srv, log, timeout)
        ok = rc == 0
    elif "probe" in s:
        runs = STATE / tag
        runs.mkdir(parents=True, exist_ok=True)
        env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{ROOT}"
        extra = " ".join(["--skip-tokenizer-init", p.get("probe_extra", ""), s.get("vllm_extra", "")]).strip()
        rc = sh(f"python3 -m vrambudget.cli probe {s['probe']} --vllm-cmd 'python3 -m vllm.entrypoints.cli.main "
                f"serve' --dummy-weights --extra-args '{extra}' --runs-dir {runs}", env, timeout, runs / "probe.txt")
        text = (runs / "probe.txt").read_text(errors="replace")
        ok = any(k in text for k in ("\nceiling", "\nsmallest", "probe stopped"))
        sh(f"cp {runs}/probe.txt {log}; tar -C {STATE} -czf {out}/{tag}.tgz {tag}")
    elif "snapshot" in s:  # what is alive at the memory profile's peak (benchmarks/lab/peak_snapshot.py)
        env.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_LOGGING_LEVEL="DEBUG")
        rc = sh(f"python3 {HERE}/peak_snapshot.py '{json.dumps(s['snapshot'])}'", env, timeout, log)
        ok = "SNAP done" in log.read_text(errors="replace")
    elif "shell" in s:  # a change to the host between startups (e.g. dropping the Triton cache)
        rc = sh(s["shell"], env, timeout, log)
        ok = rc == 0
    else:
        rc = sh(f"nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv; "
                f"python3 -c \"{CTX}\"", env, timeout, log)
        ok = rc == 0
    with open(log, "a") as f:
        f.write(f"rc {rc}\n")
    if ok:
        done.touch()
    (STATE / f"{tag}.end").touch()
    shutil.copy(log, out / f"{tag}.log")
    print(f"== {tag}: rc {rc}{'' if ok else ' (not finished: runs again next call)'}")
    print("\n".join(line for line in log.read_text(errors="replace").splitlines()[-400:]
                    if line.startswith(("LAB", "SNAP", "rc ", "[")) or "Available KV" in line or "Model loading took" in line
                    or "torch peak" in line or "ceiling" in line)[-3000:])


def _after(s: dict) -> bool:
    """Wait until the steps this one comes after have ended (another lane's, on the GPUs this one needs), at most
    the step's timeout; False (the step is skipped this time) if they did not."""
    import time

    end = time.monotonic() + s.get("timeout", 560)
    while not all((STATE / f"{t}.end").exists() for t in s.get("after", [])):
        if time.monotonic() > end:
            print(f"== {s['tag']}: {', '.join(s['after'])} did not end in time; not started")
            return False
        time.sleep(5)
    return True


def _wait_up(srv: subprocess.Popen, log: Path, timeout: float) -> int:
    """0 once the server logs that it is up (then its process group is stopped), its exit code, or 124."""
    import signal
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if "Application startup complete" in log.read_text(errors="replace"):
            os.killpg(srv.pid, signal.SIGTERM)
            srv.wait(timeout=60)
            return 0
        if srv.poll() is not None:
            return srv.returncode or 1
        time.sleep(1)
    os.killpg(srv.pid, signal.SIGKILL)
    return 124


def collect() -> None:
    """Pack the logs and probe folders made so far into $OUT (at most 8 files of 16 MiB come back)."""
    out = os.environ.get("OUT", "/tmp/labout")
    sh(f"cd /tmp/lab && tar -czf /tmp/lab.tgz --exclude='*.done' --exclude='.jit' --exclude='cfg*' . && "
       f"if [ $(stat -c %s /tmp/lab.tgz) -gt 15728640 ]; then split -b 15M /tmp/lab.tgz {out}/lab.tgz.part-; "
       f"else cp /tmp/lab.tgz {out}/lab.tgz; fi; ls -l {out}")


def _alive(pid_file: Path) -> bool:
    """The lane's runner is still running (a finished child not yet reaped is a zombie: not running)."""
    try:
        stat = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def background(argv: list[str], wait: float, lane: str = "") -> int:
    """Start the plan's steps in their own session (once per lane), then follow every lane's output for up to
    `wait` seconds."""
    import time

    suffix = f"-{lane}" if lane else ""
    pid_file, out_file = STATE / f"runner{suffix}.pid", STATE / f"runner{suffix}.out"
    alive = _alive(pid_file)
    if argv and not alive:
        # the call's $OUT is emptied (or gone) once the call returns: the background run writes its copies to a
        # folder of its own, and each call's collect() packs /tmp/lab into that call's $OUT
        env = {**os.environ, "OUT": "/tmp/labout"}
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *argv], env=env,
                                stdout=open(out_file, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        pid_file.write_text(str(proc.pid))
    seen: dict[Path, int] = {}
    end = time.monotonic() + wait
    while True:
        for out in sorted(STATE.glob("runner*.out")):
            text = out.read_text(errors="replace")
            if len(text) > seen.get(out, 0):
                print(f"-- {out.stem}\n{text[seen.get(out, 0):]}", end="", flush=True)
            seen[out] = len(text)
        running = [p.stem for p in sorted(STATE.glob("runner*.pid")) if _alive(p)]
        if not running or time.monotonic() > end:
            print(f"== background runs {'still running: ' + ' '.join(running) if running else 'finished'}", flush=True)
            collect()
            return 0
        time.sleep(5)


def main(argv: list[str]) -> int:
    try:
        return _main(argv)
    except PlanError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    os.chdir(ROOT)  # the plans' model paths are relative to the repository root
    if not argv or argv[0].startswith("-"):
        raise PlanError("usage: run.py PLAN [--list | part | cache | TAG ... | --detach [--lane NAME] TAG ... | "
                        "--wait SECONDS]")
    p = load(argv[0])
    what = argv[1:]
    if what == ["--list"]:
        for s in p["steps"]:
            kind = next((k for k in ("startup", "serve", "snapshot", "probe", "shell", "ctx") if k in s), "?")
            print(f"{s['tag']:<28} {kind:<8} -> {s.get('fixture', '(not kept)')}")
        return 0
    STATE.mkdir(parents=True, exist_ok=True)
    Path(os.environ.get("OUT", "/tmp/labout")).mkdir(parents=True, exist_ok=True)
    wait, lane = 560.0, ""
    for flag in ("--wait", "--lane"):
        if flag in what and what.index(flag) + 1 >= len(what):
            raise PlanError(f"{flag} needs a value")
    if "--wait" in what:
        try:
            wait = float(what[what.index("--wait") + 1])
        except ValueError:
            wait = -1.0
        if not 0 <= wait <= 3600:
            raise PlanError(f"--wait takes seconds from 0 to 3600, not {what[what.index('--wait') + 1]!r}")
    if "--lane" in what:
        lane = what[what.index("--lane") + 1]
        if not lane.isalnum() or len(lane) > 16:
            raise PlanError(f"--lane takes a short name of letters and digits, not {lane!r}")
    tags = [t for i, t in enumerate(what) if not t.startswith("--") and (i == 0 or what[i - 1] not in ("--wait",
                                                                                                      "--lane"))]
    unknown = [t for t in tags if t not in ("part", "cache", "prepare") and t not in {s["tag"] for s in p["steps"]}]
    if unknown:
        raise PlanError(f"plan {argv[0]} has no step {', '.join(unknown)} (--list shows its steps)")
    if "--detach" in what:
        return background([argv[0], *tags], wait, lane)
    if "--wait" in what:
        return background([], wait)
    what = tags
    b = p["bundle"]
    if b is None and what in (["part"], ["cache"], ["prepare"]):
        print(f"{argv[0]} runs on the host's torch alone: no bundle part or JIT cache to move")
        return 0
    if what == ["part"]:
        Path(b["parts"]).mkdir(parents=True, exist_ok=True)
        for part in glob.glob(str(ROOT / b["dir"] / "part-*")):
            shutil.copy(part, b["parts"])
        print(sorted(os.listdir(b["parts"])))
        return 0
    if what == ["prepare"]:  # unpack the bundle and write the models once, before lanes start side by side
        prepare(p)
        print(f"prepared: {b['site'] if b else 'no bundle'}")
        return 0
    if what == ["cache"]:
        return sh("tar -C ~ -czf $OUT/jit-cache.tgz .triton/cache .cache/flashinfer 2>/dev/null; ls -l $OUT")
    env = prepare(p)
    by_tag = {s["tag"]: s for s in p["steps"]}
    steps = [by_tag[t] for t in what] if what else p["steps"]  # the order given (a later host resumes a plan)
    for s in steps:
        run_step(s, env, p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
