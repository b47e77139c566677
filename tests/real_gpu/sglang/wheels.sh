#!/usr/bin/env bash
# Prepare, on a machine with network, the wheel folder the real-SGLang run installs on the GPU machine
# (which has no network), cut in parts that each fit one command sent there (64 MiB with the tree).
#
#   tests/real_gpu/sglang/wheels.sh DIR        (make real-gpu-wheels: DIR = .real-gpu)
#
# DIR/wheels/       the wheels of wheels.txt (cp312, manylinux x86_64) and their SHA256SUMS
# DIR/pNN/part-NN   one slice of a tar of DIR/wheels (split -b PART_MIB), with PARTS beside it: the
#                   checksum of every slice, so the GPU machine knows when it has them all
# Environment: PART_MIB (default: what 64 MiB leaves beside the tree that travels with each part, less 2 MiB
# of headroom), PIP (default python3 -m pip).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $(basename "$0") DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
# the tree (tracked and untracked files that git does not ignore) travels with every part
tree_bytes=$(cd "$here/../../.." && { git ls-files -z; git ls-files -z --others --exclude-standard; } | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
tree_mib=$(( (tree_bytes + 1048575) / 1048576 ))
part_mib=${PART_MIB:-$(( 64 - tree_mib - 2 ))}
if (( part_mib < 8 )); then
  echo "the tree that travels is $tree_mib MiB: too little of the 64 MiB a call is left for wheel parts" >&2
  exit 1
fi
pip=${PIP:-python3 -m pip}
mkdir -p "$dir/wheels"

# pip matches the manylinux tag exactly: name every tag these wheels were built for
$pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$dir/wheels" -r "$here/wheels.txt"

# exactly one wheel per pin: two versions of a package stop pip on the GPU machine
python3 - "$here/wheels.txt" "$dir/wheels" <<'EOF'
import os, re, sys
norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()
pins = {}
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        name, version = line.split("==")
        pins[norm(name)] = version
have = {}
for f in os.listdir(sys.argv[2]):
    if f.endswith(".whl"):
        name, version = f.split("-")[:2]
        have.setdefault(norm(name), []).append((version, f))
problems = ["missing: %s==%s" % (n, v) for n, v in sorted(pins.items()) if n not in have]
problems += ["not pinned in wheels.txt (remove it): %s" % f for n, fs in sorted(have.items()) if n not in pins for _, f in fs]
problems += ["%s: %s, want %s" % (n, [f for _, f in fs], pins[n]) for n, fs in sorted(have.items())
             if n in pins and [v for v, _ in fs] != [pins[n]]]
if problems:
    sys.exit("wheel folder %s does not match wheels.txt:\n  %s" % (sys.argv[2], "\n  ".join(problems)))
print("%d wheels, one per pin" % len(pins))
EOF

(cd "$dir/wheels" && sha256sum -- *.whl > SHA256SUMS)
rm -rf "$dir"/p[0-9][0-9] "$dir/split"
mkdir -p "$dir/split"
tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - wheels \
  | split -b "${part_mib}M" -d -a 2 - "$dir/split/part-"
(cd "$dir/split" && sha256sum -- part-* > PARTS)
n=0
for f in "$dir"/split/part-*; do
  p=$(basename "$f"); p=${p#part-}
  mkdir -p "$dir/p$p"
  mv "$f" "$dir/p$p/"
  cp "$dir/split/PARTS" "$dir/p$p/"
  n=$((n + 1))
done
rm -rf "$dir/split"

printf '%s: %d wheels, %s MB, in %d parts of at most %d MiB (%s)\n' "$dir" "$(ls "$dir"/wheels/*.whl | wc -l)" \
  "$(du -sm "$dir/wheels" | cut -f1)" "$n" "$part_mib" "$(cd "$dir" && echo p[0-9][0-9] | tr ' ' ,)"
printf 'the tree travels with each part: %d MiB (the limit is 64 MiB a call)\n' "$tree_mib"
if (( tree_bytes + part_mib * 1048576 > 64 * 1048576 )); then
  echo "tree + one part exceed 64 MiB: set PART_MIB lower" >&2
  exit 1
fi
