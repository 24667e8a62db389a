"""Bad decks and bad arguments, run through the real `trident` executable.

Every case must end with exit code 2 and one `trident: error:` message on stderr that names the
offending key (or, for argument errors, the offending argument); a deck error must also name the
deck file and line. ctest runs this file as `deck.bad_input` with TRIDENT_EXE set to the
executable; by hand:

    TRIDENT_EXE=build/cpu/src/trident /usr/bin/python3 -m pytest -q tests/deck/bad_input_cases.py
"""

import os
import pathlib
import re
import subprocess

import pytest

INPUT_DECKS = pathlib.Path(__file__).resolve().parents[2] / "input_decks"
EXIT_BAD_INPUT = 2

# A valid deck; each case patches it. Values are TOML text.
BASE_DECK = {
    "model": {"layers": "2", "d_model": "32", "heads": "4", "seq_len": "16", "vocab": "256"},
    "data": {"kind": '"synthetic"'},
}


def deck_text(patch):
    """BASE_DECK with `patch` ({"section.key": TOML text}) applied, as TOML."""
    sections = {name: dict(keys) for name, keys in BASE_DECK.items()}
    for key, value in patch.items():
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = value
    return "".join(
        f"[{section}]\n" + "".join(f"{name} = {value}\n" for name, value in keys.items())
        for section, keys in sections.items()
    )


@pytest.fixture(scope="session")
def trident():
    exe = os.environ.get("TRIDENT_EXE")
    if not exe:
        pytest.fail("TRIDENT_EXE is not set: run this through ctest (test deck.bad_input) after building "
                    "the `trident` target, or export TRIDENT_EXE=/path/to/trident")
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        pytest.fail(f"TRIDENT_EXE={exe} is not an executable file: build the `trident` target first")
    return exe


