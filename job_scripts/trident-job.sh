# Sourced by the batch scripts in job_scripts/: the steps every trident job takes.
#   trident_job_init SCRIPT_NAME "$@"   --help, Slurm check, deck and --set arguments, site env
#   trident_job_check_grid              the deck's tp x pp x dp against the allocation
#   trident_job_launch SRUN_OPTION ...  srun trident; on exit 3 (checkpointed) requeue the job
# Settings (environment): DECK, TRIDENT (the executable), TRIDENT_SITE_ENV (a file sourced before
# launch), TRIDENT_REQUEUE (1: requeue on exit 3, the default; 0: end the job, as job_scripts/chain
# does).

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
  if [ "$status" -eq 3 ]; then
    if [ "${TRIDENT_REQUEUE:-1}" = 1 ]; then
      echo "$job_name: trident checkpointed (exit 3); requeueing job $SLURM_JOB_ID to resume"
      scontrol requeue "$SLURM_JOB_ID"
    else
      echo "$job_name: trident checkpointed (exit 3); the next job of the chain resumes"
    fi
    exit 0
  fi
  exit "$status"
}
