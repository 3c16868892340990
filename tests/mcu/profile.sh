#!/usr/bin/env bash
# Instructions per inference of each op of a generated model on a
# Cortex-M4 (mps2-an386, the DSP path) or Cortex-M3 under qemu: NAME.c
# compiled with -finstrument-functions (profile_main.c's hooks time each
# opN), run on the inputs of run.sh's work directory. A developer's tool:
# the instrumented build differs slightly from the measured one (each op
# pays two hook calls), the per-op sum matches run.sh's figure closely.
#   profile.sh GEN_DIR NAME INPUTS.inc WORK [CPU]   (CPU: cortex-m4, the
#   default, or cortex-m3; MCU_OPT as in run.sh)
# e.g. profile.sh build/tests/mcu-mlperf/ds-cnn-kws/gen ds_cnn_kws \
#        build/tests/mcu-mlperf/ds-cnn-kws/inputs.inc /tmp/prof
set -euo pipefail
gen=$1 name=$2 inputs=$3 work=$4 cpu=${5:-cortex-m4}
here=$(cd "$(dirname "$0")" && pwd)
up=$(echo "$name" | tr '[:lower:]' '[:upper:]')
case $cpu in cortex-m4) mach=mps2-an386 ;; cortex-m3) mach=mps2-an385 ;; *) echo "profile: cpu $cpu?" >&2; exit 2 ;; esac
mkdir -p "$work"
[ "$inputs" -ef "$work/inputs.inc" ] || cp "$inputs" "$work/inputs.inc"
flags=(-mcpu=$cpu -mthumb -mfloat-abi=soft -ffunction-sections -fdata-sections)
arm-none-eabi-gcc "${flags[@]}" "${MCU_OPT:--O2}" -std=c99 -finstrument-functions \
  -finstrument-functions-exclude-function-list=q_,qk_ -c "$gen/$name.c" -o "$work/prof.o"
arm-none-eabi-gcc "${flags[@]}" -O2 -std=gnu99 -Wall -Wextra -Werror -DQAT_MODEL="$name" -DQAT_MODEL_UP="$up" \
  -DQAT_MODEL_HEADER="\"$name.h\"" -I"$gen" -I"$here" -I"$work" "$here/profile_main.c" "$here/startup.c" \
  "$work/prof.o" -nostartfiles --specs=nano.specs --specs=nosys.specs -T "$here/mps2.ld" -Wl,--gc-sections \
  -o "$work/prof.elf"
timeout 300 qemu-system-arm -M "$mach" -cpu "$cpu" -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -icount shift=0 -kernel "$work/prof.elf" > "$work/prof.txt" 2>&1
arm-none-eabi-nm "$work/prof.elf" | while read -r addr kind sym; do
  [[ $kind == [tT] ]] && echo "$((16#$addr)) $sym"
done > "$work/syms.txt"
# the timed functions by address (Thumb: the symbol's address | 1), in call order
awk 'NR == FNR {name[$1 + 1] = $2; name[$1] = $2; next}
     /^fn / {fn = $2} /^ticks / {t[fn] = $2; order[++n] = fn} /^calibration / {cal = $2} /^inputs / {ni = $2}
     END {
       for (i = 1; i <= n; i++) if (name[order[i]] ~ /_run$/) total = t[order[i]]
       printf "%-22s %12s %6s\n", "op", "insn/inf", "share"
       for (i = 1; i <= n; i++) {
         f = order[i]; insn = t[f] * 2000000 / cal / ni
         printf "%-22s %12d %5.1f%%\n", name[f], insn, total ? 100 * t[f] / total : 0
       }
     }' "$work/syms.txt" "$work/prof.txt"