def run_trident(trident, args, cwd):
    result = subprocess.run([trident, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    for crash in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "terminate called"):
        assert crash not in result.stderr, f"trident crashed on {args}:\n{result.stderr}"
    return result


def expect_bad_input(result, expected):
    assert result.returncode == EXIT_BAD_INPUT, (
        f"exit code {result.returncode}, expected {EXIT_BAD_INPUT}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    assert "trident: error:" in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, f"expected {text!r} in stderr:\n{result.stderr}"


# (id, patch of BASE_DECK, texts the message must contain). Each message must also name the
# deck file and a line.
DECK_CASES = [
    ("layers_zero", {"model.layers": "0"}, ["model.layers", "at least 1"]),
    ("d_model_string", {"model.d_model": '"big"'}, ["model.d_model", "must be an integer"]),
    ("seq_len_float", {"model.seq_len": "16.0"}, ["model.seq_len", "must be an integer"]),
    ("vocab_one", {"model.vocab": "1"}, ["model.vocab", "at least 2"]),
    ("heads_do_not_divide_d_model", {"model.heads": "5"}, ["model.heads", "1, 2, 4, 8, 16, 32"]),
    ("tie_embeddings_string", {"model.tie_embeddings": '"yes"'}, ["model.tie_embeddings", "true or false"]),
    ("tp_does_not_divide_heads", {"parallel.tp": "3"}, ["parallel.tp", "1, 2, 4"]),
    ("pp_more_than_layers", {"parallel.pp": "3"}, ["parallel.pp", "model.layers = 2"]),
    ("dp_zero", {"parallel.dp": "0"}, ["parallel.dp", "at least 1"]),
    ("order_not_a_permutation", {"parallel.order": '"tp-pp"'}, ["parallel.order", '"tp-dp-pp"']),
    ("stage_layers_wrong_sum", {"parallel.pp": "2", "parallel.stage_layers": "[1, 2]"},
     ["parallel.stage_layers", "add up to 2"]),
    ("unknown_schedule", {"schedule.kind": '"pipedream"'}, ["schedule.kind", '"zb-h1"']),
    ("microbatches_zero", {"schedule.microbatches": "0"}, ["schedule.microbatches", "at least 1"]),
    ("virtual_stages_without_interleaving", {"schedule.virtual_stages": "2"},
     ["schedule.virtual_stages", "interleaved-1f1b"]),
    ("interleaved_with_one_chunk", {"schedule.kind": '"interleaved-1f1b"'},
     ["schedule.kind", "virtual_stages >= 2"]),
    ("interleaved_microbatches_not_a_multiple_of_pp",
     {"model.layers": "4", "parallel.pp": "2", "schedule.kind": '"interleaved-1f1b"', "schedule.virtual_stages": "2",
      "schedule.microbatches": "3"}, ["schedule.microbatches", "multiple of parallel.pp = 2"]),
    ("stage_layers_misspelt_balanced", {"parallel.stage_layers": '"balance"'},
     ["parallel.stage_layers", 'did you mean "balanced"?']),
    ("stage_layers_per_virtual_stage",
     {"model.layers": "4", "parallel.pp": "2", "schedule.kind": '"interleaved-1f1b"', "schedule.virtual_stages": "2",
      "schedule.microbatches": "2", "parallel.stage_layers": "[2, 2]"}, ["parallel.stage_layers", "4 virtual stages"]),
    ("schedule_kind_misspelt_auto", {"schedule.kind": '"atuo"'}, ["schedule.kind", 'did you mean "auto"?']),
    ("sequence_parallel_without_tp", {"parallel.sequence_parallel": "true"},
     ["parallel.sequence_parallel", "parallel.tp > 1"]),
    ("sequence_parallel_seq_len_not_a_multiple_of_tp",
     {"parallel.sequence_parallel": "true", "parallel.tp": "4", "model.seq_len": "18"},
     ["parallel.sequence_parallel", "model.seq_len = 18", "parallel.tp = 4"]),
    ("recompute_unknown", {"schedule.recompute": '"partial"'}, ["schedule.recompute", '"selective"']),
    ("timeout_zero", {"schedule.timeout_s": "0"}, ["schedule.timeout_s", "greater than 0"]),
    ("checkpoint_timeout_negative", {"checkpoint.timeout_s": "-5"}, ["checkpoint.timeout_s", "greater than 0"]),
    ("replan_unknown", {"schedule.replan": '"sometimes"'}, ["schedule.replan", "\"every N\" with N >= 1"]),
    ("replan_every_zero", {"schedule.replan": '"every 0"'}, ["schedule.replan", "\"every N\" with N >= 1"]),
    ("v_half_budget_zero", {"schedule.activation_budget": "0"}, ["schedule.activation_budget", "in (0, 1]"]),
    ("zb_v_one_chunk", {"schedule.kind": '"zb-v"'}, ["schedule.kind", "virtual_stages = 2"]),
    ("schedule_file_missing", {"schedule.kind": '"file"'}, ["schedule.kind", "schedule.file"]),
    ("schedule_file_not_found", {"schedule.kind": '"file"', "schedule.file": '"missing.csv"'},
     ["schedule.file", "missing.csv", "cannot read"]),
    ("schedule_file_with_another_kind", {"schedule.file": '"schedule.csv"'},
     ["schedule.file", 'only with schedule.kind = "file"']),
    ("auto_memory_limit_negative", {"schedule.auto_memory_limit": "-2"}, ["schedule.auto_memory_limit", "at least 0"]),
    ("emulate_forward_negative", {"emulate.forward_ms": "-1"}, ["emulate.forward_ms", "at least 0"]),
    ("emulate_enabled_string", {"emulate.enabled": '"yes"'}, ["emulate.enabled", "true or false"]),
    ("emulate_key_misspelt", {"emulate.backwards_ms": "3"}, ["emulate.backwards_ms", "did you mean `emulate.backward_ms`?"]),
    ("steps_zero", {"train.steps": "0"}, ["train.steps", "at least 1"]),
    ("seed_negative", {"train.seed": "-1"}, ["train.seed", "at least 0"]),
    ("lr_negative", {"train.lr": "-3e-4"}, ["train.lr", "greater than 0"]),
    ("min_lr_above_lr", {"train.lr": "1e-4", "train.min_lr": "1e-3"}, ["train.min_lr", "[0, lr]"]),
    ("unknown_decay", {"train.decay": '"exponential"'}, ["train.decay", '"cosine"']),
    ("unknown_precision", {"train.precision": '"fp16"'}, ["train.precision", '"bf16"']),
    ("beta2_one", {"train.beta2": "1.0"}, ["train.beta2", "[0, 1)"]),
    ("eps_zero", {"train.eps": "0"}, ["train.eps", "greater than 0"]),
    ("grad_clip_negative", {"train.grad_clip": "-1.0"}, ["train.grad_clip", "at least 0"]),
    ("unknown_data_kind", {"data.kind": '"parquet"'}, ["data.kind", '"bin"']),
    ("bin_without_path", {"data.kind": '"bin"'}, ["data.kind", "data.path"]),
    ("bin_file_missing", {"data.kind": '"bin"', "data.path": '"missing_shard.bin"'},
     ["data.path", "missing_shard.bin"]),
    ("text_needs_byte_vocab", {"model.vocab": "50257", "data.kind": '"text"', "data.path": '"corpus.txt"'},
     ["model.vocab", "256"]),
    ("data_pattern_matches_nothing", {"data.kind": '"bin"', "data.path": '"shards/train_*.bin"'},
     ["data.path", "train_*.bin", "matches no file"]),
    ("data_path_list_with_a_number", {"data.kind": '"text"', "model.vocab": "256", "data.path": '["corpus.txt", 3]'},
     ["data.path[1]", "string"]),
    ("megatron_prefix_without_idx", {"data.kind": '"megatron"', "data.path": '"corpus.txt"'},
     ["data.path", "corpus.txt.bin", "Megatron"]),
    ("megatron_given_the_bin_file", {"data.kind": '"megatron"', "data.path": '"missing_text_document.bin"'},
     ["data.path", "without .bin"]),
    ("shuffle_not_boolean", {"data.shuffle": '"yes"'}, ["data.shuffle", "true or false"]),
    ("eval_path_with_synthetic_data", {"eval.path": '"corpus.txt"'}, ["eval.path", "synthetic"]),
    ("eval_without_path_for_files", {"model.vocab": "256", "data.kind": '"text"', "data.path": '"corpus.txt"',
                                     "eval.every": "5"}, ["eval", "eval.path"]),
    ("eval_while_emulating", {"emulate.enabled": "true", "eval.batches": "2"}, ["emulate.enabled", "[eval]"]),
    ("eval_batches_zero", {"eval.batches": "0"}, ["eval.batches", "at least 1"]),
    ("eval_key_misspelt", {"eval.batchs": "2"}, ["eval.batchs", "did you mean `eval.batches`?"]),
    ("synthetic_shorter_than_a_window", {"data.synthetic_tokens": "16"}, ["data.synthetic_tokens", "17"]),
    ("checkpoint_keep_zero", {"checkpoint.keep": "0"}, ["checkpoint.keep", "at least 1"]),
    ("checkpoint_on_failure_typo", {"checkpoint.on_failure": '"contine"'}, ["checkpoint.on_failure", "did you mean \"continue\""]),
    ("resume_missing", {"checkpoint.resume": '"step_00000009.h5"'}, ["checkpoint.resume", '"auto"']),
    ("init_folder_missing", {"checkpoint.init": '"hf:no/such/model"'}, ["checkpoint.init", "no such folder"]),
    ("init_file_missing", {"checkpoint.init": '"gpt2.h5"'}, ["checkpoint.init", "trident-post import"]),
    ("output_dir_empty", {"output.dir": '""'}, ["output.dir", "must not be empty"]),
    ("log_every_zero", {"output.log_every": "0"}, ["output.log_every", "at least 1"]),
    ("key_in_wrong_section", {"model.lr": "1e-3"}, ["model.lr", "did you mean `train.lr`?"]),
    ("misspelt_key", {"model.layer": "2"}, ["model.layer", "did you mean `model.layers`?"]),
    ("misspelt_section", {"trian.steps": "2"}, ["[trian]", "did you mean [train]?"]),
]


@pytest.mark.parametrize("patch, expected", [case[1:] for case in DECK_CASES], ids=[c[0] for c in DECK_CASES])
def test_bad_deck(trident, tmp_path, patch, expected):
    (tmp_path / "corpus.txt").write_text("some text to train on\n")
    deck = tmp_path / "deck.toml"
    deck.write_text(deck_text(patch))
    result = run_trident(trident, ["check", str(deck)], tmp_path)
    expect_bad_input(result, expected)
    assert re.search(re.escape(str(deck)) + r":\d+: ", result.stderr), f"no file:line in:\n{result.stderr}"


# Decks that are not even well-formed TOML or miss the model: (id, text, expected).
RAW_DECK_CASES = [
    ("toml_syntax_error", "[model]\nlayers = 2\nheads = \n", ["deck.toml:3:", "invalid TOML"]),
    ("duplicate_key", "[model]\nlayers = 2\nlayers = 4\n", ["deck.toml:3:", "layers"]),
    ("missing_model_section", "[train]\nsteps = 2\n", ["deck.toml:", "[model]"]),
    ("key_outside_any_section", "steps = 2\n[model]\n", ["deck.toml:1:", "train.steps"]),
]


@pytest.mark.parametrize("text, expected", [case[1:] for case in RAW_DECK_CASES], ids=[c[0] for c in RAW_DECK_CASES])
def test_malformed_deck(trident, tmp_path, text, expected):
    deck = tmp_path / "deck.toml"
    deck.write_text(text)
    expect_bad_input(run_trident(trident, ["check", str(deck)], tmp_path), expected)


# Overrides of a valid deck: (id, command, --set arguments, expected). Messages name the argument.
OVERRIDE_CASES = [
    ("set_layers_zero", "check", ["model.layers=0"], ["--set model.layers=0", "model.layers", "at least 1"]),
    ("set_bare_string_not_a_schedule", "check", ["schedule.kind=pipedream"], ["schedule.kind", '"1f1b"']),
    ("set_string_for_a_number", "check", ["train.lr=fast"], ["--set train.lr=fast", "train.lr", "number"]),
    ("set_unknown_key", "check", ["model.lr=1e-3"], ["model.lr", "did you mean `train.lr`?"]),
    ("set_key_without_section", "check", ["lr=3e-4"], ["--set lr=3e-4", "section.key"]),
    ("set_relation_broken", "check", ["parallel.tp=3"], ["--set parallel.tp=3", "parallel.tp"]),
    ("plan_set_bad_value", "plan", ["train.beta1=1.5"], ["--set train.beta1=1.5", "train.beta1"]),
    ("plan_auto_memory_limit_too_small", "plan",
     ["parallel.pp=2", "schedule.kind=auto", "schedule.auto_memory_limit=0.5"],
     ["schedule.kind", "auto", "memory limit"]),
    ("run_set_bad_value", "run", ["train.steps=0"], ["--set train.steps=0", "train.steps"]),
    # Valid in the deck, refused where it runs: the CPU build (this test's) records no CUDA graphs.
    ("run_cuda_graph_on_the_cpu_build", "run", ["train.cuda_graph=true"],
     ["deck.toml", "train.cuda_graph = true", "CPU build", "train.cuda_graph = false"]),
]


@pytest.mark.parametrize("command, assignments, expected", [case[1:] for case in OVERRIDE_CASES],
                         ids=[c[0] for c in OVERRIDE_CASES])
def test_bad_override(trident, tmp_path, command, assignments, expected):
    deck = tmp_path / "deck.toml"
    deck.write_text(deck_text({}))
    args = [command, str(deck)]
    for assignment in assignments:
        args += ["--set", assignment]
    expect_bad_input(run_trident(trident, args, tmp_path), expected)


# Bad command lines: (id, arguments with DECK standing for a valid deck, expected).
ARGUMENT_CASES = [
    ("no_subcommand", [], ["command"]),
    ("unknown_subcommand", ["frobnicate", "DECK"], ["frobnicate"]),
    ("missing_deck", ["check"], ["DECK"]),
    ("missing_deck_for_plan", ["plan", "--ranks", "8"], ["DECK"]),
    ("deck_file_not_found", ["check", "no_such_deck.toml"], ["no_such_deck.toml"]),
    ("two_decks", ["check", "DECK", "other.toml"], ["other.toml"]),
    ("set_without_equals", ["check", "DECK", "--set", "train.lr"], ["--set", "train.lr"]),
    ("set_missing_its_value", ["check", "DECK", "--set"], ["--set"]),
    ("ranks_not_a_number", ["plan", "DECK", "--ranks", "many"], ["--ranks", "many"]),
    ("ranks_zero", ["plan", "DECK", "--ranks", "0"], ["--ranks", "0"]),
    ("ranks_negative", ["plan", "DECK", "--ranks", "-4"], ["--ranks", "-4"]),
    ("ranks_missing_its_value", ["plan", "DECK", "--ranks"], ["--ranks"]),
    ("ranks_for_run", ["run", "DECK", "--ranks", "4"], ["--ranks"]),
    ("unknown_option", ["check", "DECK", "--frobnicate"], ["--frobnicate"]),
    ("show_schedule_for_check", ["check", "DECK", "--show-schedule"], ["--show-schedule", "plan"]),
]


@pytest.mark.parametrize("args, expected", [case[1:] for case in ARGUMENT_CASES], ids=[c[0] for c in ARGUMENT_CASES])
def test_bad_arguments(trident, tmp_path, args, expected):
    deck = tmp_path / "deck.toml"
    deck.write_text(deck_text({}))
    args = [str(deck) if arg == "DECK" else arg for arg in args]
    expect_bad_input(run_trident(trident, args, tmp_path), expected)


def test_case_table_is_large_enough():
    cases = len(DECK_CASES) + len(RAW_DECK_CASES) + len(OVERRIDE_CASES) + len(ARGUMENT_CASES)
    assert cases >= 25


# Controls: the base deck and the ready decks pass, so the failures above are the patches' doing.
def test_base_deck_is_valid(trident, tmp_path):
    deck = tmp_path / "deck.toml"
    deck.write_text(deck_text({}))
    result = run_trident(trident, ["check", str(deck)], tmp_path)
    assert result.returncode == 0, result.stderr


def empty_llmc_shard(path):
    """An llm.c shard with no tokens: a 256 x int32 header (magic, version, count 0)."""
    path.write_bytes((20240520).to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(254 * 4))
    return path


@pytest.mark.parametrize("deck", sorted(INPUT_DECKS.glob("*.toml")), ids=lambda path: path.name)
def test_ready_deck_is_valid(trident, tmp_path, deck):
    # What the user prepares first (fortunes-llama.toml's shards, finetune-llama.toml's model folder)
    # is stood in for, one refusal at a time: the rest must hold.
    shard = empty_llmc_shard(tmp_path / "empty.bin")
    stand_ins = {"matches no file": ["--set", f"data.path={shard}", "--set", f"eval.path={shard}"],
                 "checkpoint.init: no such folder": ["--set", "checkpoint.init="]}
    overrides = []
    result = run_trident(trident, ["check", str(deck)], tmp_path)
    while result.returncode == EXIT_BAD_INPUT and any(k in result.stderr for k in stand_ins):
        overrides += stand_ins.pop(next(k for k in stand_ins if k in result.stderr))
        result = run_trident(trident, ["check", str(deck), *overrides], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "schedule " in result.stdout, result.stdout


def test_check_prints_the_ranks_and_the_run_directory_for_scripts(trident, tmp_path):
    deck = tmp_path / "deck.toml"
    deck.write_text(deck_text({"parallel.dp": "3"}))
    result = run_trident(trident, ["check", str(deck), "--set", "output.dir=elsewhere/run"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^ranks: 3 \(tp 1 x pp 1 x dp 3\)$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^output: elsewhere/run$", result.stdout, re.MULTILINE), result.stdout


def test_plan_shows_the_schedule_table_and_diagram(trident, tmp_path):
    deck = tmp_path / "deck.toml"
    deck.write_text(deck_text({"parallel.pp": "2", "schedule.microbatches": "4"}))
    result = run_trident(trident, ["plan", str(deck), "--show-schedule"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Schedules for p = 2, m = 4" in result.stdout, result.stdout
    assert re.search(r"^\s+\*\s+1f1b\s", result.stdout, re.MULTILINE), result.stdout
    assert "rank 1 |" in result.stdout, result.stdout
    plain = run_trident(trident, ["plan", str(deck)], tmp_path)
    assert plain.returncode == 0 and "rank 1 |" not in plain.stdout, plain.stdout


def test_run_that_cannot_fit_in_memory_is_refused_before_allocating(trident, tmp_path):
    """GPT-3 175B on one rank: the plan's 2.8 TiB cannot fit in any node this runs on; the run
    stops with exit 2 naming the plan's figure and the node's, before it allocates or writes."""
    out = tmp_path / "run"
    args = ["run", str(INPUT_DECKS / "gpt3-175b.toml"), "--set", f"output.dir={out}"]
    for key in ("tp", "pp", "dp"):
        args += ["--set", f"parallel.{key}=1"]
    result = run_trident(trident, args, tmp_path)
    expect_bad_input(result, ["gpt3-175b.toml", "the plan needs", "but the node has", "trident plan DECK"])
    assert result.stderr.count("trident: error:") == 1, result.stderr
    assert not out.exists()
