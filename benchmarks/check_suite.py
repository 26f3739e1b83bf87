"""CPU time of the whole check suite on one submission, once torch is imported.

What it measures, in this one process, with torch limited to one thread (as in the sandbox and the
reference computation), after one untimed warm-up pass (the first meta-device op etc. are slow once per
process; a sandbox server pays that once while warming up, before any submission):
  * the child's side, what the sandbox's children do: load the submission's cells (`load_cells`), run the probes
    the grader asks first (`ASKED_FIRST`) and those it asks when a verdict needs their answers (`WHEN_NEEDED`) on
    one `Probing(namespace, kit, Plan.draw(seed), sources)`, encode each answer for the wire
    (`encode_observation`), and the JSON framing of the reply;
  * the parent's side: reading the answers strictly, naming the recorded runs, replaying them, and every
    verdict (`grading.evaluation.evaluate(raw, plan)`), with the reference's answers already cached (as in grade-class:
    once per seed, shared by the class);
  * the reference's answers themselves (`grading.reference.reference`, cache cleared), a one-off per seed that a
    single-submission `grade` pays in full (while its sandbox starts on the other core);
and, as the baseline, the CPU time (user + sys) of `python -c "import torch"` in a subprocess.
Everything is `time.process_time()` (all threads of this process), median of --repeat passes.

Target: the full suite (child + parent, reference cached) <= 0.3 s CPU after import torch. The line
"with the reference" is the stricter reading (one submission graded on its own), held to 1 s.

Side by side with another checkout of the kit (the kit before a change), run its copy of this script from its root
with PYTHONPATH set to that root: the environment's editable install otherwise imports this checkout's grader.

Reading the output: per-probe CPU in ms (with its share of the probes), the stages, the totals with
OK / MISSED, and the suite as a multiple of the `import torch` baseline. The sanity line gives the
score the verdicts gave the submission (the solution should get full marks).

    .venv/bin/python benchmarks/check_suite.py [--repeat N] [--seed S] [--notebook PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.3  # the suite, reference cached
ALONE_TARGET_S = 1.0  # with the reference computed


def import_torch_cpu(repeat: int) -> float:
    """Median CPU time (user + sys) of a fresh `python -c "import torch"`."""
    samples = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(samples)


def one_pass(cells, kit_ns, seed: int, modules) -> dict:
    """One full suite; returns CPU seconds per stage and per probe."""
    from autograder.course import kit

    (evaluation, reference), (cells_, job, plan_, probes), protocol = modules
    clock = time.process_time
    times: dict[str, float] = {}
    started = clock()
    namespace, errors = cells_.load_cells(cells)
    times["load cells"] = clock() - started
    plan = plan_.Plan.draw(seed)
    probing = probes.Probing(namespace, kit_ns, plan, [code for _, code in cells])
    encoded, probe_times, encode_time, asked = {}, {}, [0.0], [0.0]

    def answer(names) -> dict:  # what a child does with a job: answer each question and encode the answer
        for name in names:
            started = clock()
            observation = probes.run_probe(name, probing)
            probe_times[name] = clock() - started
            started = clock()
            encoded[name] = protocol.encode_observation(observation)
            encode_time[0] += clock() - started
        return {name: encoded[name] for name in names}

    def ask(names) -> dict:  # a question the parent asks when a verdict needs its answer (`evaluation.Answers`)
        started = clock()
        try:
            return answer(names)
        finally:
            asked[0] += clock() - started

    answer(probes.ASKED_FIRST)
    raw = {
        "observations": encoded,
        "loaded": {"cell_errors": errors[:20], "defined": [n for n in job.GRADED_NAMES if n in namespace]},
        "runs": ["finished"],
        "output": "",
        "seconds": 0.0,
    }
    started = clock()
    raw = protocol.FrameReader(limit=256_000_000).feed(protocol.frame(raw))[0]  # to the parent and back
    times["JSON framing"] = clock() - started
    started = clock()
    from autograder.engine.reading import replays

    replays._PROFILES.clear()  # every submission's own replay, as for a class of different programs
    checks = evaluation.evaluate(raw, plan, sources=[code for _, code in cells], ask=ask).checks
    times["verdicts (evaluate)"] = clock() - started - asked[0]
    times["probes"] = sum(probe_times.values())
    times["encode observations"] = encode_time[0]
    reference.reference.cache_clear()
    started = clock()
    reference.reference(seed, "cpu", kit.KIT)
    times["reference (per seed)"] = clock() - started
    score = sum(c.points for c in checks), sum(c.max_points for c in checks)
    times = {
        name: times[name]
        for name in ("load cells", "probes", "encode observations", "JSON framing", "verdicts (evaluate)", "reference (per seed)")
    }
    return {"stages": times, "probes": probe_times, "score": score, "errors": errors}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="measured passes (default 5), after one warm-up")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--notebook", type=Path, default=ROOT / "solutions" / "layernorm.ipynb")
    args = parser.parse_args(argv)

    baseline = import_torch_cpu(max(3, min(args.repeat, 5)))
    started = time.process_time()
    import torch

    torch_here = time.process_time() - started
    started = time.process_time()
    from autograder.course import kit
    from autograder.course.notebook import read_cells, student_code
    from autograder.engine.questions import cells as cells_, job, plan as plan_, probes
    from autograder.grading import evaluation, reference
    from autograder.sandbox.inside import protocol

    grader_import = time.process_time() - started
    torch.set_num_threads(1)
    modules = ((evaluation, reference), (cells_, job, plan_, probes), protocol)

    started = time.process_time()
    kit_ns, kit_errors = cells_.load_cells(kit.KIT.public_code())
    kit_load = time.process_time() - started
    if kit_errors:
        print(f"the kit's public code failed to load: {kit_errors[0]}")
        return 1
    cells = student_code(read_cells(args.notebook))

    started = time.process_time()
    warm = one_pass(cells, kit_ns, args.seed, modules)
    warm_up = time.process_time() - started
    passes = [one_pass(cells, kit_ns, args.seed, modules) for _ in range(args.repeat)]

    probe_ms = {name: 1000 * statistics.median(p["probes"].get(name, 0.0) for p in passes) for name in passes[0]["probes"]}
    stage_ms = {name: 1000 * statistics.median(p["stages"][name] for p in passes) for name in passes[0]["stages"]}
    suite_totals = [sum(v for k, v in p["stages"].items() if k != "reference (per seed)") for p in passes]
    suite = statistics.median(suite_totals)
    with_reference = statistics.median(sum(p["stages"].values()) for p in passes)

    print(
        f"submission: {args.notebook.relative_to(ROOT) if args.notebook.is_relative_to(ROOT) else args.notebook}"
        f" (seed {args.seed}); {args.repeat} measured passes after one warm-up; torch threads: 1"
    )
    unasked = [name for name in probes.PROBES if name not in passes[0]["probes"]]
    print("\nper probe, median CPU ms (the child's work)" + (f"; not asked: {', '.join(unasked)}" if unasked else ""))
    probes_total = sum(probe_ms.values())
    for name, ms in sorted(probe_ms.items(), key=lambda item: -item[1]):
        print(f"  {name:16s} {ms:8.1f}  {100 * ms / probes_total:5.1f}%")
    print("\nstages, median CPU ms")
    for name, ms in stage_ms.items():
        print(f"  {name:24s} {ms:8.1f}")
    print(
        f"\none-off costs, CPU s: import torch here {torch_here:.2f}; import autograder.grading & co "
        f"{grader_import:.2f}; load kit code {kit_load:.2f}; warm-up pass (incl. first reference) {warm_up:.2f}"
    )
    slowest = sorted({**warm["stages"], **warm["probes"]}.items(), key=lambda item: -item[1])[:4]
    print(
        "  warm-up pass, largest items (CPU s; probes are part of 'probes'): "
        + ", ".join(f"{name} {seconds:.2f}" for name, seconds in slowest)
    )
    print(f"baseline: `python -c \"import torch\"` in a subprocess: {baseline:.2f} s CPU (median)")

    print(
        f"\nfull suite, child + parent, reference cached: {suite:.3f} s CPU  "
        f"[{', '.join(f'{t:.3f}' for t in suite_totals)}]  {'OK' if suite <= TARGET_S else 'MISSED'} "
        f"(target <= {TARGET_S:g} s)"
    )
    print(
        f"with the reference computed (one `grade` alone): {with_reference:.3f} s CPU  "
        f"{'OK' if with_reference <= ALONE_TARGET_S else 'MISSED'} (target <= {ALONE_TARGET_S:g} s)"
    )
    print(f"ratio to the import-torch baseline: suite {suite / baseline:.2f}x, with reference {with_reference / baseline:.2f}x")
    got, most = passes[-1]["score"]
    print(
        f"\nsanity: the verdicts gave {got:g} / {most:g} points"
        + (f"; cell errors: {json.dumps(passes[-1]['errors'])[:300]}" if passes[-1]["errors"] else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
