# Sourced by run_pipeline.sh and run_tables.sh: resumable, timed stages.
# stage NAME OUTPUT COMMAND...: run COMMAND unless OUTPUT exists; record its wall time in
# $TIMINGS (NAME<TAB>seconds; updated under a lock: two chains of stages may finish together)
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
    printf '%s\t%d\n' "$name" $((SECONDS - t0)) >> "$TIMINGS.tmp"
    mv "$TIMINGS.tmp" "$TIMINGS"
  ) 9> "$TIMINGS.lock"
}
