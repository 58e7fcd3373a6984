#!/usr/bin/env bash
# gpu-check.sh measures issues 14's and 30's figures on a GPU machine from the bundle
# scripts/gpu-bundle.sh built (no Go toolchain, no network needed), each
# step timed and bounded, and writes them to one Markdown results file
# ready to become docs/GPU.md. Without a GPU it runs what it can against
# the CPU fallback and says, step by step, what it skipped and why.
#
#   scripts/gpu-check.sh [--bundle DIR] [--results FILE] [--deadline SEC] [STEP...]
#
# Steps (default all, in this order):
#   facts      nvidia-smi, driver, CUDA, compute-sanitizer, PyTorch versions
#   cuda-test  the test binaries, LOADERD_REQUIRE_GPU=1 when a GPU is there
#   sanitizer  compute-sanitizer memcheck and racecheck on the CUDA tests
#   devices    trainer devices (text and JSON)
#   transfer   host-to-device copies: registered shared mapping vs pageable, GB/s
#   profile    BenchmarkStep: whole training steps of the CIFAR CNN, images/s,
#              and one op-by-op profile of each (where a step's time goes)
#   cifar      CIFAR-10 with the Go trainer on CUDA, fed by loaderd (holdout
#              1,000 per class), then --batch auto's search; without a GPU
#              a 3-step CPU smoke run and the search under --device-memory
#   torch      python/examples/gpu_compare.py: ResNet-18 fed by the Python
#              client vs DataLoader; without CUDA a tiny CPU smoke run
#   torch-step python/examples/torch_step.py: PyTorch's step rate for the
#              same ResNet-18 (bf16 channels-last, TF32, f32), GPU only
#   torch-recipe python/examples/torch_recipe.py: the cifar step's recipe
#              in PyTorch on the same loaderd datasets, GPU only
#
# --deadline bounds the whole run (default 570 s, inside the device tool's
# 10-minute command limit): each step's timeout is cut to what is left, and
# a step with under 20 s left is skipped, saying so. Results go to --results
# (default $OUT/gpu-check.md on the device machine, else
# .gpu-bundle/out/gpu-check.md), logs beside it in gpu-check-logs.tar.gz.
# Knobs (environment): CIFAR_ARGS (trainer train flags), CIFAR_EPOCHS
# (auto: sized to CIFAR_TIMEOUT by a probe run; or a number),
# CIFAR_MAX_EPOCHS, CIFAR_PROBE_STEPS, CIFAR_TIMEOUT,
# CIFAR_BATCH_AUTO (0: skip the --batch auto search), TORCH_ARGS
# (gpu_compare.py flags), TORCH_TIMEOUT, TORCH_STEP_TIMEOUT,
# TORCH_RECIPE_EPOCHS (a list: one run each), TORCH_RECIPE_TIMEOUT,
# SANITIZER_TIMEOUT (each tool),
# GPU_CHECK_WORK (/tmp/loaderd-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bundle=.gpu-bundle results="" deadline=570 steps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=$2; shift ;;
    --results) results=$2; shift ;;
    --deadline) deadline=$2; shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    -*) echo "gpu-check: unknown flag $1" >&2; exit 2 ;;
    *) steps+=("$1") ;;
  esac
  shift
