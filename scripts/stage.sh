# Sourced by run_pipeline.sh and run_tables.sh: resumable, timed stages, and two chains of them.
# stage NAME OUTPUT COMMAND...: run COMMAND unless OUTPUT exists; record its wall time in
# $TIMINGS (NAME<TAB>seconds<TAB>OUTPUT's absolute path, symbolic links resolved, so that a
# stage skipped because its output is shared with another run can be looked up there:
# scripts/config_table.py; updated under a lock: two chains of stages may finish together).
# A stage's seconds are its wall time over all its sittings: while it runs, the time so far
# is written to $TIMINGS.partial every STAGE_HEARTBEAT seconds (default 30), so a sitting
# that is interrupted (Ctrl-C, a kill, a lost machine) still counts, to within that
# interval, when the stage is resumed and finishes (a training resumes from its last
# checkpoint, so its earlier sittings were part of its cost).
_stage_record() {  # _stage_record FILE NAME SECONDS [OUTPUT]: replace NAME's line of FILE (under a lock)
  local file=$1 name=$2 seconds=$3 output=${4-}
  (
    flock 9
    touch "$file"
    grep -v "^$name	" "$file" > "$file.tmp" || true
    if [ -n "$output" ]; then printf '%s\t%d\t%s\n' "$name" "$seconds" "$output" >> "$file.tmp"
    elif [ "$seconds" != - ]; then printf '%s\t%d\n' "$name" "$seconds" >> "$file.tmp"; fi
    mv "$file.tmp" "$file"
  ) 9> "$TIMINGS.lock"
}
stage() {
  local name=$1 output=$2; shift 2
  if [ -e "$output" ]; then
    echo "== $name: done ($output exists), skipped"
    return
  fi
  local partial="$TIMINGS.partial" earlier=0
  [ -f "$partial" ] && earlier=$(awk -F'\t' -v n="$name" '$1 == n {s = $2} END {print s + 0}' "$partial")
  if [ "$earlier" -gt 0 ]; then echo "== $name (resumed; ${earlier} s in earlier sittings)"; else echo "== $name"; fi
  local t0=$SECONDS owner=$BASHPID
  (  # heartbeat: ends with the shell that runs the stage (gone, or a zombie); holds no output open
    while sleep "${STAGE_HEARTBEAT:-30}" && [[ "$(ps -o stat= -p "$owner" 2> /dev/null)" == [!Z]* ]]; do
      _stage_record "$partial" "$name" $((earlier + SECONDS - t0))
    done
  ) < /dev/null > /dev/null 2>&1 & local heartbeat=$!
  "$@"  # (under set -e a failure ends this shell here; the heartbeat then stops by itself)
  kill "$heartbeat" 2> /dev/null; wait "$heartbeat" 2> /dev/null || true
  _stage_record "$TIMINGS" "$name" $((earlier + SECONDS - t0)) "$(realpath -m "$output")"
  _stage_record "$partial" "$name" -
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
