# Sourced by the batch scripts in job_scripts/: the steps every trident job takes.
#   trident_job_init SCRIPT_NAME "$@"   --help, Slurm check, deck and --set arguments, site env
#   trident_job_check_grid              the deck's tp x pp x dp against the allocation
#   trident_job_launch SRUN_OPTION ...  srun trident; on exit 3 (checkpointed) requeue the job, on
#                                       exit 4 (a peer stopped answering) retry it
# Settings (environment): DECK, TRIDENT (the executable), TRIDENT_SITE_ENV (a file sourced before
# launch), TRIDENT_REQUEUE (1: requeue on exit 3 and 4, the default; 0: end the job, as
# job_scripts/chain does), TRIDENT_MAX_RETRIES (how many times a job requeues itself on exit 4;
# default 2).

trident_job_usage() {
  sed -n '2,/^#SBATCH/{/^#SBATCH/d;s/^# \{0,1\}//;p}' "$1"
}

trident_job_init() {
  local script=$1
  shift
  case "${1:-}" in -h|--help) trident_job_usage "$script"; exit 0 ;; esac
  if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "$(basename "$script"): not inside a Slurm job; submit it with: sbatch $script [DECK] [--set ...]" >&2
    exit 2
  fi
  job_name=$(basename "$script")
  cd "${SLURM_SUBMIT_DIR:-.}"
  deck=${DECK:-input_decks/tiny.toml}
  if [ $# -gt 0 ] && [[ "$1" != -* ]]; then deck=$1; shift; fi
  deck_args=("$@")
  if [ -n "${TRIDENT_SITE_ENV:-}" ]; then
    [ -f "$TRIDENT_SITE_ENV" ] || { echo "$job_name: TRIDENT_SITE_ENV=$TRIDENT_SITE_ENV: no such file" >&2; exit 2; }
    # shellcheck disable=SC1090
    source "$TRIDENT_SITE_ENV"
  fi
  trident=${TRIDENT:-$(command -v trident || echo build/cpu/src/trident)}
  if [ ! -x "$trident" ]; then
    echo "$job_name: no trident executable at '$trident'; set TRIDENT=/path/to/trident, or load it (spack load trident)" >&2
    exit 2
  fi
}

trident_job_check_grid() {
  local ranks
  ranks=$("$trident" check "$deck" "${deck_args[@]}" | awk '/^ranks:/ {print $2}') || exit 2
  if [ "$ranks" != "$SLURM_NTASKS" ]; then
    echo "$job_name: $deck needs $ranks ranks (tp x pp x dp) but the job has $SLURM_NTASKS tasks;" \
         "submit with --ntasks=$ranks (or nodes x tasks per node = $ranks), or change parallel.* in the deck" >&2
    exit 2
  fi
}

trident_job_launch() {
  echo "$job_name: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $SLURM_JOB_NODELIST:" \
       "$trident run $deck ${deck_args[*]}"
  local status=0
  srun --mpi=pmix "$@" "$trident" run "$deck" "${deck_args[@]}" || status=$?
  if [ "$status" -eq 3 ] || [ "$status" -eq 4 ]; then
    if [ "${TRIDENT_REQUEUE:-1}" != 1 ]; then
      echo "$job_name: trident ended with exit $status; the next job of the chain resumes"
      exit "$((status == 3 ? 0 : status))"
    fi
    if [ "$status" -eq 3 ]; then
      echo "$job_name: trident checkpointed (exit 3); requeueing job $SLURM_JOB_ID to resume"
    else
      trident_job_count_retry
    fi
    scontrol requeue "$SLURM_JOB_ID"
    exit 0
  fi
  exit "$status"
}

# Exit 4: the watchdog ended the run because a rank stopped answering (its node, or the node's
# link, failed). The job requeues to resume from `latest` on nodes Slurm finds healthy, at most
# TRIDENT_MAX_RETRIES times, counted in the job's Comment (kept across requeues), so that a fault
# that recurs at every start does not loop.
trident_job_count_retry() {
  local retries
  retries=$(scontrol show job "$SLURM_JOB_ID" -o | grep -o 'Comment=trident-retries:[0-9]*' | cut -d: -f2 || true)
  retries=${retries:-0}
  if [ "$retries" -ge "${TRIDENT_MAX_RETRIES:-2}" ]; then
    echo "$job_name: a peer stopped answering (exit 4) after $retries retries (TRIDENT_MAX_RETRIES);" \
         "ending the job: check the nodes named in the watchdog's message, then resubmit to resume" >&2
    exit 4
  fi
  echo "$job_name: a peer stopped answering (exit 4); requeueing job $SLURM_JOB_ID to resume from the" \
       "latest checkpoint (retry $((retries + 1)) of ${TRIDENT_MAX_RETRIES:-2})"
  scontrol update JobId="$SLURM_JOB_ID" Comment="trident-retries:$((retries + 1))"
}
