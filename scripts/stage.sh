# Sourced by run_pipeline.sh and run_tables.sh: resumable, timed stages, and two chains of them.
# stage NAME OUTPUT COMMAND...: run COMMAND unless OUTPUT exists; record its wall time in
# $TIMINGS (NAME<TAB>seconds<TAB>OUTPUT's absolute path, symbolic links resolved, so that a
# stage skipped because its output is shared with another run can be looked up there:
# scripts/config_table.py; updated under a lock: two chains of stages may finish together)
stage() {
  local name=$1 output=$2; shift 2
  if [ -e "$output" ]; then
    echo "== $name: done ($output exists), skipped"
    return
  fi
  echo "== $name"
  local t0=$SECONDS
  "$@"
  (
    flock 9
    grep -v "^$name	" "$TIMINGS" > "$TIMINGS.tmp" || true
    printf '%s\t%d\t%s\n' "$name" $((SECONDS - t0)) "$(realpath -m "$output")" >> "$TIMINGS.tmp"
    mv "$TIMINGS.tmp" "$TIMINGS"
  ) 9> "$TIMINGS.lock"
}
# chains FUNC_A FUNC_B: with JOBS >= 2 the two chains of stages run side by side (one CPU
# thread per model: THREADS=1), else one after the other; fails if either fails
chains() {
  if [ "${JOBS:-2}" -ge 2 ]; then
    "$1" & local pid_a=$!
    "$2" & local pid_b=$!
    local status=0
    wait "$pid_a" || status=1
    wait "$pid_b" || status=1
    [ "$status" = 0 ] || { echo "a chain of stages failed (see above)" >&2; return 1; }
  else
    "$1"
    "$2"
  fi
}
