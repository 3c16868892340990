#!/usr/bin/env bash
# Per op of a generated model, per inference on the Cortex-M4: estimated
# cycles, instructions and share, from the cycle plugin's output of a
# microcontroller test run (tests/mcu/run.sh writes WORK/MODEL/cortex-m4.cycles,
# its ops grouped with what they call: the plugin's group=op).
#   bench/m4cycles/ops.sh WORK/MODEL/cortex-m4.cycles
# e.g. bench/m4cycles/ops.sh build/tests/mcu-mlperf/ds-cnn-kws/cortex-m4.cycles
set -euo pipefail
f=${1:?usage: ops.sh CORTEX-M4.cycles}
awk '/^regions:/ {n = $2} /^cycles:/ {total = $2}
     /^group:/ {name[++k] = $2; c[k] = $3; i[k] = $5}
     END {
       if (!n || !k) { print "ops.sh: no regions or no groups in " FILENAME > "/dev/stderr"; exit 1 }
       printf "%-22s %12s %12s %6s\n", "op", "cycles", "instructions", "share"
       for (j = 1; j <= k; j++) printf "%-22s %12d %12d %5.1f%%\n", name[j], c[j] / n, i[j] / n, 100 * c[j] / total
     }' "$f"