done
all=(facts cuda-test sanitizer devices transfer profile cifar torch torch-step torch-recipe)
[ ${#steps[@]} -gt 0 ] || steps=("${all[@]}")
for s in "${steps[@]}"; do
  [[ " ${all[*]} " == *" $s "* ]] || { echo "gpu-check: unknown step $s (steps: ${all[*]})" >&2; exit 2; }
done
if [ -z "$results" ]; then
  if [ -n "${OUT:-}" ]; then results=$OUT/gpu-check.md; else results=$bundle/out/gpu-check.md; fi
fi
bundle=$(cd "$bundle" 2>/dev/null && pwd) || { echo "gpu-check: no bundle directory (run scripts/gpu-bundle.sh)" >&2; exit 2; }
mkdir -p "$(dirname "$results")"
work=${GPU_CHECK_WORK:-/tmp/loaderd-gpu}
logs=$work/logs
rm -rf "$logs"
mkdir -p "$work/bin" "$work/test" "$work/lib" "$work/data" "$logs"
start=$SECONDS

# --- unpack the bundle ------------------------------------------------------
unxz_to() { # src dst: xz -d, or Python's lzma where the tool is missing
  if command -v xz >/dev/null; then xz -dc "$1" >"$2"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; fi
}
for sub in bin test lib; do
  for f in "$bundle/$sub"/*; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .xz)
    if [ "$f" -nt "$work/$sub/$name" ]; then
      case "$f" in *.xz) unxz_to "$f" "$work/$sub/$name" ;; *) cp "$f" "$work/$sub/$name" ;; esac
      chmod +x "$work/$sub/$name"
    fi
  done
done
tar=$work/data/cifar10-train-jpg.tar
gz=$bundle/data/cifar10-train-jpg.tar.gz
if [ -f "$gz" ] && [ "$gz" -nt "$tar" ]; then gzip -dc "$gz" >"$tar.tmp" && mv "$tar.tmp" "$tar"; fi
if [ ! -f "$tar" ] && [ -f ../shared/data/cifar10-train-jpg.tar ]; then tar=$(cd ../shared/data && pwd)/cifar10-train-jpg.tar; fi

# CUDA's libraries: the toolkit's, and those of the Python environment's
# nvidia-* wheels (NVRTC, cuBLAS, NCCL); loaderd's libturbojpeg.
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then py=$(command -v "$p"); break; fi
done
libs=$work/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do [ -d "$d" ] && libs=$libs:$d; done
if [ -n "$py" ]; then
  libs=$libs:$("$py" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(":".join(d for r in roots for d in sorted(glob.glob(os.path.join(r, "*", "lib")) + glob.glob(os.path.join(r, "*", "lib64")))))
EOF
)
fi
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin
sanitizer=$(command -v compute-sanitizer || true)

gpu=0 gpu_name="none" driver="none" why_no_gpu=""
if ! command -v nvidia-smi >/dev/null; then
  why_no_gpu="nvidia-smi not found"
elif ! q=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1) || [ -z "$q" ]; then
  why_no_gpu="nvidia-smi sees no GPU: $(echo "$q" | head -1)"
else
  gpu=1 gpu_name=$(echo "$q" | head -1 | cut -d, -f1) driver=$(echo "$q" | head -1 | cut -d, -f2 | tr -d ' ')
fi

# --- results file -----------------------------------------------------------
{
  echo "# gpu-check results"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- device: $gpu_name$([ $gpu = 0 ] && echo " ($why_no_gpu: CPU fallback, no GPU figures)")"
  echo "- driver: $driver"
  echo "- host: $(uname -srm), $(nproc) cores"
  echo "- bundle: $(head -1 "$bundle/MANIFEST" 2>/dev/null || echo 'no MANIFEST'); $(sed -n 3p "$bundle/MANIFEST" 2>/dev/null)"
  echo "- command: \`scripts/gpu-check.sh ${steps[*]}\`"
  echo
} >"$results"
summary=()

# run_step NAME TIMEOUT SHOWN CMD...: runs CMD with the step's timeout (cut
# to the deadline), logs to $logs/NAME.log, appends SHOWN (the command as a
# person would type it; empty: CMD itself), the status and the output's
# tail (or what extract_NAME picks out) to the results.
run_step() {
  local name=$1 limit=$2 shown=$3; shift 3
  [ -n "$shown" ] || shown=$(printf '%q ' "$@")
  local left=$((deadline - (SECONDS - start)))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -lt 20 ]; then skip "$name" "out of time (--deadline $deadline s)"; return; fi
  local log=$logs/$name.log t0 rc
  t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  local status="passed"
  if [ $rc = 124 ] || [ $rc = 137 ]; then status="TIMED OUT after $limit s"; elif [ $rc != 0 ]; then status="FAILED (exit $rc)"; fi
  summary+=("| $name | $status | $secs s |")
  {
    echo "## $name: $status in $secs s"
    echo
    echo '```sh'
    printf '%s\n' "$shown" | sed "s|$work|\$WORK|g; s|$root/||g"
    echo '```'
    echo
    echo '```'
    if declare -F "extract_${name//-/_}" >/dev/null; then "extract_${name//-/_}" "$log"; else tail -n 40 "$log"; fi
    echo '```'
    echo
  } >>"$results"
  echo "gpu-check: $name: $status in $secs s"
}

skip() {
  summary+=("| $1 | skipped: $2 | |")
  printf '## %s: skipped\n\n%s\n\n' "$1" "$2" >>"$results"
  echo "gpu-check: $1: skipped: $2"
}

# --- steps ------------------------------------------------------------------
step_facts() {
  run_step facts 60 "nvidia-smi --query-gpu=...; nvcc --version; compute-sanitizer --version; python3 -c 'import torch; ...'" bash -c '
    echo "== nvidia-smi"; nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,compute_cap,pcie.link.gen.max,pcie.link.width.max,clocks.max.sm,power.limit --format=csv 2>&1 || echo "nvidia-smi: not available"
    echo "== nvcc"; nvcc --version 2>&1 | tail -2 || echo "nvcc: not found"
    echo "== compute-sanitizer"; compute-sanitizer --version 2>&1 | head -2 || echo "compute-sanitizer: not found"
    echo "== python"; '"${py:-false}"' -c "import torch, sys; print(sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available())" 2>&1 || echo "python3 with torch: not found"
    echo "== host"; uname -r; nproc; free -g | head -2
    echo "== libraries searched (LD_LIBRARY_PATH)"; echo "$LD_LIBRARY_PATH" | tr ":" "\n"'
}
extract_facts() { cat "$1"; }

step_cuda_test() {
  local t=$work/test
  [ -x "$t/cuda.test" ] || { skip cuda-test "no cuda.test in the bundle"; return; }
  local env=(LOADERD_REQUIRE_NVRTC=1) skip=""
  [ $gpu = 1 ] && env+=(LOADERD_REQUIRE_GPU=1)
  # Without a GPU, the emulator's tests (kernels run as host threads meeting
  # at barriers) are scripts/test.sh's, through go test: here they would
  # repeat them, and on a loaded machine their barriers crawl (trainer/cuda
  # took over 200 s under two busy loops, against 7 s quiet).
  [ $gpu = 1 ] || skip="-test.skip=^TestEmulated"
  # Each binary runs in its package directory (testdata), one after another.
  run_step cuda-test 240 "for p in trainer/cuda trainer/cuda/driver trainer/cuda/kernels trainer/nccl trainer/devices; do (cd \$p && ${env[*]} \$WORK/test/\$(basename \$p).test -test.v -test.count=1 $skip); done" \
    env "${env[@]}" bash -c '
    rc=0
    for pkg in trainer/cuda trainer/cuda/driver trainer/cuda/kernels trainer/nccl trainer/devices; do
      bin='"$t"'/$(basename $pkg).test
      [ -x "$bin" ] || { echo "== $pkg: no test binary"; continue; }
      echo "== $pkg"
      (cd "$pkg" && "$bin" -test.v -test.count=1 -test.timeout=200s '"$skip"') || rc=1
    done
    exit $rc'
}
extract_cuda_test() {
  awk '/^== /{pkg=$2} /^--- (PASS|FAIL|SKIP)/{n[pkg" "$2]++} /^--- (FAIL|SKIP)/{print pkg": "$0} /^(ok|FAIL|PASS)$/{} END {for (k in n) print k, n[k]}' "$1" | sort | uniq | head -60
  grep -A8 -E '^\s*--- FAIL' "$1" | head -60
  grep -m1 -o 'cuda:.*kernels loaded as.*' "$1" || true
  grep -m1 -oE 'cuDNN [0-9]+\.[0-9]+\.[0-9]+.*' "$1" || true
  grep -E '(TestCUDNNMatchesOwnKernels|→.* y [0-9.e+-]+  dx )' "$1" | sed 's/^ *//' | head -30
}

step_sanitizer() {
  [ $gpu = 1 ] || { skip sanitizer "no GPU ($why_no_gpu)"; return; }
  [ -n "$sanitizer" ] || { skip sanitizer "compute-sanitizer not found"; return; }
  [ -x "$work/test/cuda.test" ] || { skip sanitizer "no cuda.test in the bundle"; return; }
  local run='^(TestMatchesCPU|TestBadLabelIsStickyArgError|TestLifecycle|TestTrainStepsMatchCPU)$'
  for tool in memcheck racecheck; do
    local cmd="cd trainer/cuda && LOADERD_REQUIRE_GPU=1 compute-sanitizer --tool $tool --error-exitcode 3 --print-limit 20 $work/test/cuda.test -test.run '$run' -test.count=1 -test.v"
    run_step "sanitizer-$tool" "${SANITIZER_TIMEOUT:-150}" "$cmd" bash -c "${cmd/compute-sanitizer/$sanitizer}"
  done
}
extract_sanitizer_memcheck() { grep -E '^(========|--- |ok|PASS|FAIL)' "$1" | tail -n 30; }
extract_sanitizer_racecheck() { extract_sanitizer_memcheck "$1"; }

step_devices() {
  [ -x "$work/bin/trainer" ] || { skip devices "no trainer binary in the bundle"; return; }
  run_step devices 30 "trainer devices && trainer devices --json" bash -c "'$work/bin/trainer' devices && '$work/bin/trainer' devices --json"
}
extract_devices() { cat "$1"; }

step_transfer() {
  [ $gpu = 1 ] || { skip transfer "no GPU ($why_no_gpu)"; return; }
  [ -x "$work/test/cuda.test" ] || { skip transfer "no cuda.test in the bundle"; return; }
  local cmd="cd trainer/cuda && LOADERD_REQUIRE_GPU=1 $work/test/cuda.test -test.run '^\$' -test.bench '^BenchmarkCopyIn\$' -test.benchtime 2s -test.count 3"
  run_step transfer 90 "$cmd" bash -c "$cmd"
}
extract_transfer() { grep -E 'Benchmark|GB/s|^(ok|PASS|FAIL)' "$1"; }

step_profile() {
  [ $gpu = 1 ] || { skip profile "no GPU ($why_no_gpu)"; return; }
  [ -x "$work/test/cuda.test" ] || { skip profile "no cuda.test in the bundle"; return; }
  local cmd="cd trainer/cuda && LOADERD_REQUIRE_GPU=1 LOADERD_PROFILE=1 $work/test/cuda.test -test.run '^\$' -test.bench '^BenchmarkStep\$' -test.benchtime 10x -test.v"
  run_step profile 120 "$cmd" bash -c "$cmd"
}
extract_profile() { grep -vE '^(=== RUN|goos|goarch|pkg|cpu)' "$1" | grep -v 'kernels loaded as' | head -n 200; }

# daemon_up SPEC...: starts loaderd on a Unix socket with the datasets and
# waits until it lists them; sets $addr, $daemon_pid.
daemon_up() {
  local sock=$work/loaderd.sock args=()
  rm -f "$sock" "$sock.fd"
  for d in "$@"; do args+=(--dataset "$d"); done
  "$work/bin/loaderd" serve --unix "$sock" --listen 127.0.0.1:0 "${args[@]}" >"$logs/loaderd.log" 2>&1 &
  daemon_pid=$!
  addr=unix://$sock
  for _ in $(seq 1 600); do
    "$work/bin/trainer" datasets --addr "$addr" >/dev/null 2>&1 && return 0
    kill -0 $daemon_pid 2>/dev/null || break
    sleep 0.1
  done
  echo "gpu-check: loaderd did not come up:" >&2
  tail -n 20 "$logs/loaderd.log" >&2
  return 1
}
daemon_down() { [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; daemon_pid=""; }

step_cifar() {
  [ -x "$work/bin/loaderd" ] && [ -x "$work/bin/trainer" ] || { skip cifar "no loaderd or trainer binary in the bundle"; return; }
  local spec args
  if [ $gpu = 1 ]; then
    [ -f "$tar" ] || { skip cifar "no CIFAR-10 tar (bundle built with --no-data?)"; return; }
    spec="tar:$tar?holdout=1000"
    # Defaults sized for >= 90% validation accuracy: ResNet-18's shape
    # (widths 64-512, two blocks a stage) at batch 512, TF32 GEMMs as
    # PyTorch's convolutions use by default. The 1.2M-parameter
    # 64-128-256 net reached 86.7% in 22 epochs on the H100 (docs/GPU.md).
    # CIFAR_ARGS replaces them.
    read -r -a args <<<"${CIFAR_ARGS:---device cuda --model cnn --widths 64,128,256,512 --blocks 2,2,2,2 --batch 512 --lr 0.4 --label-smoothing 0.1 --tf32 --transport shm}"
    val_images=10000
  else
    spec="synthetic:2048?holdout=10"
    args=(--device auto --model cnn --widths 4,8 --batch 32 --max-steps 3 --goroutines 1 --transport shm)
    val_images=100
  fi
  daemon_up "train=$spec&part=train" "val=$spec&part=val" || { skip cifar "loaderd did not start (see logs)"; return; }
  local epochs=${CIFAR_EPOCHS:-auto} sizing=""
  if [ "$epochs" = auto ]; then size_epochs "$val_images" "${args[@]}"; fi
  args+=(--epochs "$epochs")
  run_step cifar "${CIFAR_TIMEOUT:-420}" "loaderd serve --unix \$WORK/loaderd.sock --dataset 'train=$spec&part=train' --dataset 'val=$spec&part=val' &
trainer train --addr $addr --dataset train --eval val --json ${args[*]}" "$work/bin/trainer" train --addr "$addr" --dataset train --eval val --json "${args[@]}"
  [ -z "$sizing" ] || printf '%s\n\n' "$sizing" >>"$results"
  # --batch auto (issue 14 item 6): the largest batch that fits, by trying.
  if [ "${CIFAR_BATCH_AUTO:-1}" = 0 ]; then
    skip batch-auto "CIFAR_BATCH_AUTO=0"; daemon_down; return
  fi
  local auto=(--device cuda --model cnn --widths 64,128,256 --blocks 1,1,1)
  [ $gpu = 1 ] || auto=(--device cpu --model cnn --widths 4,8 --goroutines 1 --device-memory 16MiB)
  run_step batch-auto 120 "trainer train --addr $addr --dataset train --json --quiet --batch auto --max-steps 2 ${auto[*]}" \
    "$work/bin/trainer" train --addr "$addr" --dataset train --json --quiet --batch auto --max-steps 2 "${auto[@]}"
  daemon_down
  [ $gpu = 1 ] || printf '(CPU smoke run on synthetic data: proves the command line and the fallback, not a figure)\n\n' >>"$results"
}
# size_epochs VAL_IMAGES ARGS...: CIFAR_EPOCHS=auto. A probe run of
# CIFAR_PROBE_STEPS steps with ARGS gives the step rate and the process's
# start-up; from them, the most epochs (training and evaluation, with a
# 10% margin) that fit the time the cifar step will have, at most
# CIFAR_MAX_EPOCHS (30). A OneCycle schedule only peaks in accuracy at its
# end, so a run must be sized to finish, not cut off by its timeout. Sets
# $epochs and $sizing (what was measured, for the results).
size_epochs() {
  local val=$1; shift
  local steps=${CIFAR_PROBE_STEPS:-40} t0 t1 json
  t0=$(date +%s.%N)
  json=$(timeout -k 10 120 "$work/bin/trainer" train --addr "$addr" --dataset train --json --quiet --epochs 1 "$@" --max-steps "$steps" 2>"$logs/cifar-probe.log")
  t1=$(date +%s.%N)
  printf '%s\n' "$json" >>"$logs/cifar-probe.log"
  # Top-level fields only (two spaces in): each of json's epochs repeats
  # seconds and images_per_s when the probe runs past an epoch.
  field() { sed -n "s/^  \"$1\": *\([0-9.e+-]*\).*/\1/p" <<<"$json"; }
  local rate secs total batch
  rate=$(field images_per_s) secs=$(field seconds) total=$(field total_steps) batch=$(field batch)
  if [ -z "$rate" ] || [ -z "$secs" ] || [ -z "$total" ] || [ -z "$batch" ]; then
    epochs=${CIFAR_FALLBACK_EPOCHS:-20}
    sizing="epochs: auto, but the probe run failed (logs/cifar-probe.log), so $epochs"
    return
  fi
  local limit=${CIFAR_TIMEOUT:-420} left=$((deadline - (SECONDS - start)))
  [ "$limit" -le "$left" ] || limit=$left
  # Evaluation is forward only: counted at twice the training rate.
  read -r epochs sizing < <(awk -v r="$rate" -v s="$secs" -v w0="$t0" -v w1="$t1" -v n="$total" -v b="$batch" \
    -v val="$val" -v limit="$limit" -v most="${CIFAR_MAX_EPOCHS:-30}" -v probe="$steps" 'BEGIN {
      startup = (w1 - w0) - s; if (startup < 0) startup = 0
      epoch = n * b / r + val / (2 * r)
      e = int(((limit - startup) * 0.9 - 10) / epoch)
      if (e > most) e = most; if (e < 1) e = 1
      printf "%d epochs: auto, %d: a probe of %d steps ran at %.0f images/s after %.1f s of start-up; an epoch of %d steps and its evaluation take about %.1f s, and the step has %d s\n", e, e, probe, r, startup, n, epoch, limit
    }')
}

# Progress lines go to the log too, so a run cut off by its timeout (no
# JSON) still shows every finished epoch.
extract_cifar() {
  python3 - "$1" <<'EOF' 2>/dev/null || { tr '\r' '\n' <"$1" | grep -E '^epoch [0-9]+/[0-9]+:'; tr '\r' '\n' <"$1" | grep -v '^$' | tail -n 5; }
import json, re, sys
text = open(sys.argv[1]).read()
res = json.loads(text[re.search(r"(?:^|[\r\n])\{", text).end() - 1:text.rindex("}") + 1])
print(f"{res['model']} ({res['params']} parameters) on {res['devices']} {res.get('device', '?')} device(s), mode {res['mode']}, amp {res.get('amp', 'off')}, tf32 {res.get('tf32', False)}")
print("shared-memory registration:", res.get("host_register") or "none (not CUDA, or not --transport shm)")
if res.get("kernels"):
    print("kernels loaded as:", res["kernels"])
if res.get("convolutions"):
    print("convolutions:", res["convolutions"])
print(f"{res['images']} images in {res['seconds']:.1f} s: {res['images_per_s']:.0f} images/s, data wait {100 * res['wait_share']:.2f}% of step time")
t, reached = 0.0, None
for e in res["epochs"]:
    t += e["seconds"] + (e["eval"]["seconds"] if e.get("eval") else 0)
    ev = e.get("eval") or {}
    print(f"epoch {e['epoch'] + 1}: train loss {e['loss']:.4f} acc {100 * e['accuracy']:.2f}%  {e['images_per_s']:.0f} images/s  "
          f"wait {100 * e['wait_share']:.2f}%  | val acc {100 * ev.get('accuracy', float('nan')):.2f}%  (t = {t:.1f} s)")
    if reached is None and ev.get("accuracy", 0) >= 0.90:
        reached = t
print("90% validation accuracy reached at", f"{reached:.1f} s of training + evaluation" if reached else "-- not reached")
EOF
}

extract_batch_auto() {
  python3 - "$1" <<'EOF' 2>/dev/null || tail -n 20 "$1"
import json, sys
text = open(sys.argv[1]).read()
res = json.loads(text[text.index("{"):text.rindex("}") + 1])
print(f"batch auto on {res['devices']} {res['device']} device(s): {res['batch']}")
print("tried:", ", ".join(f"{t['batch']} {'fits' if t['fits'] else 'out of memory'}" for t in res.get("batch_search", [])))
print(f"then {res['steps']} steps at {res['images_per_s']:.0f} images/s")
EOF
}

step_torch() {
  [ -n "$py" ] || { skip torch "no python3 with torch"; return; }
  [ -x "$work/bin/loaderd" ] || { skip torch "no loaderd binary in the bundle"; return; }
  local args
  if [ $gpu = 1 ] && "$py" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    [ -f "$tar" ] || { skip torch "no CIFAR-10 tar (bundle built with --no-data?)"; return; }
    read -r -a args <<<"${TORCH_ARGS:---device cuda --tar $tar --steps 60 --workers 0,2,4,8,16}"
  else
    [ -f "$tar" ] || { skip torch "no CUDA for torch and no CIFAR tar for the CPU smoke run"; return; }
    args=(--device cpu --tiny --tar "$tar")
  fi
  run_step torch "${TORCH_TIMEOUT:-420}" "python3 python/examples/gpu_compare.py --workdir \$WORK/torch ${args[*]}" env PYTHONUNBUFFERED=1 LOADERD_BIN="$work/bin/loaderd" "$py" python/examples/gpu_compare.py \
    --workdir "$work/torch" "${args[@]}"
}
# torch-step: PyTorch's own step rate for BenchmarkStep's ResNet-18 on
# resident random data (bf16 channels-last, TF32, f32), the denominator
# of the Go trainer's ratio.
step_torch_step() {
  [ -n "$py" ] || { skip torch-step "no python3 with torch"; return; }
  [ $gpu = 1 ] || { skip torch-step "no GPU ($why_no_gpu)"; return; }
  run_step torch-step "${TORCH_STEP_TIMEOUT:-120}" "python3 python/examples/torch_step.py" "$py" python/examples/torch_step.py
}
# torch-recipe: the cifar step's recipe in PyTorch on the same loaderd
# datasets (python/examples/torch_recipe.py): the reference accuracy.
step_torch_recipe() {
  [ -n "$py" ] || { skip torch-recipe "no python3 with torch"; return; }
  [ $gpu = 1 ] || { skip torch-recipe "no GPU ($why_no_gpu)"; return; }
  [ -f "$tar" ] || { skip torch-recipe "no CIFAR-10 tar"; return; }
  local spec="tar:$tar?holdout=1000" e
  daemon_up "train=$spec&part=train" "val=$spec&part=val" || { skip torch-recipe "loaderd did not start (see logs)"; return; }
  for e in ${TORCH_RECIPE_EPOCHS:-30}; do
    run_step "torch-recipe-$e" "${TORCH_RECIPE_TIMEOUT:-200}" "python3 python/examples/torch_recipe.py --address $addr --epochs $e" \
      env PYTHONUNBUFFERED=1 "$py" python/examples/torch_recipe.py --address "$addr" --epochs "$e"
  done
  daemon_down
}
extract_torch_step() { grep -E '^(#|\|)' "$1" | head -n 10; }
extract_torch() { sed -n '/^| /,$p' "$1" | head -n 40; grep -E '^(#|note)' "$1" | head; }

for s in "${steps[@]}"; do
  case $s in
    facts) step_facts ;;
    cuda-test) step_cuda_test ;;
    sanitizer) step_sanitizer ;;
    devices) step_devices ;;
    transfer) step_transfer ;;
    profile) step_profile ;;
    cifar) step_cifar ;;
    torch) step_torch ;;
    torch-step) step_torch_step ;;
    torch-recipe) step_torch_recipe ;;
  esac
done

{
  echo "## summary"
  echo
  echo "| step | status | time |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${summary[@]}"
  echo
  echo "Total $((SECONDS - start)) s. Full logs: gpu-check-logs.tar.gz."
} >>"$results"
tar -czf "$(dirname "$results")/gpu-check-logs.tar.gz" -C "$work" logs 2>/dev/null
echo "gpu-check: results in $results"
printf '%s\n' "${summary[@]}"
# Exit non-zero when a step that ran failed or timed out (skips are fine).
! printf '%s\n' "${summary[@]}" | grep -qE 'FAILED|TIMED OUT'
