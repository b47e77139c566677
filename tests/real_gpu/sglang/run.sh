#!/usr/bin/env bash
# The real-SGLang run on a GPU machine without network, from the collection root:
#
#   tests/real_gpu/sglang/run.sh stage                 move the carried wheel parts (.real-gpu/pNN) to $RG_ROOT
#   tests/real_gpu/sglang/run.sh run [SCENARIO,...]    stage, install SGLang 0.5.16 and ansible-core from the
#                                                      parts, make the tiny checkpoints, run the scenarios
#   tests/real_gpu/sglang/run.sh list                  the scenarios and what each expects
#
# The wheel parts come from `make real-gpu-wheels`; where each command sent to the GPU machine may carry
# 64 MiB, each carries one part folder and `stage` runs once per part, back to back, before `run`; later `run` calls on the same
# machine reuse the install, the checkpoints and Triton's kernel cache. What a run writes lands in $OUT (the
# folder that comes back from the GPU machine; default $RG_ROOT/out): verdict.{json,md} (its scenarios), verdict-all.{json,md}
# (every scenario run on this machine so far) and real-sglang.tar.gz. docs/evidence/real-sglang/README.md
# gives the whole sequence. Environment: RG_ROOT (default /tmp/real-gpu), RG_PARTS (default ./.real-gpu),
# OUT, RG_COMMIT (the tree's commit, recorded).
set -euo pipefail

root=$(cd "$(dirname "$0")/../../.." && pwd)
rg=${RG_ROOT:-/tmp/real-gpu}
# the carried part folders: .real-gpu/ of the directory the command runs in (the checkout's root)
parts_src=${RG_PARTS:-$PWD/.real-gpu}
site=$rg/site
py=${PYTHON:-python3}
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

stage() {
  mkdir -p "$rg/parts"
  local moved=0 f
  for f in "$parts_src"/p[0-9][0-9]/part-[0-9][0-9]; do
    [[ -e $f ]] || continue
    mv -f "$f" "$rg/parts/"
    cp -f "$(dirname "$f")/PARTS" "$rg/parts/PARTS"
    moved=$((moved + 1))
  done
  if [[ ! -f $rg/parts/PARTS ]]; then
    echo "stage: no wheel part in $parts_src or $rg/parts (carry .real-gpu/pNN; make real-gpu-wheels makes them)" >&2
    return 1
  fi
  missing=()
  local have=() want
  want=$(awk '{print $2}' "$rg/parts/PARTS")
  for f in $want; do
    if [[ -f $rg/parts/$f ]]; then have+=("$f"); else missing+=("$f"); fi
  done
  echo "stage: moved $moved part(s); $rg/parts holds ${#have[@]} of $(wc -w <<<"$want")${missing:+; still to carry: ${missing[*]}}"
}

install_site() {
  if [[ -f $site/.installed ]]; then
    echo "install: $site already holds the wheels"
    return 0
  fi
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "install: wheel parts missing (${missing[*]}): carry each .real-gpu/pNN with 'run.sh stage' first" >&2
    return 1
  fi
  local t0; t0=$(now)
  (cd "$rg/parts" && sha256sum --quiet -c PARTS) || { echo "install: a wheel part is damaged (checksums above): carry it again" >&2; return 1; }
  rm -rf "$rg/wheels"
  cat "$rg"/parts/part-[0-9][0-9] | tar -C "$rg" -xf -
  (cd "$rg/wheels" && sha256sum --quiet -c SHA256SUMS)
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
    --target "$site" "$rg"/wheels/*.whl
  touch "$site/.installed"
  echo "install: $(ls "$rg"/wheels/*.whl | wc -l) wheels into $site in $(took "$t0") s"
}

case ${1:-} in
  stage)
    stage
    ;;
  run)
    t0=$(now)
    stage
    install_site
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    export RG_ROOT=$rg RG_INSTALL_S=$(took "$t0")
    exec "$py" "$root/tests/real_gpu/sglang/run.py" ${2:+--scenarios "$2"}
    ;;
  list)
    exec "$py" "$root/tests/real_gpu/sglang/run.py" --list
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
